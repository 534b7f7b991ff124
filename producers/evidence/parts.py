"""The content parts of a capture: which fields they are, how each is hashed, where its hash lives.

A *content part* is a field holding what the model saw or produced. It is hashed on its own and
replaced by that hash in the signed manifest, so it can be dropped later (structured-only,
compaction) without breaking the signature. Two kinds:

- text: the ``str`` exactly as given, hashed as its UTF-8 bytes;
- JSON: any JSON value, hashed as its RFC 8785 canonical bytes.

=================================================================  =====  ======================
content field                                                      kind   hash field (same holder)
=================================================================  =====  ======================
``input.requestPayload``                                           JSON   ``requestPayloadHash``
``agentConfiguration.systemPromptText``                            text   ``systemPromptHash``
``agentConfiguration.toolSchemaJson``                              JSON   ``toolSchemaHash``
``renderedContext.text``                                           text   ``hash``
``memoryState.workingSetEntries[i].renderedContent``               text   ``renderedContentHash``
``executionTrace.reasoningTokens`` (list of str)                   JSON   ``reasoningTokensHash``
``executionTrace.toolCalls[i].input``                              JSON   ``inputHash``
``executionTrace.toolCalls[i].output``                             JSON   ``outputHash``
``executionTrace.modelCalls[i].requestBody`` (capture/v2)         text   ``requestBodyHash``
``executionTrace.modelCalls[i].responseBody`` (capture/v2)        text   ``responseBodyHash``
``executionTrace.finalOutputText``                                 text   ``finalOutputHash``
``externalState.observableExternals[i].capturedValue``             JSON   ``capturedValueHash``
``privacy.sealedOriginal`` (capture/v3)                            text   ``sealedOriginalHash``
=================================================================  =====  ======================

Content that is ``None`` or missing is *absent* (structured-only or compacted capture; a JSON part
whose value is JSON ``null`` is indistinguishable from absent, as in the codec). Paths use the list
index (``executionTrace.toolCalls[1].output``); human-facing labels add what an operator searches
for: ``memoryState.workingSetEntries[1](mem_02).renderedContent``,
``executionTrace.toolCalls[1](seq 2 issue_refund).output``,
``executionTrace.modelCalls[0](call 1 openai.chat.completions).requestBody``,
``externalState.observableExternals[0](customer.balance).capturedValue``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from producers import native
from producers.evidence.canonical import JsonHashCache, fast_json_hash, json_hash, text_hash
from schemas.errors import ContractError

PartKind = Literal["text", "json"]


@dataclass(frozen=True, slots=True)
class PartField:
    """One content field of the contract (static: no capture attached)."""

    section: str
    content_key: str
    hash_key: str
    kind: PartKind
    list_key: str | None = None  # set for parts inside a list of records
    repeats: bool = False  # usually the same value in every capture of an agent: cache its hash


PART_FIELDS: tuple[PartField, ...] = (
    PartField("input", "requestPayload", "requestPayloadHash", "json"),
    PartField("agentConfiguration", "systemPromptText", "systemPromptHash", "text"),
    PartField("agentConfiguration", "toolSchemaJson", "toolSchemaHash", "json", repeats=True),
    PartField("renderedContext", "text", "hash", "text"),
    PartField("memoryState", "renderedContent", "renderedContentHash", "text", "workingSetEntries"),
    PartField("executionTrace", "reasoningTokens", "reasoningTokensHash", "json"),
    PartField("executionTrace", "input", "inputHash", "json", "toolCalls"),
    PartField("executionTrace", "output", "outputHash", "json", "toolCalls"),
    PartField("executionTrace", "requestBody", "requestBodyHash", "text", "modelCalls"),
    PartField("executionTrace", "responseBody", "responseBodyHash", "text", "modelCalls"),
    PartField("executionTrace", "finalOutputText", "finalOutputHash", "text"),
    PartField("externalState", "capturedValue", "capturedValueHash", "json", "observableExternals"),
    # the encrypted original of redacted parts (producers.privacy): content like any other, so
    # structured-only captures and compaction drop it and its hash stays signed
    PartField("privacy", "sealedOriginal", "sealedOriginalHash", "text"),
)

_REPEATED = JsonHashCache(min_chars=256)

# Hashes the SDK computed for content it owns (configuration parts), by object identity and kind.
_PINS: dict[tuple[int, PartKind], tuple[Any, str]] = {}
_MAX_PINS = 64


def pin_part(value: Any, kind: PartKind) -> str:
    """Compute the hash of a content value now and remember it for this very object.

    :func:`~producers.evidence.seal` reuses it when the same object is a part of that kind in a
    capture: always for text (a ``str`` cannot change), and for JSON only with ``pinned=True``
    (the recorder, which pins its own snapshots, never mutated). The pin keeps the object alive, so
    its identity cannot be reused by another object.
    """
    digest = text_hash(value) if kind == "text" else json_hash(value)
    if len(_PINS) >= _MAX_PINS:
        with contextlib.suppress(KeyError, RuntimeError, StopIteration):  # a racing thread
            del _PINS[next(iter(_PINS))]
    _PINS[(id(value), kind)] = (value, digest)
    return digest


def pinned_hash(value: Any, kind: PartKind) -> str | None:
    """The hash :func:`pin_part` computed for this object as a part of ``kind``, if any."""
    pin = _PINS.get((id(value), kind))
    return pin[1] if pin is not None and pin[0] is value else None


# section -> (content keys held by the section itself, {list key: content keys of its records})
SECTION_CONTENT: dict[str, tuple[frozenset[str], dict[str, frozenset[str]]]] = {}
for _field in PART_FIELDS:
    _top, _lists = SECTION_CONTENT.setdefault(_field.section, (frozenset(), {}))
    if _field.list_key is None:
        SECTION_CONTENT[_field.section] = (_top | {_field.content_key}, _lists)
    else:
        _lists[_field.list_key] = _lists.get(_field.list_key, frozenset()) | {_field.content_key}


class PartRef(NamedTuple):
    """One content part of one capture: the field, the list index (or None) and the holder dict."""

    field: PartField
    list_index: int | None
    holder: dict[str, Any]

    @property
    def content(self) -> Any:
        return self.holder.get(self.field.content_key)

    @property
    def recorded_hash(self) -> Any:
        return self.holder.get(self.field.hash_key)

    @property
    def path(self) -> str:
        return self._path(self.field.content_key, labelled=False)

    @property
    def hash_path(self) -> str:
        return self._path(self.field.hash_key, labelled=False)

    @property
    def label(self) -> str:
        """The path with the record's id, for messages: ``...workingSetEntries[1](mem_02)...``."""
        return self._path(self.field.content_key, labelled=True)

    def _path(self, key: str, *, labelled: bool) -> str:
        field = self.field
        if field.list_key is None:
            return f"{field.section}.{key}"
        tag = f"({record_tag(field.list_key, self.holder)})" if labelled else ""
        return f"{field.section}.{field.list_key}[{self.list_index}]{tag}.{key}"

    def compute_hash(self) -> str:
        """The hash of the present content; ``ContractError(path)`` if it is not of its kind."""
        content = self.holder.get(self.field.content_key)
        if self.field.kind == "text":
            if type(content) is not str:
                raise ContractError(
                    f"{self.label} is a text part, got {type(content).__name__}", path=self.path
                )
            try:
                return text_hash(content)
            except UnicodeEncodeError as exc:
                raise ContractError(f"{self.label} is not valid Unicode text: {exc}", path=self.path) from exc
        if self.field.repeats:
            return _REPEATED.json_hash(content, path=self.path)
        return fast_json_hash(content) or json_hash(content, path=self.path)


def _new_part_checker(core: Any) -> Any:
    slots = [(f.section, f.list_key, f.content_key, f.hash_key, f.kind == "text") for f in PART_FIELDS]
    return core.PartChecker(slots)


# The native core's ``PartChecker`` (src/content.rs) over :data:`PART_FIELDS`, in their order: verify's
# content check (``check``) and sealing's part loop (``fill``) in one call each.
part_checker: native.PerCore[Any] = native.PerCore(_new_part_checker)


def record_tag(list_key: str, record: Mapping[str, Any]) -> str:
    """What names a record to an operator: entry id, tool-call sequence and name, external key."""
    if list_key == "workingSetEntries":
        return str(record.get("entryId"))
    if list_key == "toolCalls":
        return f"seq {record.get('sequence')} {record.get('toolName')}"
    if list_key == "modelCalls":
        return f"call {record.get('sequence')} {record.get('format')}"
    return str(record.get("key"))


def iter_parts(capture: Mapping[str, Any]) -> Iterator[PartRef]:
    """Every content-part slot of ``capture`` (present or absent), in contract order.

    Sections or records that are not JSON objects are skipped: they hold no recognizable part and
    stay, as they are, inside the signed manifest.
    """
    for field in PART_FIELDS:
        section = capture.get(field.section)
        if not isinstance(section, dict):
            continue
        if field.list_key is None:
            yield PartRef(field, None, section)
            continue
        records = section.get(field.list_key)
        if not isinstance(records, list):
            continue
        for index, record in enumerate(records):
            if isinstance(record, dict):
                yield PartRef(field, index, record)


def content_parts(capture: Mapping[str, Any]) -> dict[str, str]:
    """``{path: computed hash}`` for every content part present in ``capture``.

    Absent parts (``None`` or missing) are not listed: there is nothing to hash. Raises
    :class:`ContractError` naming the path when a part is not of its kind (text that is not a
    ``str``, JSON that has no RFC 8785 form).
    """
    return {ref.path: ref.compute_hash() for ref in iter_parts(capture) if ref.content is not None}

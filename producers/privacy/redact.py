"""Redaction of a capture's content parts: each span of personal data becomes a typed placeholder.

Every content part (:mod:`producers.evidence.parts`) is searched: text parts as they are, JSON parts
string by string (object keys are left alone). A found span is replaced by ``[<KIND>_<n>]``; the same
value gets the same placeholder everywhere in one capture (the e-mail in a memory entry and in the
rendered context both read ``[EMAIL_1]``), so the redacted view still reads coherently and replays;
the configuration (system prompt, tool schema) is numbered first, so its redacted form is the same in
every capture.
Each replacement is recorded (part path, JSON pointer, UTF-8 byte offsets of the placeholder in the
redacted string, kind, placeholder).

The rendered context's spans (and a wire model call's spans) are UTF-8 byte offsets into text that
redaction changes: they are mapped through the edits, so each still frames its part. A supplied hash
of a changed part must be the original's (else :class:`ContractError`, as sealing would say); it is
cleared for sealing to hash the redacted view, and so is the working-set root when an entry changed.
Bodies stored as base64 (not UTF-8) are not searched.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from producers.evidence.parts import PART_FIELDS, PartRef, iter_parts
from producers.privacy.detectors import Detector, Finding
from producers.privacy.native_scan import find_all, find_in_values
from schemas.errors import ContractError

__all__ = ["CaptureRedaction", "Placeholders", "Redacted", "redact_capture", "redact_text"]

# not searched: the sealed original itself
_SKIP = frozenset({"sealedOriginal"})
_ATOMS = frozenset({str, int, float, bool, type(None)})


@dataclass(frozen=True, slots=True)
class Redacted:
    """One replaced span (a ``privacy.redactions`` record)."""

    part: str
    pointer: str
    start: int
    end: int
    kind: str
    placeholder: str

    def to_json(self) -> dict[str, Any]:
        return {
            "part": self.part,
            "pointer": self.pointer,
            "start": self.start,
            "end": self.end,
            "kind": self.kind,
            "placeholder": self.placeholder,
        }


class Placeholders:
    """``[KIND_n]`` per distinct value and kind, numbered in order of first sight, for one capture."""

    def __init__(self) -> None:
        self._names: dict[tuple[str, str], str] = {}
        self._counts: dict[str, int] = {}

    def name(self, kind: str, value: str) -> str:
        key = (kind, value)
        name = self._names.get(key)
        if name is None:
            count = self._counts[kind] = self._counts.get(kind, 0) + 1
            name = self._names[key] = f"[{kind}_{count}]"
        return name


@dataclass(frozen=True, slots=True)
class _Edit:
    """A replacement in UTF-8 bytes of the original text: ``[start, end)`` became ``length`` bytes."""

    start: int
    end: int
    length: int


@dataclass(frozen=True, slots=True)
class _TextResult:
    text: str
    placed: list[tuple[int, int, str, str]]  # (start, end) bytes in the new text, kind, placeholder
    edits: list[_Edit]


def _utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def redact_text(text: str, detectors: Sequence[Detector], placeholders: Placeholders) -> _TextResult | None:
    """``text`` with every finding replaced, or None when nothing was found."""
    return _replace(text, find_all(text, detectors), placeholders)


# The findings of one string, given the string: a detector run, or a look-up of a scan made before.
_Find = Callable[[str], Sequence[Finding]]


def _replace(text: str, findings: Sequence[Finding], placeholders: Placeholders) -> _TextResult | None:
    if not findings:
        return None
    pieces: list[str] = []
    placed: list[tuple[int, int, str, str]] = []
    edits: list[_Edit] = []
    at = 0  # str index in the original
    old_bytes = new_bytes = 0
    for finding in findings:
        between = text[at : finding.start]
        size = _utf8_len(between)
        pieces.append(between)
        old_bytes += size
        new_bytes += size
        placeholder = placeholders.name(finding.kind, text[finding.start : finding.end])
        replaced = _utf8_len(text[finding.start : finding.end])
        pieces.append(placeholder)
        placed.append((new_bytes, new_bytes + len(placeholder), finding.kind, placeholder))
        edits.append(_Edit(old_bytes, old_bytes + replaced, len(placeholder)))
        old_bytes += replaced
        new_bytes += len(placeholder)
        at = finding.end
    pieces.append(text[at:])
    return _TextResult("".join(pieces), placed, edits)


def _remap(offset: int, edits: Sequence[_Edit], *, is_end: bool) -> int:
    """A byte offset of the original text in the redacted one; inside a replaced span it moves to
    that placeholder's edge (a span's start to its start, a span's end to its end)."""
    shift = 0
    for edit in edits:
        if edit.end <= offset:
            shift += edit.length - (edit.end - edit.start)
        elif edit.start < offset:
            return edit.start + shift + (edit.length if is_end else 0)
        else:
            break
    return offset + shift


def _remap_spans(spans: Any, edits: Sequence[_Edit]) -> Any:
    if not isinstance(spans, list):
        return spans
    out = []
    for span in spans:
        if isinstance(span, dict) and type(span.get("start")) is int and type(span.get("end")) is int:
            span = dict(span)
            span["start"] = _remap(span["start"], edits, is_end=False)
            span["end"] = _remap(span["end"], edits, is_end=True)
        out.append(span)
    return out


def _pointer(parent: str, key: str | int) -> str:
    return f"{parent}/{str(key).replace('~', '~0').replace('/', '~1')}"


def _redact_json(
    value: Any, pointer: str, *, part: str, find: _Find, placeholders: Placeholders, out: list[Redacted]
) -> Any:
    """``value`` with its strings redacted: new containers along changed paths, else ``value`` itself.

    Strings are visited depth first, ``dict`` values and ``list`` items in order (the order
    :func:`~producers.privacy.native_scan.find_in_values` numbers them in); a pointer is made only for
    a container or a string with findings.
    """
    kind = type(value)
    if kind is str:
        result = _replace(value, find(value), placeholders)
        if result is None:
            return value
        out.extend(Redacted(part, pointer, s, e, k, p) for s, e, k, p in result.placed)
        return result.text
    if kind is list:
        items: list[Any] | None = None
        for index, item in enumerate(value):
            new = _redact_item(item, pointer, index, part=part, find=find, placeholders=placeholders, out=out)
            if new is not item:
                if items is None:
                    items = list(value)
                items[index] = new
        return value if items is None else items
    if kind is dict:
        copy: dict[Any, Any] | None = None
        for key, item in value.items():
            new = _redact_item(item, pointer, key, part=part, find=find, placeholders=placeholders, out=out)
            if new is not item:
                if copy is None:
                    copy = dict(value)
                copy[key] = new
        return value if copy is None else copy
    return value


def _redact_item(
    item: Any,
    parent: str,
    key: str | int,
    *,
    part: str,
    find: _Find,
    placeholders: Placeholders,
    out: list[Redacted],
) -> Any:
    kind = type(item)
    if kind is str:
        result = _replace(item, find(item), placeholders)
        if result is None:
            return item
        pointer = _pointer(parent, key)
        out.extend(Redacted(part, pointer, s, e, k, p) for s, e, k, p in result.placed)
        return result.text
    if kind is list or kind is dict:
        return _redact_json(
            item, _pointer(parent, key), part=part, find=find, placeholders=placeholders, out=out
        )
    return item


def _scanned(found: dict[int, list[Finding]]) -> _Find:
    """The findings of a value's strings, by ordinal, handed out as :func:`_redact_json` visits them."""
    ordinals = itertools.count()
    return lambda text: found.get(next(ordinals), ())


@dataclass(frozen=True, slots=True)
class CaptureRedaction:
    """The redacted capture and what was taken out of it."""

    capture: dict[str, Any]
    redactions: list[Redacted]
    originals: dict[str, Any]
    """Original content of each changed part, by part path."""
    original_hashes: dict[str, str]
    """The ordinary ``sha256:`` hash of each changed part's original, by part path."""
    original_spans: dict[str, Any]
    """The spans of each changed text part that has spans, as they framed the original, by part path."""


@dataclass(frozen=True, slots=True)
class _Change:
    ordinal: int
    content: Any
    spans: Any
    has_spans: bool


def redact_capture(
    capture: dict[str, Any], detectors: Sequence[Detector], *, owned: bool
) -> CaptureRedaction | None:
    """Redact every content part of ``capture``; None when nothing was found (``capture`` untouched).

    ``owned=True`` changes ``capture`` in place (JSON values are never mutated, only replaced);
    otherwise a copy is redacted and returned.
    """
    placeholders = Placeholders()
    redactions: list[Redacted] = []
    originals: dict[str, Any] = {}
    original_hashes: dict[str, str] = {}
    original_spans: dict[str, Any] = {}
    changes: list[_Change] = []
    # Every string of the capture in one native call when it can; else each string as it comes.
    scan = find_in_values(searched_contents(capture), detectors)
    if scan is not None and not any(scan):
        return None  # nothing found anywhere (most captures)
    searched = [(ordinal, ref) for ordinal, ref in enumerate(iter_parts(capture)) if _searched(ref)]
    # The configuration first: it is the same in every capture of an agent, so its placeholders
    # (and so its redacted text and hash) are too, whatever else a decision holds.
    order = sorted(
        range(len(searched)), key=lambda index: searched[index][1].field.section != "agentConfiguration"
    )

    def each(text: str) -> list[Finding]:
        return find_all(text, detectors)

    for index in order:
        ordinal, ref = searched[index]
        content = ref.content
        field = ref.field
        find: _Find = each
        if scan is not None:
            if not scan[index]:
                continue  # not one finding in any of its strings
            find = _scanned(scan[index])
        if field.kind == "text":
            result = _replace(content, find(content), placeholders)
            if result is None:
                continue
            redactions.extend(Redacted(ref.path, "", s, e, k, p) for s, e, k, p in result.placed)
            has_spans = "spans" in ref.holder and field.content_key in ("text", "requestBody")
            spans = _remap_spans(ref.holder.get("spans"), result.edits) if has_spans else None
            if has_spans:
                original_spans[ref.path] = _copy(ref.holder.get("spans"))
            changes.append(_Change(ordinal, result.text, spans, has_spans))
        else:
            found: list[Redacted] = []
            new = _redact_json(content, "", part=ref.path, find=find, placeholders=placeholders, out=found)
            if new is content:
                continue
            redactions.extend(found)
            changes.append(_Change(ordinal, new, None, False))
        originals[ref.path] = content
        original_hashes[ref.path] = _original_hash(ref)
    if not changes:
        return None
    target = capture if owned else _copy(capture)
    by_ordinal = {change.ordinal: change for change in changes}
    memory_changed = False
    for ordinal, ref in enumerate(iter_parts(target)):
        change = by_ordinal.get(ordinal)
        if change is None:
            continue
        ref.holder[ref.field.content_key] = change.content
        ref.holder[ref.field.hash_key] = None
        if change.has_spans:
            ref.holder["spans"] = change.spans
        memory_changed = memory_changed or ref.field.list_key == "workingSetEntries"
    if memory_changed and isinstance(target.get("memoryState"), dict):
        target["memoryState"]["contextSetHash"] = None
    return CaptureRedaction(target, redactions, originals, original_hashes, original_spans)


# (section, list key or None, content key, text encoding key or None for JSON), in contract order
_SEARCHED_FIELDS = tuple(
    (f.section, f.list_key, f.content_key, f"{f.content_key}Encoding" if f.kind == "text" else None)
    for f in PART_FIELDS
    if f.content_key not in _SKIP
)


def searched_contents(capture: dict[str, Any]) -> list[Any]:
    """The content of every searched part, in :func:`~producers.evidence.parts.iter_parts` order:
    ``[ref.content for ref in iter_parts(capture) if _searched(ref)]`` without a ``PartRef`` each
    (the scan of every capture needs only the values; the refs are made when something is found)."""
    out: list[Any] = []
    for section_key, list_key, content_key, encoding_key in _SEARCHED_FIELDS:
        section = capture.get(section_key)
        if not isinstance(section, dict):
            continue
        if list_key is None:
            holders: list[Any] = [section]
        else:
            records = section.get(list_key)
            if not isinstance(records, list):
                continue
            holders = records
        for holder in holders:
            if not isinstance(holder, dict):
                continue
            content = holder.get(content_key)
            if content is None:
                continue
            if encoding_key is None or (type(content) is str and holder.get(encoding_key) != "base64"):
                out.append(content)
    return out


def _searched(ref: PartRef) -> bool:
    """Whether a part is searched: any JSON content, text unless stored as base64, not the sealed original."""
    content = ref.content
    field = ref.field
    if content is None or field.content_key in _SKIP:
        return False
    if field.kind == "text":
        return type(content) is str and ref.holder.get(f"{field.content_key}Encoding") != "base64"
    return True


def _original_hash(ref: PartRef) -> str:
    """The original's hash; a hash the caller supplied must be it (as sealing would insist)."""
    computed = ref.compute_hash()
    supplied = ref.recorded_hash
    if supplied is not None and supplied != computed:
        raise ContractError(
            f"{ref.label}: supplied hash {supplied} disagrees with the content, which hashes to {computed}",
            path=ref.hash_path,
        )
    return computed


def _copy(value: Any) -> Any:
    """Deep copy of a JSON tree (dicts and lists; tuples become lists)."""
    kind = type(value)
    if kind is dict:
        return {key: item if type(item) in _ATOMS else _copy(item) for key, item in value.items()}
    if kind is list or kind is tuple:
        return [item if type(item) in _ATOMS else _copy(item) for item in value]
    return value

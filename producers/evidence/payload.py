"""The signed bytes and the working-set leaves, from one canonical encoding (the hot path of seal/verify).

By definition (:mod:`producers.evidence.manifest`, :mod:`producers.evidence.merkle`) the payload is
RFC 8785 of the manifest and each Merkle leaf is RFC 8785 of one entry's manifest. A contract entry
has no keys besides the leaf fields and its content, so its manifest *is* its leaf, and its leaf
bytes already appear inside the payload. Encoding both separately costs a second pass over every
entry (the C ``json`` encoder is the main cost here), so this module encodes the manifest once with
markers around the entries and cuts the leaves out:

    "workingSetEntries": [START, e0, SEP, e1, SEP, ..., e(n-1), END]

START, SEP and END are JSON strings holding NUL characters (so they print as ``\\u0000``). The cut
is used only when each marker occurs exactly as often as it was placed — any other occurrence of
its text (some field containing it) raises the count, and no marker can straddle an entry boundary
(entries print as ``{...}``, and SEP's only border, the comma, cannot complete against a brace).
Otherwise, and whenever an entry has extra keys, the reference functions are used. For sealing, the
root goes into the text in place of a ROOT marker that must occur exactly once.

With the native core (:func:`producers.native.core`) none of that is needed: one call of its
``ManifestWriter`` (src/manifest.rs, built from :func:`~producers.evidence.manifest.manifest_rules`)
prints the manifest by definition straight from the capture — no view, no copy — with each leaf and,
for sealing, the root; anything the core declines sends the whole capture down the Python path,
which names the offending field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from producers import native
from producers.evidence.canonical import HASH_PREFIX, encode_normalized
from producers.evidence.manifest import manifest_bytes, manifest_rules, normalized_manifest
from producers.evidence.merkle import WORKING_SET_LEAF_KEYS, merkle_root, position_order, working_set_leaves
from schemas.errors import ContractError

_LEAF_KEYS = frozenset(WORKING_SET_LEAF_KEYS)
_START, _SEP, _END, _ROOT = (f"\x00blackbox:{name}\x00" for name in ("leaves", "leaf", "end", "root"))


def _json(marker: str) -> str:
    return '"' + marker.replace("\x00", "\\u0000") + '"'


_START_TEXT = _json(_START) + ","
_SEP_TEXT = "," + _json(_SEP) + ","
_END_TEXT = "," + _json(_END)
_ROOT_TEXT = _json(_ROOT)


@dataclass(frozen=True, slots=True)
class SigningPayload:
    """``payload``: the manifest bytes to sign or verify; ``leaves``: working-set leaves in position
    order, or None when the entries have no valid order (verify then reports it after the signature)."""

    payload: bytes
    leaves: list[bytes] | None


def signing_payload(capture: dict[str, Any], *, fill_root: bool) -> SigningPayload:
    """Manifest bytes and Merkle leaves of ``capture``.

    ``fill_root=True`` (seal): the RFC 6962 root of the leaves is written to
    ``capture["memoryState"]["contextSetHash"]`` and into the payload; a different non-null value
    already there is a :class:`ContractError`, as is an entry without a valid position.
    ``fill_root=False`` (verify): the payload carries the capture's own ``contextSetHash``.
    """
    core = native.core()
    if core is not None:
        signed = _native_signing_payload(core, capture, fill_root=fill_root)
        if signed is not None:
            return signed
    return python_signing_payload(capture, fill_root=fill_root)


def _native_signing_payload(core: Any, capture: dict[str, Any], *, fill_root: bool) -> SigningPayload | None:
    """:func:`signing_payload` by definition, in one native call; None where the core declines."""
    built = _manifest_writer(core).payload(capture, fill_root)
    if built is None:
        return None
    payload, leaves, root = built
    if fill_root:
        memory = capture.get("memoryState")
        if leaves is None:  # the entries have no valid order: the reference's error names the entry
            entries = memory.get("workingSetEntries") if isinstance(memory, dict) else None
            position_order(entries if isinstance(entries, list) else [])
            return None  # not reached: the core finds no order only where position_order raises
        if root is not None and isinstance(memory, dict):  # the core wrote root into the payload
            supplied = memory.get("contextSetHash")
            if supplied is not None and supplied != root:
                raise ContractError(
                    f"supplied {supplied!r} disagrees with the working set, which gives {root!r}",
                    path="memoryState.contextSetHash",
                )
            memory["contextSetHash"] = root
    return SigningPayload(payload=payload, leaves=leaves)


def _new_manifest_writer(core: Any) -> Any:
    """The core's ManifestWriter, built from this package's tables (one source of the rules)."""
    top_defaults, strips = manifest_rules()
    memory = ("memoryState", "workingSetEntries", "contextPosition", "contextSetHash")
    return core.ManifestWriter(top_defaults, strips, WORKING_SET_LEAF_KEYS, memory)


_manifest_writer: native.PerCore[Any] = native.PerCore(_new_manifest_writer)


def python_signing_payload(capture: dict[str, Any], *, fill_root: bool) -> SigningPayload:
    """:func:`signing_payload` without the native core (one encoding, cut; see the module doc)."""
    memory = capture.get("memoryState")
    entries = memory.get("workingSetEntries") if isinstance(memory, dict) else None
    if not isinstance(entries, list):
        entries = []
    try:
        order: list[int] | None = position_order(entries)
    except ContractError:
        if fill_root:
            raise
        order = None
    normalized = normalized_manifest(capture)
    normalized_memory = normalized.get("memoryState") if normalized is not None else None
    normalized_entries = (
        normalized_memory.get("workingSetEntries") if isinstance(normalized_memory, dict) else None
    )

    leaves: list[bytes] | None = None
    text: str | None = None  # the payload, when it came from the one-pass cut
    if order is not None:
        cut = None
        if (
            entries
            and normalized is not None
            and isinstance(normalized_memory, dict)
            and isinstance(normalized_entries, list)
            and all(type(entry) is dict and entry.keys() <= _LEAF_KEYS for entry in normalized_entries)
        ):
            cut = _encode_and_cut(normalized, normalized_memory, normalized_entries, fill_root=fill_root)
        if cut is not None:
            text, pieces = cut
            leaves = [pieces[index].encode("utf-8") for index in order]
        else:
            leaves = working_set_leaves(
                entries,
                normalized_entries=normalized_entries if isinstance(normalized_entries, list) else None,
            )

    if fill_root and leaves is not None and isinstance(memory, dict):  # else position_order raised
        root = HASH_PREFIX + merkle_root(leaves).hex()
        supplied = memory.get("contextSetHash")
        if supplied is not None and supplied != root:
            raise ContractError(
                f"supplied {supplied!r} disagrees with the working set, which gives {root!r}",
                path="memoryState.contextSetHash",
            )
        memory["contextSetHash"] = root
        if text is not None:
            text = text.replace(_ROOT_TEXT, f'"{root}"')
        elif isinstance(normalized_memory, dict):
            normalized_memory["contextSetHash"] = root

    payload: bytes | None = None
    if text is not None:
        payload = text.encode("utf-8")
    elif normalized is not None:
        try:
            payload = encode_normalized(normalized)
        except UnicodeEncodeError:
            payload = None  # manifest_bytes below names the field
    if payload is None:
        payload = manifest_bytes(capture)
    return SigningPayload(payload=payload, leaves=leaves)


def _encode_and_cut(
    normalized: dict[str, Any],
    normalized_memory: dict[str, Any],
    normalized_entries: list[Any],
    *,
    fill_root: bool,
) -> tuple[str, list[str]] | None:
    """(manifest text without markers, entry texts in list order), or None if the cut is unsafe."""
    marked: list[Any] = [_START, normalized_entries[0]]
    for entry in normalized_entries[1:]:
        marked += (_SEP, entry)
    marked.append(_END)
    normalized_memory["workingSetEntries"] = marked  # a fresh dict (see normalized_manifest)
    if fill_root:
        normalized_memory["contextSetHash"] = _ROOT
    try:
        text = encode_normalized(normalized).decode("utf-8")
    except UnicodeEncodeError:
        return None
    finally:
        normalized_memory["workingSetEntries"] = normalized_entries
    if (
        text.count(_START_TEXT) != 1
        or text.count(_END_TEXT) != 1
        or text.count(_SEP_TEXT) != len(normalized_entries) - 1
        or (fill_root and text.count(_ROOT_TEXT) != 1)
    ):
        return None
    start = text.index(_START_TEXT)
    end = text.index(_END_TEXT)
    pieces = text[start + len(_START_TEXT) : end].split(_SEP_TEXT)
    return text[:start] + ",".join(pieces) + text[end + len(_END_TEXT) :], pieces

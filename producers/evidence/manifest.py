"""The signed manifest: the capture with every content part removed and the signature bytes removed.

Definition (DESIGN decision 1), precisely:

1. Start from the capture in JSON form.
2. Remove every content part (see :mod:`producers.evidence.parts`) — the key itself, whether the
   content is present, ``null`` or missing. Its hash field stays.
3. Remove ``signature.signatureBytes``. ``signature.algorithm`` and ``signature.publicKeyRef`` stay,
   so neither can be swapped without breaking the signature.
4. Omit every object member whose value is ``null``, at any depth (list elements are kept).
   *Absent and null mean the same thing in the contract*, and the Avro round trip turns absent
   optional fields into ``null`` (``schemas.codec`` decodes the full form); without this rule a
   capture sealed before encoding would not verify after decoding.
5. Omit the members capture/v2 added when they hold their default: a top-level ``fidelity`` of
   ``"sdk"`` and an empty ``executionTrace.modelCalls`` (:data:`V2_DEFAULTS`). A v1 capture decodes
   into v2 with exactly those defaults, so its manifest — and every signature made before v2 —
   stays byte-identical; any other value is signed, and since a default and its absence mean the
   same thing, the manifest still determines the capture's fidelity and model calls.
6. Serialize with RFC 8785. Numbers are doubles there, so ``1`` and ``1.0`` (Avro ``double``
   fields come back as floats) give the same bytes.

Everything else — unknown keys, sections that are not objects, the spans of the rendered
context, the Merkle root, leaf count and algorithm — is signed as it is. The signature is ed25519
over ``PAE(MANIFEST_PAYLOAD_TYPE, manifest bytes)`` (:mod:`producers.evidence.dsse`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from producers.evidence.canonical import (
    _normalize,
    _SlowPath,
    canonical_json,
    normalize,
    normalize_stripped,
    omit_nulls,
)
from producers.evidence.parts import SECTION_CONTENT

MANIFEST_PAYLOAD_TYPE = "application/vnd.blackbox.manifest+json;version=replay/v1"

V2_DEFAULTS: dict[str | tuple[str, str], Any] = {"fidelity": "sdk", ("executionTrace", "modelCalls"): []}
"""Members added by capture/v2 that leave the manifest while they hold these (v1-equivalent) values:
top-level keys by name, section members by ``(section, key)``."""
_TOP_DEFAULTS = {key: value for key, value in V2_DEFAULTS.items() if isinstance(key, str)}
_SECTION_DEFAULTS: dict[str, dict[str, Any]] = {}
for _key, _value in V2_DEFAULTS.items():
    if isinstance(_key, tuple):
        _SECTION_DEFAULTS.setdefault(_key[0], {})[_key[1]] = _value


def _is_default(defaults: Mapping[str, Any], key: Any, value: Any) -> bool:
    # type() first: 0 == False and 1.0 == 1 must not pass for a default.
    return key in defaults and type(value) is type(defaults[key]) and value == defaults[key]


def manifest_view(capture: Mapping[str, Any]) -> dict[str, Any]:
    """Steps 1-3 and 5 without copying what is unchanged: the result SHARES nested values with ``capture``.

    For internal use on the hot path (seal, verify); never mutate the result.
    """
    view = {key: value for key, value in capture.items() if not _is_default(_TOP_DEFAULTS, key, value)}
    for section_name, (top_keys, list_keys) in SECTION_CONTENT.items():
        section = capture.get(section_name)
        if not isinstance(section, dict):
            continue
        defaults = _SECTION_DEFAULTS.get(section_name, {})
        stripped = {
            key: value
            for key, value in section.items()
            if key not in top_keys and not _is_default(defaults, key, value)
        }
        for list_key, record_keys in list_keys.items():
            records = stripped.get(list_key)  # not section's: a default left the view above
            if isinstance(records, list):
                stripped[list_key] = [
                    {key: value for key, value in record.items() if key not in record_keys}
                    if isinstance(record, dict)
                    else record
                    for record in records
                ]
        view[section_name] = stripped
    signature = capture.get("signature")
    if isinstance(signature, dict):
        view["signature"] = {key: value for key, value in signature.items() if key != "signatureBytes"}
    return view


Strip = tuple[str, frozenset[str], dict[str, frozenset[str]], dict[str, Any]]


def manifest_rules() -> tuple[dict[str, Any], list[Strip]]:
    """:func:`manifest_view`'s rules as data, for the native core (one source of them):
    ``(top-level defaults, strips)``, each strip ``(name of a dict at the top level, keys it drops,
    {record list key: keys each record drops}, {key: default it drops})``."""
    strips: list[Strip] = [
        (name, top_keys, list_keys, _SECTION_DEFAULTS.get(name, {}))
        for name, (top_keys, list_keys) in SECTION_CONTENT.items()
    ]
    strips.append(("signature", _SIGNATURE_BYTES, {}, {}))
    return dict(_TOP_DEFAULTS), strips


def normalized_manifest(capture: Mapping[str, Any]) -> dict[str, Any] | None:
    """The manifest ready for :func:`~producers.evidence.canonical.encode_normalized`, or ``None``.

    ``None`` when only the slow path (:func:`manifest_bytes`) can serialize it. Its section dicts
    (``memoryState`` included) are fresh and may be patched; everything deeper is shared.
    """
    if type(capture) is not dict:
        normalized = normalize(manifest_view(capture), omit_null_members=True)
        return normalized if isinstance(normalized, dict) else None
    # One pass doing what manifest_view + normalize(omit_null_members=True) do, with the same
    # result (see tests/producers/evidence/test_verify_fastpath.py): the top level keeps every
    # member except nulls; dict sections lose their content keys (records in their lists too);
    # the signature dict loses signatureBytes; every kept value is normalized.
    try:
        out: dict[str, Any] = {}
        for key, value in capture.items():
            if type(key) is not str or (not key.isascii() and max(key) > "\uffff"):
                return None
            kind = type(value)
            if key in _TOP_DEFAULTS and _is_default(_TOP_DEFAULTS, key, value):
                continue
            if kind is str or kind is bool:
                out[key] = value
            elif value is None:
                continue
            elif key in SECTION_CONTENT and isinstance(value, dict):
                out[key] = _normalized_section(
                    value, *SECTION_CONTENT[key], _SECTION_DEFAULTS.get(key, _NO_DEFAULTS)
                )
            elif key == "signature" and isinstance(value, dict):
                out[key] = normalize_stripped(value, _SIGNATURE_BYTES, True)
            else:
                out[key] = _normalize(value, True)
    except (_SlowPath, RecursionError):
        return None
    return out


_SIGNATURE_BYTES = frozenset({"signatureBytes"})
_NO_DEFAULTS: dict[str, Any] = {}


def _normalized_section(
    section: dict[Any, Any],
    top_keys: frozenset[str],
    list_keys: dict[str, frozenset[str]],
    defaults: Mapping[str, Any],
) -> dict[Any, Any]:
    """``normalize`` of the section as :func:`manifest_view` strips it (a fresh dict)."""
    out: dict[Any, Any] = {}
    for key, item in section.items():
        if key in top_keys or (key in defaults and _is_default(defaults, key, item)):
            continue
        if type(key) is not str or (not key.isascii() and max(key) > "\uffff"):
            raise _SlowPath
        kind = type(item)
        if kind is str or kind is bool:
            out[key] = item
        elif item is None:
            continue
        elif key in list_keys and isinstance(item, list):
            record_keys = list_keys[key]
            out[key] = [
                normalize_stripped(record, record_keys, True)
                if isinstance(record, dict)
                else _normalize(record, True)
                for record in item
            ]
        else:
            out[key] = _normalize(item, True)
    return out


def manifest(capture: Mapping[str, Any]) -> dict[str, Any]:
    """The manifest as a new JSON object (steps 1-4); ``rfc8785.dumps`` of it is :func:`manifest_bytes`."""
    return copy.deepcopy(omit_nulls(manifest_view(capture)))


def manifest_bytes(capture: Mapping[str, Any]) -> bytes:
    """The bytes the signature covers (before PAE): RFC 8785 of the manifest.

    Raises :class:`ContractError` whose path names the manifest field that has no RFC 8785 form
    (an integer beyond ±(2**53 - 1), NaN, a non-string key, ...).
    """
    return canonical_json(manifest_view(capture), path="", omit_null_members=True)

"""``decisions.manifest_json``: the index's copy of a signed manifest, without the identifiers in clear.

The index keeps each decision's manifest (content parts replaced by their hashes, signature kept) so
a compacted decision, whose segment is gone, still verifies. The signed manifest holds
``input.originUserId`` / ``input.originSessionId`` raw (the signature covers them), while the index
holds origin ids only as keyed hashes (:mod:`consumers.privacy.ids`). So ingest writes an *index
view* instead:

- every identifier in :data:`IDENTIFIERS` is replaced by its keyed hash (``hmac:...``, as in the row's
  ``origin_user_id``), so the view groups and joins like the columns and reveals nobody;
- the raw values are *sealed* in ``indexView.sealed``: AES-256-GCM under a key derived from the index
  id key, bound to the decision id, with a synthetic nonce (an HMAC of the decision id and the values),
  so the same capture always gives the same row (ingest's idempotency compares rows);
- the view is not the signed bytes: :func:`signed_manifest` unseals it back, byte for byte the manifest
  the signature covers, for what verifies (``verify``, the transparency-log audit) and for the access
  gate (a counterparty is matched on ``originUserId``). The segment stays the evidence; the row is
  derived from it and re-derivable.

Rows from before (or written with ``BLACKBOX_INDEX_RAW_IDS=true``) hold the signed manifest itself;
:func:`signed_manifest` returns those as they are (no column changed, so no schema upgrade).

Trade-off: the index id key now also unlocks what a *compacted* decision's signature needs; keep it
backed up with the key-encryption key. A full decision verifies from its segment regardless.
"""

from __future__ import annotations

import base64
import functools
import hmac
import json
from collections.abc import Callable, Mapping
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from consumers.privacy.ids import IndexIdKeyError, IndexIds
from producers import native
from producers.evidence.manifest import manifest_rules, manifest_view

__all__ = [
    "IDENTIFIERS",
    "INDEX_VIEW",
    "gate_manifest",
    "index_manifest_json",
    "reference_index_manifest_json",
    "signed_manifest",
]

IDENTIFIERS = (("input", "originUserId"), ("input", "originSessionId"))
"""Where the signed manifest names a person: replaced by keyed hashes in the index view."""

INDEX_VIEW = "indexView"
"""The view's own member (never in a signed manifest): which identifiers were replaced, and sealed."""

_SEAL_INFO = b"blackbox index manifest sealed ids v1"
_NONCE = 12

# json.dumps(..., ensure_ascii=False, separators=(",", ":")) built once, not per row. No circular
# check: a decoded capture is a tree (a cycle would end in RecursionError instead of ValueError).
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False).encode
_dumps_sorted = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), sort_keys=True, check_circular=False
).encode


def index_manifest_json(
    capture: Mapping[str, Any], ids: IndexIds, *, hash_id: Callable[[str], str] | None = None
) -> str:
    """The ``manifest_json`` ingest writes: the signed manifest, as an index view under ``ids``' key
    (the signed manifest itself when ids are stored raw).

    ``hash_id`` stands in for ``ids.of`` (ingest passes one that remembers, so the row's own
    ``origin_*`` columns reuse the same hashes). The native core prints it when it loads (one walk,
    no copies: ``IndexViewWriter``, src/index_view.rs); :func:`reference_index_manifest_json` is
    the reference it is proven byte-identical against, and runs whenever the core declines.
    """
    writer = _view_writer()
    if writer is not None:
        # what the reference changes on the view, found on the capture: no manifest rule drops an
        # identifier (tests/consumers/privacy/test_privacy_index_view_native.py)
        replace: dict[str, dict[str, str]] = {}
        tail: list[tuple[str, Any]] = [("signature", capture.get("signature"))]
        key = ids.key
        if key is not None:
            of = hash_id or ids.of
            raw: dict[str, str] = {}
            for section, field in IDENTIFIERS:
                part = capture.get(section)
                value = part.get(field) if isinstance(part, dict) else None
                if isinstance(value, str) and value:
                    raw[f"{section}.{field}"] = value
                    replace.setdefault(section, {})[field] = of(value)
            if raw:
                tail.append((INDEX_VIEW, {"sealed": _seal(key, str(capture.get("decisionId") or ""), raw)}))
        text = writer.json(capture, replace, tail)
        if text is not None:
            return str(text)
    return reference_index_manifest_json(capture, ids, hash_id=hash_id)


def reference_index_manifest_json(
    capture: Mapping[str, Any], ids: IndexIds, *, hash_id: Callable[[str], str] | None = None
) -> str:
    """:func:`index_manifest_json` in Python: the reference (and the fallback without the core)."""
    view = manifest_view(capture)
    view["signature"] = capture.get("signature")
    if ids.key is not None:
        of = hash_id or ids.of
        raw = {}
        for section, field in IDENTIFIERS:
            part = view.get(section)
            value = part.get(field) if isinstance(part, dict) else None
            if isinstance(part, dict) and isinstance(value, str) and value:
                raw[f"{section}.{field}"] = value
                view[section] = part = dict(part)  # the view shares nested values with the capture
                part[field] = of(value)
        if raw:
            view[INDEX_VIEW] = {"sealed": _seal(ids.key, str(capture.get("decisionId") or ""), raw)}
    return _dumps(view)


def _new_view_writer(core: Any) -> Any:
    """The core's IndexViewWriter built from the manifest's rules (one source of them), or None."""
    return core.IndexViewWriter(*manifest_rules()) if hasattr(core, "IndexViewWriter") else None


_view_writers: native.PerCore[Any] = native.PerCore(_new_view_writer)


def _view_writer() -> Any:
    """The loaded core's IndexViewWriter, or None."""
    core = native.core()
    return None if core is None else _view_writers(core)


def signed_manifest(manifest_json: str, ids: IndexIds | None) -> dict[str, Any]:
    """The signed manifest a ``manifest_json`` column holds (``{}`` when empty): an index view is
    unsealed with ``ids``' key; a manifest from before views is returned as it is.

    Raises :class:`IndexIdKeyError` when a view cannot be unsealed (no key, another key, edited).
    """
    manifest = json.loads(manifest_json) if manifest_json else {}
    if not isinstance(manifest, dict) or INDEX_VIEW not in manifest:
        return manifest if isinstance(manifest, dict) else {}
    decision_id = str(manifest.get("decisionId") or "")
    if ids is None or ids.key is None:
        raise IndexIdKeyError(
            f"the index holds {decision_id}'s manifest with its origin ids as keyed hashes: reading the "
            "signed manifest needs the index id key (BLACKBOX_INDEX_ID_KEY_FILE)"
        )
    sealed = (manifest.pop(INDEX_VIEW) or {}).get("sealed")
    raw = _unseal(ids.key, decision_id, str(sealed or ""))
    for path, value in raw.items():
        section, field = path.split(".", 1)
        part = manifest.get(section)
        if not isinstance(part, dict) or part.get(field) != ids.of(value):
            raise IndexIdKeyError(
                f"the index view of {decision_id}'s manifest does not match its sealed {path}"
            )
        part[field] = value
    return manifest


def gate_manifest(manifest_json: str, ids: IndexIds | None) -> dict[str, Any]:
    """:func:`signed_manifest` for the access gate: ``{}`` when the view does not open, so the gate
    judges by the row's ids alone (a counterparty is then not tied to it) and verification, which
    reads the column again, reports the row as the failing part."""
    try:
        return signed_manifest(manifest_json, ids)
    except (IndexIdKeyError, ValueError):
        return {}


def _seal_key(key: bytes) -> bytes:
    # a key of its own for sealing, derived from the id key (which keeps hashing ids as before)
    return hmac.digest(key, _SEAL_INFO, "sha256")


@functools.lru_cache(maxsize=8)
def _sealer(key: bytes) -> tuple[bytes, AESGCM]:
    # once per id key, not per capture: ingest seals every row under the same key
    sealing = _seal_key(key)
    return sealing, AESGCM(sealing)


def _seal(key: bytes, decision_id: str, raw: dict[str, str]) -> str:
    plain = _dumps_sorted(raw).encode("utf-8")
    sealing, aead = _sealer(key)
    aad = decision_id.encode("utf-8")
    # synthetic nonce: equal input, equal row; a different decision or value, a different nonce
    nonce = hmac.digest(sealing, aad + b"\x1f" + plain, "sha256")[:_NONCE]
    return base64.b64encode(nonce + aead.encrypt(nonce, plain, aad)).decode("ascii")


def _unseal(key: bytes, decision_id: str, sealed: str) -> dict[str, str]:
    try:
        data = base64.b64decode(sealed, validate=True)
        plain = _sealer(key)[1].decrypt(data[:_NONCE], data[_NONCE:], decision_id.encode("utf-8"))
        raw = json.loads(plain)
    except (ValueError, InvalidTag) as exc:
        raise IndexIdKeyError(
            f"the origin ids sealed in {decision_id}'s index manifest do not open under the index id key "
            "(another key, or the row was edited)"
        ) from exc
    if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
        raise IndexIdKeyError(f"the origin ids sealed in {decision_id}'s index manifest are malformed")
    return raw

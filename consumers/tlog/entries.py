"""The log's typed entries other than captures: an applied pact version (DESIGN decision 26).

A capture's leaf is :mod:`producers.evidence.tlog`'s (``"type": "blackbox.tlog.capture/v1"``, left
byte-identical). An applied pact version is a leaf of its own type, the RFC 8785 canonical JSON of ::

    {"appliedAt": <the apply's time, as in its record>,
     "applyHash": "sha256:" + hex(sha256(canonical JSON of the apply record)),
     "envelopeHash": "sha256:" + hex(sha256(PAE(pact payloadType, the version's signed payload))),
     "type": "blackbox.tlog.pact/v1",
     "version": "pv_..."}

The ``type`` field keeps the two apart: a capture verifier (:func:`~producers.evidence.tlog.parse_leaf`)
refuses a pact leaf and :func:`parse_pact_leaf` refuses a capture's, so neither can be presented as the
other. Hashing is unchanged (RFC 6962 over the leaf bytes), so any tlog-tiles client still verifies the
log. The apply record (who, when, why, forced, the gate's verdict) and the signed version are what a
pact bundle carries; the leaf commits to both.

In ``tlog_leaves`` the entry's key (the ``decision_id`` column) is ``pact:<version>@<appliedAt>``, so
re-applying a version later is a new entry and a repeated append of the same apply is not.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from producers.evidence.canonical import canonical_json
from producers.evidence.tlog import sized_leaf
from schemas.errors import ProofInvalid

__all__ = [
    "PACT_KEY_PREFIX",
    "PACT_LEAF_TYPE",
    "apply_hash",
    "pact_entry_key",
    "pact_leaf",
    "parse_pact_leaf",
]

PACT_LEAF_TYPE = "blackbox.tlog.pact/v1"
PACT_KEY_PREFIX = "pact:"
_FIELDS = ("appliedAt", "applyHash", "envelopeHash", "version")


def apply_hash(applied: Mapping[str, Any]) -> str:
    """``"sha256:" + hex`` of the apply record's canonical JSON."""
    return "sha256:" + hashlib.sha256(canonical_json(dict(applied), path="applied")).hexdigest()


def pact_leaf(*, version: str, envelope_hash: str, applied: Mapping[str, Any]) -> bytes:
    """The leaf of one apply of ``version`` (module docstring); ``applied`` is its apply record."""
    data = canonical_json(
        {
            "appliedAt": str(applied.get("appliedAt", "")),
            "applyHash": apply_hash(applied),
            "envelopeHash": envelope_hash,
            "type": PACT_LEAF_TYPE,
            "version": version,
        }
    )
    return sized_leaf(data, path="version")


def parse_pact_leaf(data: bytes) -> dict[str, str]:
    """The fields of a pact leaf; :class:`ProofInvalid` for anything else (a capture's leaf included)."""
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProofInvalid(f"the leaf is not JSON: {exc}", part="leaf") from exc
    if not isinstance(value, dict) or value.get("type") != PACT_LEAF_TYPE:
        raise ProofInvalid(f"the leaf is not a {PACT_LEAF_TYPE} leaf", part="leaf")
    if not all(isinstance(value.get(k), str) for k in _FIELDS):
        raise ProofInvalid(f"a pact leaf has {', '.join(_FIELDS)}", part="leaf")
    return {k: str(value[k]) for k in (*_FIELDS, "type")}


def pact_entry_key(version: str, applied_at: str) -> str:
    """The entry's key in ``tlog_leaves`` (module docstring)."""
    return f"{PACT_KEY_PREFIX}{version}@{applied_at}"

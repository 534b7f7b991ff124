"""Same decision id, other bytes: a content upgrade from the flight recorder, or a conflict.

A routine decision goes out structured-only; if it is flagged while the recorder's flight recorder
still holds its content (``producers/flight.py``), the *full* capture follows under the same decision
id (DESIGN decision 17). Its bytes differ, so ingest's dedup would quarantine it as a
``ConflictingDuplicate``; this module tells the two apart from the signed manifests alone
(``decisions.manifest_json``; DESIGN decision 1 keeps every content hash in a structured-only
capture's manifest):

- the two manifests must be equal except ``captureLevel``, ``consequential`` and the signature bytes
  (nulls omitted, as in the signed manifest). So every content hash, the working-set root, the time,
  the agent, the outcome, the tool calls and the signing key (``signature.publicKeyRef``) are the same:
  the full capture adds content whose hashes the structured-only one already signed, nothing else;
- ``upgrade``: the stored one is structured-only (content never stored, nor expired since) and the
  new one carries content (``full`` or ``sampled``): the new capture becomes the decision's row;
- ``subsumed``: the new one is structured-only and the stored one is the same decision with content:
  a redelivered structured-only capture after its upgrade is a duplicate, not a conflict;
- ``conflict``: anything else, e.g. a forged "upgrade" whose structured parts differ, or content
  arriving for a decision whose retention already ran (kept in quarantine, never silently dropped).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from consumers.privacy.manifest import INDEX_VIEW
from producers.evidence.canonical import omit_nulls

__all__ = ["CONTENT_LEVELS", "Relation", "relation"]

Relation = Literal["upgrade", "subsumed", "conflict"]
CONTENT_LEVELS = frozenset({"full", "sampled"})

# what an upgrade may change: the level, the consequential flag (the reason it was brought in), and
# therefore the signature bytes
_MAY_DIFFER = ("captureLevel", "consequential")


def relation(*, stored: dict[str, Any], arriving: dict[str, Any]) -> Relation:
    """How ``arriving`` relates to ``stored``, two verified captures of one decision id with different
    bytes. Each is ``{"manifest_json", "capture_level", "content_state"}`` as in a ``decisions`` row
    (``content_state`` is read for ``stored`` only)."""
    if _structure(stored["manifest_json"]) != _structure(arriving["manifest_json"]):
        return "conflict"
    stored_level, arriving_level = str(stored["capture_level"]), str(arriving["capture_level"])
    if arriving_level in CONTENT_LEVELS:
        if stored_level == "structured-only" and stored.get("content_state") == "structured-only":
            return "upgrade"
        # over content that is stored (full over full differing in its flag is not the flight
        # recorder's doing), or a decision retention already expired: kept in quarantine, reported
        return "conflict"
    if arriving_level == "structured-only" and stored_level in CONTENT_LEVELS:
        return "subsumed"
    return "conflict"


def _structure(manifest_json: str) -> Any:
    """The manifest without what an upgrade may change (``manifest_json`` keeps the signature)."""
    view = json.loads(manifest_json) if manifest_json else {}
    if not isinstance(view, dict):
        return view
    for key in (*_MAY_DIFFER, INDEX_VIEW):  # the index view's sealed ids: its hashed ids are compared
        view.pop(key, None)
    signature = view.get("signature")
    if isinstance(signature, dict):
        view["signature"] = {k: v for k, v in signature.items() if k != "signatureBytes"}
    return omit_nulls(view)

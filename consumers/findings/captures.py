"""Read stored captures to evaluate a rule on them, every read through the access gate.

Evaluating a finding's rule reads capture content (a tool call's arguments, the final output), so each
read is a logged access (action ``evaluate``), decided per capture like ``show`` or ``replay``; the
log is written once per chunk. A capture compacted to metadata-only is evaluated on its signed
manifest (the structured data is all still there; content fields are absent from the view).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from consumers.access import AccessGate, Caller
from consumers.privacy.ids import IndexIds
from consumers.privacy.manifest import signed_manifest
from consumers.storage.reader import read_stored
from producers.blobstore import BlobStore
from producers.pacts.expression import Rule, RuleError, run_rule
from producers.pacts.view import decision_view
from schemas.codec import decode
from schemas.errors import BlackboxError

__all__ = ["RuleOutcome", "evaluate_stored", "stored_capture"]

CHUNK = 500
"""Captures read (and access-log rows written) per step: bounded memory over long windows."""


@dataclass(frozen=True, slots=True)
class RuleOutcome:
    """The rule on one stored decision: ``matched``, or ``error`` (not evaluable, not readable, denied)."""

    row: Mapping[str, Any]
    matched: bool
    error: str = ""


def stored_capture(blobs: BlobStore, row: Mapping[str, Any], ids: IndexIds | None = None) -> dict[str, Any]:
    """The capture a ``decisions`` row points at (checked against its hash), or its signed manifest
    once compacted (origin ids unsealed with ``ids``). Raises a :class:`~schemas.errors.BlackboxError`
    when neither can be read."""
    if row.get("content_state") == "metadata-only" or not row.get("segment_key"):
        manifest = signed_manifest(str(row.get("manifest_json") or ""), ids)
        if not manifest:
            raise BlackboxError(f"decision {row['decision_id']} has neither content nor a manifest")
        return manifest
    return dict(decode(read_stored(blobs, row)).value)


def evaluate_stored(
    rule: Rule,
    rows: Sequence[Mapping[str, Any]],
    *,
    blobs: BlobStore,
    gate: AccessGate,
    caller: Caller,
    ids: IndexIds | None = None,
) -> Iterator[RuleOutcome]:
    """``rule`` on the stored capture of each row (:data:`~consumers.findings.store.STORED_COLUMNS`),
    in order. A capture that cannot be read, an access the gate denies and a rule error are outcomes
    with ``error`` set, never exceptions; only an unwritable access log stops it (no log, no read)."""
    for start in range(0, len(rows), CHUNK):
        chunk = rows[start : start + CHUNK]
        loaded: list[tuple[Mapping[str, Any], dict[str, Any]]] = []
        for row in chunk:
            try:
                loaded.append((row, stored_capture(blobs, row, ids)))
            except (BlackboxError, ValueError) as exc:  # ValueError: a manifest that is not JSON
                yield RuleOutcome(row, False, f"not readable: {exc}")
        records = gate.authorize_many(
            caller, [capture for _, capture in loaded], action="evaluate", detail=f"rule {rule.name}"
        )
        for (row, capture), record in zip(loaded, records, strict=True):
            if record.outcome != "allowed":
                yield RuleOutcome(row, False, f"access denied: {record.detail}")
                continue
            try:
                yield RuleOutcome(row, run_rule(rule, decision_view(capture)))
            except RuleError as exc:
                yield RuleOutcome(row, False, str(exc))

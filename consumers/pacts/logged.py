"""Applied pact versions in the transparency log: each apply is an entry of its own type
(:mod:`consumers.tlog.entries`), appended by ``pact apply`` before the shared pointer moves, and
exported with its inclusion proof as a pact bundle (:mod:`consumers.pacts.bundle`).

Logged first, applied second: an apply the log does not hold never takes effect (a log that cannot
be written stops the apply with its error); an entry whose pointer write then failed shows in the log
as an apply that ``pact history`` does not: the outsider sees more, never less.

With the log on, ingest obeys the shared pointer only when it is, byte for byte, the log's latest
apply (:func:`in_force`): the pointer is an unsigned object anyone with write access to the bucket
could replace, with an older signed version (a rollback to laxer rules) or an apply that was never
logged. A pointer the log does not end with is reported, and the host judges by the log's latest
apply, the version an outsider holding the log sees in force.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from consumers.pacts.bundle import build_pact_bundle, logged_leaf
from consumers.pacts.versions import (
    APPLIED_KEY,
    APPLIED_LOG_PREFIX,
    AppliedPointer,
    PactVersionError,
    signed_envelope,
)
from consumers.tlog.entries import PACT_KEY_PREFIX, PACT_LEAF_TYPE, pact_entry_key, parse_pact_leaf
from consumers.tlog.log import Entry
from consumers.tlog.store import entry_keys, last_typed_leaf
from schemas.errors import BlackboxError, ProofInvalid

if TYPE_CHECKING:
    from consumers.index import Index
    from consumers.tlog.log import TransparencyLog
    from producers.blobstore import BlobStore

__all__ = ["InForce", "export_pact_bundle", "in_force", "log_apply"]


@dataclass(frozen=True, slots=True)
class InForce:
    """The version the log says is in force, and why the pointer was not obeyed (None: it was)."""

    version: str | None  # None: the log holds no apply
    refused: str | None


def in_force(index: Index, store: BlobStore, pointer: Mapping[str, Any]) -> InForce:
    """Check the shared pointer (its JSON, as stored) against the log's latest apply (module docstring)."""
    named = f"{APPLIED_KEY} names {pointer.get('version')!s:.40} applied at {pointer.get('appliedAt')!s:.40}"
    row = last_typed_leaf(index, PACT_KEY_PREFIX, PACT_LEAF_TYPE)
    if row is None:
        return InForce(
            None, f"{named}, but the transparency log holds no apply: never applied with the log on"
        )
    try:
        latest = parse_pact_leaf(row.leaf)
    except ProofInvalid as exc:
        return InForce(None, f"the log's latest apply (leaf {row.leaf_index}) is unreadable: {exc}")
    try:
        expected = logged_leaf(signed_envelope(store, str(pointer.get("version", ""))), pointer)
    except (BlackboxError, ValueError) as exc:  # no such version, or a record with no canonical form
        expected, why = b"", f" ({exc})"
    else:
        why = ""
    if expected == row.leaf:
        return InForce(latest["version"], None)
    return InForce(
        latest["version"],
        f"{named}{why}, but the log's latest apply (leaf {row.leaf_index}) is {latest['version']} applied at "
        f"{latest['appliedAt']}: judging by that one (a rolled-back or hand-written pointer; after a "
        "failed pointer write, apply again)",
    )


def log_apply(log: TransparencyLog, store: BlobStore, pointer: AppliedPointer) -> str:
    """Append the apply to the log and publish a checkpoint that covers it (so its bundle can be
    exported at once); returns the entry's key."""
    applied = pointer.to_json()
    leaf = logged_leaf(signed_envelope(store, pointer.version), applied)
    key = pact_entry_key(pointer.version, applied["appliedAt"])
    log.append([Entry(decision_id=key, captured_at=pointer.applied_at, leaf=leaf)])
    log.publish()
    return key


def export_pact_bundle(
    version: str,
    *,
    index: Index,
    store: BlobStore,
    prover: Callable[[str], dict[str, Any]] | None,
    now: datetime,
) -> dict[str, Any]:
    """The pact bundle of the latest logged apply of ``version``; :class:`PactVersionError` when the
    version was never applied with the log on."""
    envelope = signed_envelope(store, version)
    keys = entry_keys(index, pact_entry_key(version, ""), PACT_LEAF_TYPE)
    if not keys:
        raise PactVersionError(
            f"{version} has no entry in the transparency log (never applied, or applied with BLACKBOX_TLOG=false)"
        )
    key = keys[-1]
    applied = _apply_record(store, version, key)
    if prover is None:
        raise PactVersionError("the transparency log is off (BLACKBOX_TLOG=false): no proof to export")
    try:
        transparency = prover(key)
    except BlackboxError as exc:
        raise PactVersionError(f"no inclusion proof for {key}: {exc}") from exc
    return build_pact_bundle(
        version=version, envelope=envelope, applied=applied, transparency=transparency, exported_at=now
    )


def _apply_record(store: BlobStore, version: str, key: str) -> dict[str, Any]:
    """The stored apply record (byte for byte as logged) whose entry key is ``key``."""
    for name in sorted(store.list(APPLIED_LOG_PREFIX), reverse=True):
        if not name.endswith(f"-{version}.json"):
            continue
        record = json.loads(store.get(name))
        if isinstance(record, dict) and pact_entry_key(version, str(record.get("appliedAt"))) == key:
            return record
    raise PactVersionError(f"the apply record of {key} is not in {APPLIED_LOG_PREFIX}")

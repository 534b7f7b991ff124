"""``blackbox log verify``: is the log what its checkpoints signed, and does it account for every capture?

Checks, each failure a :class:`Finding` (the run goes on and reports them all):

1. **since** (``--since``, an old checkpoint the auditor kept): it is signed by the log's key, and the
   consistency proof from it to the latest checkpoint, computed from the tiles, verifies - nothing
   was rewritten or removed (``consistency``).
2. **tiles**: every tile and entry bundle is recomputed from the leaves: each full tile, and the
   partial tiles of every checkpointed size, must be byte-identical to the stored ones (``tile``);
   the root at every checkpointed size must be that checkpoint's root (``checkpoint``), each history
   checkpoint must be signed by the log (``checkpoint``).
3. **index**: each ``tlog_leaves`` row holds the leaf at its index (``leaf-row``); every leaf's
   decision is in ``decisions`` with a manifest whose envelope hash is the leaf's (``leaf-mismatch``),
   or was expired by retention (logged in ``deletions``), else ``missing-capture``; every verified
   decision has a leaf (``not-logged``). A decision logged twice is said plainly: a note when both
   leaves are identical (a redelivered capture; nothing is lost or changed), ``duplicate-leaf`` when
   they differ. A leaf of an applied pact version (:mod:`.entries`) has no capture behind it: counted
   in a note; a leaf of neither type is ``leaf-mismatch``. With ``shared`` (several ingest hosts, each
   with its own index, write one log) a leaf whose decision this index does not hold is another
   index's: counted in a note, not a finding.
4. **time**: each checkpoint's RFC 3161 timestamp is for that note (and, given the TSA's roots,
   signed by it) (``timestamp``); a leaf whose ``capturedAt`` is later than the first checkpoint that
   includes it, by more than the skew, is ``captured-after-checkpoint`` (the checkpoint's time is
   its timestamp's, else when it was stored - weaker, and said so).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from cryptography import x509

from consumers.privacy.manifest import signed_manifest
from producers.evidence.tlog import (
    Checkpoint,
    LogKey,
    capture_leaf,
    open_checkpoint,
    parse_leaf,
    verify_consistency,
)
from producers.evidence.trust import parse_time
from schemas.errors import BlackboxError, BlobNotFound, ProofInvalid, TransparencyLogError

from .checkpoints import Published, history, latest
from .entries import parse_pact_leaf
from .frontier import Frontier, object_key
from .store import decision_manifests, expired_ids, leaf_count, leaves_of, verified_ids
from .tiles import WIDTH, TreeReader

if TYPE_CHECKING:
    from consumers.index import Index
    from consumers.privacy.ids import IndexIds
    from producers.blobstore import BlobStore

__all__ = ["AuditReport", "Finding", "audit"]

_CHUNK = 10_000


@dataclass(frozen=True, slots=True)
class Finding:
    kind: str
    detail: str


@dataclass(frozen=True, slots=True)
class AuditReport:
    """What ``log verify`` checked and found."""

    checkpoint: Checkpoint
    leaves: int  # leaves recomputed (the index's size, or the checkpoint's if larger)
    tiles: int  # stored tiles and bundles compared
    checkpoints: int  # history checkpoints checked
    timestamps: int  # checkpoints with a timestamp that checked out
    timestamps_signed: int  # ... whose TSA signature was checked against the configured roots
    since: Checkpoint | None = None
    findings: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return not self.findings


def audit(
    *,
    store: BlobStore,
    index: Index,
    prefix: str,
    key: LogKey,
    since: str | None = None,
    skew: timedelta = timedelta(minutes=5),
    tsa_roots: Sequence[x509.Certificate] = (),
    ids: IndexIds | None = None,
    shared: bool = False,
) -> AuditReport:
    """Run every check of the module docstring; :class:`TransparencyLogError` only when there is no
    log to check (no checkpoint) or ``since`` is not a checkpoint of this log. ``ids`` unseals the
    origin ids of the index's manifests (:mod:`consumers.privacy.manifest`) to recompute each leaf."""
    current = latest(store, prefix, key)
    if current is None:
        raise TransparencyLogError(f"no checkpoint at {prefix}/checkpoint: nothing has been logged yet")
    head = current[1]
    findings: list[Finding] = []
    notes: list[str] = []

    old: Checkpoint | None = None
    if since is not None:
        try:
            old = open_checkpoint(since, key)
        except ProofInvalid as exc:
            raise TransparencyLogError(f"the --since checkpoint is not one of this log's: {exc}") from exc
        findings.extend(_consistency(store, prefix, old, head))

    published = list(history(store, prefix))
    checkpoints: dict[int, Checkpoint] = {}
    for p in published:
        try:
            checkpoints[p.size] = open_checkpoint(p.note, key)
        except ProofInvalid as exc:
            findings.append(Finding("checkpoint", f"history checkpoint {p.size}: {exc}"))
    if head.size not in checkpoints:
        checkpoints[head.size] = head

    indexed = leaf_count(index)
    if indexed < head.size:
        lag = f"the index knows {indexed} leaves, the checkpoint signs {head.size}"
        if shared:
            notes.append(lag + " (this index follows the log when its ingest next holds it)")
        else:
            findings.append(Finding("missing-capture", lag))
    size = max(indexed, head.size)
    leaves, tiles, tile_findings = _recompute(store, prefix, size, checkpoints)
    findings.extend(tile_findings)
    if indexed > head.size:
        notes.append(f"{indexed - head.size} leaves appended since the latest checkpoint (not signed yet)")

    findings.extend(_rows_match(index, leaves))
    findings.extend(_captures(index, leaves, origin_ids=ids, shared=shared, notes=notes))
    stamped, signed, time_findings = _times(published, leaves, skew, tsa_roots)
    findings.extend(time_findings)
    unstamped = len(published) - stamped
    if unstamped:
        notes.append(f"{unstamped} of {len(published)} checkpoints carry no RFC 3161 timestamp")
    if stamped and not tsa_roots:
        notes.append(
            "timestamps checked against their checkpoints only: set BLACKBOX_TLOG_TSA_ROOTS to check the TSA"
        )
    return AuditReport(
        checkpoint=head,
        leaves=len(leaves),
        tiles=tiles,
        checkpoints=len(published),
        timestamps=stamped,
        timestamps_signed=signed,
        since=old,
        findings=tuple(findings),
        notes=tuple(notes),
    )


def _consistency(store: BlobStore, prefix: str, old: Checkpoint, new: Checkpoint) -> list[Finding]:
    if old.size > new.size:
        return [
            Finding("consistency", f"the log shrank: --since has {old.size} leaves, the latest {new.size}")
        ]
    try:
        proof = TreeReader(store, prefix, new.size).consistency(old.size)
        verify_consistency(old.size, new.size, old.root, new.root, proof)
    except (ProofInvalid, TransparencyLogError) as exc:
        return [Finding("consistency", f"from {old.size} to {new.size} leaves: {exc}")]
    return []


def _recompute(
    store: BlobStore, prefix: str, size: int, checkpoints: dict[int, Checkpoint]
) -> tuple[list[bytes], int, list[Finding]]:
    """Replay every leaf into a fresh tree; compare what it writes with what is stored."""
    findings: list[Finding] = []
    reader = TreeReader(store, prefix, size)
    leaves: list[bytes] = []
    try:
        for n in range(-(-size // WIDTH)):
            leaves.extend(reader.entries(n))
    except TransparencyLogError as exc:
        return leaves, 0, [Finding("tile", f"cannot read the leaves: {exc}")]
    stops = sorted({s for s in checkpoints if 0 < s <= size} | {size})
    frontier = Frontier()
    compared = 0
    for stop in stops:
        new, objects, order = frontier.extend(leaves[frontier.size : stop])
        for name in order:
            partial = ".p/" in name
            if partial and stop not in checkpoints and stop != size:
                continue
            key = object_key(prefix, name)
            try:
                stored = store.get(key)
            except BlobNotFound:
                findings.append(Finding("tile", f"{key} is missing"))
                continue
            compared += 1
            if stored != objects[name]:
                findings.append(Finding("tile", f"{key} does not match the leaves it covers"))
        frontier = new
        if stop in checkpoints and new.root() != checkpoints[stop].root:
            findings.append(
                Finding("checkpoint", f"the checkpoint of {stop} leaves signs a root the leaves do not give")
            )
    return leaves, compared, findings


def _rows_match(index: Index, leaves: list[bytes]) -> Iterator[Finding]:
    for row in leaves_of(index):
        if row.leaf_index >= len(leaves):
            yield Finding(
                "leaf-row", f"tlog_leaves row {row.leaf_index} ({row.decision_id}) is past the log's end"
            )
        elif leaves[row.leaf_index] != row.leaf:
            yield Finding(
                "leaf-row", f"leaf {row.leaf_index} in the tiles is not the index's ({row.decision_id})"
            )


def _captures(
    index: Index, leaves: list[bytes], *, origin_ids: IndexIds | None, shared: bool, notes: list[str]
) -> Iterator[Finding]:
    """Every leaf's decision is stored (or was expired) and matches; every verified decision is logged."""
    by_id: dict[str, tuple[int, bytes]] = {}
    repeats: list[str] = []
    pacts = 0
    for i, leaf in enumerate(leaves):
        try:
            did = parse_leaf(leaf)["decisionId"]
        except ProofInvalid as exc:
            try:
                parse_pact_leaf(leaf)  # an applied pact version: its own entry type, no capture behind it
            except ProofInvalid:
                yield Finding("leaf-mismatch", f"leaf {i}: {exc}")
            else:
                pacts += 1
            continue
        first = by_id.setdefault(did, (i, leaf))
        if first[0] != i:
            if first[1] == leaf:
                repeats.append(f"{did} (leaves {first[0]} and {i})")
            else:
                yield Finding(
                    "duplicate-leaf",
                    f"decision {did} is logged twice with different leaves ({first[0]} and {i})",
                )
    if pacts:
        notes.append(f"{pacts} leaves are applied pact versions (`blackbox pact bundle` exports one)")
    if repeats:
        notes.append(
            f"{len(repeats)} decisions are logged twice with identical leaves (a redelivered capture): "
            + ", ".join(repeats[:5])
        )
    ids = list(by_id)
    seen: set[str] = set()
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start : start + _CHUNK]
        for row in decision_manifests(index, chunk):
            did = str(row["decision_id"])
            seen.add(did)
            manifest = str(row.get("manifest_json") or "")
            if not manifest:
                continue  # expired: the manifest went with the content, the leaf stays
            i, leaf = by_id[did]
            try:
                ok = capture_leaf(signed_manifest(manifest, origin_ids)) == leaf
            except (ValueError, BlackboxError):
                ok = False
            if not ok:
                yield Finding(
                    "leaf-mismatch", f"decision {did} (leaf {i}) is stored with another manifest than logged"
                )
    missing = [did for did in ids if did not in seen]
    expired: set[str] = set()
    for start in range(0, len(missing), _CHUNK):
        expired.update(expired_ids(index, missing[start : start + _CHUNK]))
    elsewhere = 0
    for did in missing:
        if did in expired:
            continue
        if shared:
            elsewhere += 1
            continue
        yield Finding(
            "missing-capture", f"decision {did} (leaf {by_id[did][0]}) is in the log but not in the index"
        )
    if elsewhere:
        notes.append(
            f"{elsewhere} leaves are decisions this index does not hold (other ingest hosts' indexes)"
        )
    unlogged = [did for did in verified_ids(index) if did not in by_id]
    if unlogged:
        yield Finding(
            "not-logged", f"{len(unlogged)} verified decisions have no leaf (e.g. {', '.join(unlogged[:3])})"
        )


def _times(
    published: list[Published], leaves: list[bytes], skew: timedelta, roots: Sequence[x509.Certificate]
) -> tuple[int, int, list[Finding]]:
    findings: list[Finding] = []
    stamped = signed = 0
    times: list[tuple[int, datetime, str]] = []  # (size, when, source)
    for p in sorted(published, key=lambda p: p.size):
        when, source = p.stored_at, "stored"
        if p.timestamp is not None:
            from .timestamp import check_timestamp

            try:
                stamp = check_timestamp(p.timestamp, p.note.encode("utf-8"), roots=list(roots) or None)
            except TransparencyLogError as exc:
                findings.append(Finding("timestamp", f"checkpoint {p.size}: {exc}"))
            else:
                stamped += 1
                signed += stamp.signature_checked
                when, source = stamp.time, "RFC 3161"
        times.append((p.size, when, source))
    at = 0
    for i, leaf in enumerate(leaves):
        while at < len(times) and times[at][0] <= i:
            at += 1
        if at == len(times):
            break  # no checkpoint covers it yet
        try:
            fields = parse_leaf(leaf)
            captured = parse_time(fields["capturedAt"])
        except (ProofInvalid, ValueError):
            continue  # reported by _captures
        size, when, source = times[at]
        if captured > when + skew:
            findings.append(
                Finding(
                    "captured-after-checkpoint",
                    f"decision {fields['decisionId']} says capturedAt {fields['capturedAt']}, "
                    f"{(captured - when).total_seconds():.0f}s after the first checkpoint that includes it "
                    f"({size} leaves, {source} time {when.isoformat()})",
                )
            )
    return stamped, signed, findings

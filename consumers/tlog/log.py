"""Appending to the log at ingest, and publishing its checkpoints.

One append, inside ingest's batch after the segments and index rows are durable and before the
offsets are committed (:mod:`consumers.ingest.batch`), in numbered steps:

1. take this data directory's lock (processes sharing it), then **hold the log**: the lease in its
   state object, taken by compare-and-swap (:mod:`.writer`). Another process holding it (on any host)
   is waited for, polling, up to one lease; a holder that died is taken over when its lease expires;
2. bring this index's ``tlog_leaves`` up to the state's size from the entry bundles (what other
   writers integrated): the log's size and order come from its state, never from counting rows;
3. drop the decisions that already have a leaf (a redelivered batch, on this host or another), and
   repeats within the batch;
4. **integrate** the rest: staged bundle, compare-and-swap of the state, then the tiles written once;
   a lost swap reloads and tries again (steps 1-3, up to 5 times), else the batch fails uncommitted;
5. publish a signed checkpoint when ``interval`` seconds passed since the last one, then release the
   lease so the other ingest processes can integrate their batches;
6. insert the ``tlog_leaves`` rows of what was integrated (idempotent: keyed by leaf index).

A crash before the swap in 4 leaves nothing in the log: the capture's offset is not committed, its
redelivery (to any host) logs it. A crash after the swap leaves the leaves in the log (the staged
bundle is applied by the next holder) and maybe no rows: step 2 writes them from the tiles, and step 3
keeps the redelivered capture from appearing twice. Ingest's commit order is segments, index rows,
leaves integrated, offsets.
"""

from __future__ import annotations

import fcntl
import logging
import os
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from producers.evidence.tlog import parse_leaf
from producers.evidence.trust import parse_time
from schemas.errors import LeaseHeld, ProofInvalid, TransparencyLogError, WriterFenced

from .checkpoints import LogSigner, load_log_signer
from .entries import pact_entry_key, parse_pact_leaf
from .store import LeafRow, insert_leaves, leaf_count, logged_ids
from .tiles import WIDTH, TreeReader
from .witness import WitnessSetting, WitnessSubmitter
from .writer import LogWriter

if TYPE_CHECKING:
    from consumers.index import Index
    from producers.blobstore import BlobStore

logger = logging.getLogger(__name__)

__all__ = ["Entry", "LogSettings", "TransparencyLog", "catch_up"]

_ATTEMPTS = 5  # integrations tried per batch when another writer swaps in between (each reloads)


class LogSettings(Protocol):
    """What the log reads of the service settings (declared here, so the log does not import the app
    room that wires it)."""

    @property
    def data_dir(self) -> Path: ...
    @property
    def resolved_tlog_prefix(self) -> str: ...
    @property
    def resolved_tlog_key(self) -> Path: ...
    @property
    def tlog_origin(self) -> str: ...
    @property
    def tlog_checkpoint_interval(self) -> float: ...
    @property
    def tlog_tsa_url(self) -> str | None: ...
    @property
    def tlog_lease(self) -> float: ...
    @property
    def s3_object_lock(self) -> str: ...
    @property
    def s3_object_lock_log_days(self) -> int: ...
    @property
    def tlog_witnesses(self) -> Sequence[WitnessSetting]: ...


@dataclass(frozen=True, slots=True)
class Entry:
    """One capture to log: its decision, its capture time (for the index row) and its leaf bytes."""

    decision_id: str
    captured_at: datetime
    leaf: bytes


class TransparencyLog:
    """The appending side of one log in one ingest process (module docstring). Not thread-safe."""

    def __init__(
        self,
        *,
        store: BlobStore,
        index: Index,
        signer: LogSigner,
        prefix: str,
        lock_path: Path,
        interval: float = 10.0,
        tsa_url: str | None = None,
        retain_for: timedelta | None = None,
        lease: float = 30.0,
        writer: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.store = store
        self.index = index
        self.signer = signer
        self.prefix = prefix.strip("/")
        self.interval = interval
        self.lease = lease
        self._lock_path = lock_path
        self._clock = clock
        self._now = now
        # processes sharing this data directory share one writer identity: the flock orders them,
        # the compare-and-swap makes a stale one reload
        self.writer = LogWriter(
            store=store,
            prefix=self.prefix,
            signer=signer,
            writer=writer or f"{socket.gethostname()}:{lock_path}",
            lease=lease,
            retain_for=retain_for,
            tsa_url=tsa_url,
            bootstrap_size=lambda: leaf_count(index),
        )
        self._last_publish = clock()
        self._unsigned = False  # leaves appended here since this process last published
        self.witnesses: WitnessSubmitter | None = None  # set by from_settings when witnesses are configured

    @classmethod
    def from_settings(cls, settings: LogSettings, *, store: BlobStore, index: Index) -> TransparencyLog:
        prefix = settings.resolved_tlog_prefix
        log = cls(
            store=store,
            index=index,
            signer=load_log_signer(settings.resolved_tlog_key, settings.tlog_origin),
            prefix=prefix,
            lock_path=settings.data_dir / "tlog" / (prefix.replace("/", "_") + ".lock"),
            interval=settings.tlog_checkpoint_interval,
            tsa_url=settings.tlog_tsa_url,
            lease=settings.tlog_lease,
            retain_for=(
                timedelta(days=settings.s3_object_lock_log_days) if settings.s3_object_lock != "off" else None
            ),
        )
        if settings.tlog_witnesses:
            log.witnesses = WitnessSubmitter(store=store, prefix=prefix, witnesses=settings.tlog_witnesses)
        return log

    def close(self, *, wait: float = 10.0) -> None:
        """Give the witnesses up to ``wait`` seconds for the last checkpoint, then stop their threads."""
        if self.witnesses is not None:
            self.witnesses.close(wait=wait)

    @property
    def size(self) -> int:
        """The log's size as this process last held it (the state object is authoritative)."""
        return self.writer.size

    # --- append ---------------------------------------------------------------------------------------
    def append(self, entries: Sequence[Entry], *, hook: Callable[[str], None] | None = None) -> int:
        """Append the entries not in the log yet (steps 1-6 of the module docstring); returns how many."""
        if not entries:
            return 0
        with self._locked():
            done = None
            for attempt in range(1, _ATTEMPTS + 1):
                self._hold()
                fresh = self._fresh(entries)
                if not fresh:
                    break
                try:
                    done = self.writer.integrate([e.leaf for e in fresh])
                except WriterFenced:
                    if attempt == _ATTEMPTS:
                        raise
                    continue  # another writer swapped first: reload and deduplicate again
                if hook is not None:
                    hook("after_tlog_tiles")
                self._unsigned = True
                break
            if self._clock() - self._last_publish >= self.interval:
                self._publish()
            self.writer.release()  # the other ingest processes integrate while this one writes its rows
            if done is not None:
                at = self._now()
                insert_leaves(
                    self.index,
                    [
                        LeafRow(done.first + i, e.decision_id, e.captured_at, e.leaf, at)
                        for i, e in enumerate(fresh)
                    ],
                )
            if hook is not None:
                hook("after_tlog_append")
        return len(fresh)

    def tick(self) -> None:
        """When idle: publish a checkpoint if this process appended since its last one and the interval
        passed. Never raises (the next append or tick tries again); a failure is logged."""
        if not self._unsigned or self._clock() - self._last_publish < self.interval:
            return
        try:
            self.publish()
        except Exception as exc:  # the store or the lease: not a reason to stop ingest
            self._last_publish = self._clock()
            logger.warning("transparency log %s: no checkpoint this time: %s", self.prefix, exc)

    def publish(self) -> str | None:
        """Publish a checkpoint for the log's size, unless the latest one already has it; returns the note."""
        with self._locked():
            self._hold()
            try:
                return self._publish()
            finally:
                self.writer.release()

    def _publish(self) -> str | None:
        self._last_publish = self._clock()
        self._unsigned = False
        note = self.writer.publish()
        if note is not None and self.witnesses is not None:
            self.witnesses.submit(note)  # DESIGN 24: background, returns at once, never raises
        return note

    # --- state ----------------------------------------------------------------------------------------
    def _hold(self) -> None:
        """Hold the log, waiting up to one lease (and a little) for another holder; then catch the index up."""
        deadline = time.monotonic() + self.lease + 5.0
        pause = 0.005
        while True:
            try:
                state = self.writer.hold()
                break
            except LeaseHeld as exc:
                if time.monotonic() >= deadline:
                    raise TransparencyLogError(f"could not hold the transparency log: {exc}") from exc
                time.sleep(pause)
                pause = min(pause * 2, 0.05)
        catch_up(self.index, self.store, self.prefix, state.size, now=self._now())

    def _fresh(self, entries: Sequence[Entry]) -> list[Entry]:
        known = logged_ids(self.index, [e.decision_id for e in entries])
        fresh: list[Entry] = []
        for entry in entries:
            if entry.decision_id not in known:
                known.add(entry.decision_id)
                fresh.append(entry)
        return fresh

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self._lock_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


def catch_up(index: Index, store: BlobStore, prefix: str, size: int, *, now: datetime | None = None) -> int:
    """Write the ``tlog_leaves`` rows this index lacks up to ``size`` from the entry bundles (what other
    writers integrated, or rows a crash lost); returns how many. Rows are keyed by leaf index, so a
    repeat is harmless."""
    have = leaf_count(index)
    if have >= size:
        return 0
    reader = TreeReader(store, prefix, size)
    at = now or datetime.now(UTC)
    rows: list[LeafRow] = []
    for n in range(have // WIDTH, -(-size // WIDTH)):
        for i, leaf in enumerate(reader.entries(n)):
            position = n * WIDTH + i
            if position < have:
                continue
            try:
                fields = parse_leaf(leaf)
                captured = parse_time(fields["capturedAt"])
                decision = fields["decisionId"]
            except (ProofInvalid, ValueError):
                decision, captured = _other_entry(leaf, at)
            rows.append(LeafRow(position, decision, captured, leaf, at))
    for start in range(0, len(rows), 10_000):
        insert_leaves(index, rows[start : start + 10_000])
    return len(rows)


def _other_entry(leaf: bytes, at: datetime) -> tuple[str, datetime]:
    """The key and time of a leaf that is not a capture's: an applied pact version (:mod:`.entries`),
    else ``''`` (kept; `log verify` names it)."""
    try:
        fields = parse_pact_leaf(leaf)
        return pact_entry_key(fields["version"], fields["appliedAt"]), parse_time(fields["appliedAt"])
    except (ProofInvalid, ValueError):
        return "", at

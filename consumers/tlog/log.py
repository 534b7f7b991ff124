"""Appending to the log at ingest, and publishing its checkpoints.

One append, inside ingest's batch after the segments and index rows are durable and before the
offsets are committed (:mod:`consumers.ingest.batch`), in numbered steps:

1. take the writer lock; the log's size is the index's leaf count (``tlog_leaves``); when it is not
   the size this process last wrote (first use, or another writer on this host), reload the frontier
   from the partial tiles of that size, and refuse a store whose checkpoint is ahead of the index;
2. drop the decisions that already have a leaf (a redelivered batch), and repeats within the batch;
3. write the new entry bundles and tiles (full ones first, then the partial tiles of the new size);
4. insert the ``tlog_leaves`` rows: from here on the leaves are part of the log;
5. publish a signed checkpoint when ``interval`` seconds passed since the last one.

A crash after 3 leaves tiles beyond the index's size: the next append writes that range again
(nothing signed covers it yet). A crash after 4 leaves leaves without a checkpoint: the next
publication (at the interval, at the end of a drain, when ingest stops) covers them. Tiles always
precede the rows that count them, and rows precede the checkpoint that signs them.

Scope of the lock: processes on this host sharing the data directory. Several ingest hosts appending
to one log need one writer; give each deployment its own ``BLACKBOX_TLOG_PREFIX`` and origin.
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from schemas.errors import TransparencyLogError

from .checkpoints import LogSigner, latest, load_log_signer, publish
from .frontier import Frontier, object_key
from .store import LeafRow, insert_leaves, leaf_count, logged_ids

if TYPE_CHECKING:
    from consumers.index import Index
    from producers.blobstore import BlobStore

logger = logging.getLogger(__name__)

__all__ = ["Entry", "LogSettings", "TransparencyLog"]


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
    def s3_object_lock(self) -> str: ...
    @property
    def s3_object_lock_log_days(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Entry:
    """One capture to log: its decision, its capture time (for the index row) and its leaf bytes."""

    decision_id: str
    captured_at: datetime
    leaf: bytes


class TransparencyLog:
    """The appending side of one log (module docstring). Not thread-safe; one per ingest process."""

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
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.store = store
        self.index = index
        self.signer = signer
        self.prefix = prefix.strip("/")
        self.interval = interval
        self.tsa_url = tsa_url
        # S3 Object Lock retention of every tile and checkpoint written (None: no lock)
        self.retain_for = retain_for
        self._lock_path = lock_path
        self._clock = clock
        self._now = now
        self._frontier: Frontier | None = None
        self._published = -1  # size of the latest checkpoint in the store (-1: not read yet)
        self._last_publish = clock()

    @classmethod
    def from_settings(cls, settings: LogSettings, *, store: BlobStore, index: Index) -> TransparencyLog:
        prefix = settings.resolved_tlog_prefix
        return cls(
            store=store,
            index=index,
            signer=load_log_signer(settings.resolved_tlog_key, settings.tlog_origin),
            prefix=prefix,
            lock_path=settings.data_dir / "tlog" / (prefix.replace("/", "_") + ".lock"),
            interval=settings.tlog_checkpoint_interval,
            tsa_url=settings.tlog_tsa_url,
            retain_for=(
                timedelta(days=settings.s3_object_lock_log_days) if settings.s3_object_lock != "off" else None
            ),
        )

    @property
    def size(self) -> int:
        """The size this process last appended to or loaded (the index's count is authoritative)."""
        return self._frontier.size if self._frontier is not None else 0

    # --- append ---------------------------------------------------------------------------------------
    def append(self, entries: Sequence[Entry], *, hook: Callable[[str], None] | None = None) -> int:
        """Append the entries not in the log yet (steps 1-5 of the module docstring); returns how many."""
        if not entries:
            return 0
        with self._locked():
            frontier = self._current()
            known = logged_ids(self.index, [e.decision_id for e in entries])
            fresh: list[Entry] = []
            for entry in entries:
                if entry.decision_id not in known:
                    known.add(entry.decision_id)
                    fresh.append(entry)
            if fresh:
                new, objects, order = frontier.extend([e.leaf for e in fresh])
                until = self._retain_until()
                for name in order:
                    self.store.put(object_key(self.prefix, name), objects[name], retain_until=until)
                if hook is not None:
                    hook("after_tlog_tiles")
                at = self._now()
                insert_leaves(
                    self.index,
                    [
                        LeafRow(frontier.size + i, e.decision_id, e.captured_at, e.leaf, at)
                        for i, e in enumerate(fresh)
                    ],
                )
                self._frontier = new
            if hook is not None:
                hook("after_tlog_append")
            if self._clock() - self._last_publish >= self.interval:
                self._publish()
        return len(fresh)

    def publish(self) -> str | None:
        """Publish a checkpoint for the current size, unless the latest one already has it; returns the note."""
        with self._locked():
            self._current()
            return self._publish()

    def _publish(self) -> str | None:
        self._last_publish = self._clock()
        frontier = self._frontier
        if frontier is None or frontier.size == self._published:
            return None
        note = publish(
            self.store,
            self.prefix,
            self.signer,
            size=frontier.size,
            root=frontier.root(),
            tsa_url=self.tsa_url,
            retain_until=self._retain_until(),
        )
        self._published = frontier.size
        logger.info("transparency log %s: checkpoint at %d leaves", self.prefix, frontier.size)
        return note

    def _retain_until(self) -> datetime | None:
        return self._now() + self.retain_for if self.retain_for is not None else None

    # --- state ----------------------------------------------------------------------------------------
    def _current(self) -> Frontier:
        """The frontier at the index's size, reloaded from the tiles when this process is behind."""
        size = leaf_count(self.index)
        if self._frontier is not None and self._frontier.size == size:
            return self._frontier
        frontier = Frontier.load(self.store, self.prefix, size)
        stored = latest(self.store, self.prefix, self.signer.key)
        published = stored[1] if stored is not None else None
        if published is not None and (
            published.size > size or (published.size == size and published.root != frontier.root())
        ):
            raise TransparencyLogError(
                f"the log at {self.prefix!r} has a checkpoint of {published.size} leaves that the index "
                f"({size} leaves) does not match: another index writes to this log, or the index lost rows. "
                "Refusing to sign a checkpoint inconsistent with it; set BLACKBOX_TLOG_PREFIX for this index"
            )
        self._frontier = frontier
        self._published = published.size if published is not None else 0
        return frontier

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self._lock_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

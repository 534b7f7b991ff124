"""The spool's receiving side, what ingest reads in embedded mode instead of a Kafka topic.

Each published spool file plays the role of a partition (its name is the "partition" in segment
keys and DLQ letters) and a record's index in the file is its offset. Progress is a
:class:`.files.SpoolCheckpoint` committed only after the batch is durable; a file whose
every record has been committed is then taken out of the spool with
:func:`.files.mark_consumed` - deleted: its captures are in segments by then, where retention and
erasure reach them (``keep_consumed=True`` moves it to ``consumed/`` instead, for a test or a debugging
session; ``blackbox compact`` deletes what is left there). Dying between the two re-reads that file
once, which the idempotent sinks absorb.

One embedded consumer per spool: an exclusive ``flock`` on the checkpoint's lock file makes a second
one fail fast instead of interleaving commits.

**Dead-lettered files.** Only published files are read: a producer writes to a hidden temp name and
renames it when complete (:mod:`.files`), so a file still being written is never seen here.
A published file that is not a readable spool file (truncated, damaged, a foreign ``*.avro``) would
otherwise stop ingest on every run; instead its readable records before the damage are delivered
as usual, and the file is moved aside to ``<spool>/dead-letter/<name>`` next to
``<name>.reason.json`` (reason, error, records read, when; :func:`.dead_letter.dead_letter_file`) -
once those records are committed, so a crash before the commit re-reads them. Ingest goes on with the
next file. Like ingest's DLQ limit, more than ``max_dead_files`` unreadable files in a row (no readable
record between them) stop the consumer with :class:`~producers.transports.base.DlqLimitExceeded` instead: that is a wrong directory or
a broken disk, not one bad file.
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO

from producers.transports.base import DlqLimitExceeded, Partition, SourceMessage
from schemas.errors import TransportError

from .dead_letter import DEAD_LETTER_DIR, dead_letter_file
from .files import (
    SpoolCheckpoint,
    SpoolFileCorrupt,
    SpoolPosition,
    SpoolRecord,
    mark_consumed,
    read_spool_file,
    recover_partials,
    spool_files,
)

__all__ = ["SpoolSource"]

logger = logging.getLogger(__name__)

_IDLE_STEP = 0.05


class SpoolSource:
    """Batches from a spool directory with durable progress (see the module docstring)."""

    def __init__(
        self,
        *,
        directory: Path,
        checkpoint: Path,
        topic: str,
        keep_consumed: bool = False,
        recover: bool = True,
        max_dead_files: int = 100,
    ) -> None:
        self.topic = topic
        self.directory = Path(directory)
        self.dead_letter_dir = self.directory / DEAD_LETTER_DIR
        self.dead_files = 0  # files this source moved to dead_letter_dir
        self._max_dead_files = max_dead_files
        self._dead_in_a_row = 0
        self._checkpoint = SpoolCheckpoint(checkpoint)
        self._keep = keep_consumed
        self._lock_fh = _lock(Path(checkpoint).with_name(Path(checkpoint).name + ".lock"))
        if recover:
            recovered = recover_partials(self.directory)
            if recovered:
                logger.warning("published %d records left in temp files by dead writers", recovered)
        self._reset()

    def _reset(self) -> None:
        """Start reading again from the committed checkpoint."""
        self._start = self._checkpoint.load()
        self._handed: set[str] = set()  # files whose records were all handed out since the reset
        self._last_index: dict[str, int] = {}  # last record index of each fully handed-out file
        self._records: Iterator[SpoolRecord] | None = None
        self._current: str | None = None
        self._read = 0  # records of the current file read so far (its next index)
        self._corrupt: dict[str, tuple[SpoolFileCorrupt, int]] = {}  # moved aside at their commit

    def _next_file(self) -> str | None:
        for name in spool_files(self.directory):
            if name not in self._handed and name != self._current:
                return name
        return None

    def _open(self, name: str) -> Iterator[SpoolRecord]:
        start = self._start.index if self._start is not None and self._start.file == name else 0
        self._read = start
        return read_spool_file(self.directory / name, start=start)

    def _take(self, max_messages: int) -> list[SourceMessage]:
        out: list[SourceMessage] = []
        while len(out) < max_messages:
            if self._records is None:
                name = self._next_file()
                if name is None:
                    break
                self._current, self._records = name, self._open(name)
            try:
                rec = next(self._records)
            except StopIteration:
                self._finish_current()
                continue
            except TransportError as exc:
                if not (self.directory / (self._current or "")).exists():  # marked by someone else
                    self._finish_current()
                    continue
                if isinstance(exc, SpoolFileCorrupt):
                    self._corrupt_current(exc, pending=any(m.partition == self._current for m in out))
                    continue
                raise
            out.append(SourceMessage(self.topic, rec.file, rec.index, rec.key, rec.value))
            self._last_index[rec.file] = rec.index
            self._read = rec.index + 1
            self._dead_in_a_row = 0
        return out

    def _corrupt_current(self, exc: SpoolFileCorrupt, *, pending: bool) -> None:
        """The current file is damaged from record ``self._read`` on: dead-letter it (module docstring)."""
        name, read = self._current, self._read
        assert name is not None
        self._dead_in_a_row += 1
        if self._dead_in_a_row > self._max_dead_files:
            raise DlqLimitExceeded(
                f"{self._dead_in_a_row} spool files in a row are unreadable (limit {self._max_dead_files}); "
                f"stopping instead of moving every file aside - is {self.directory} the spool? ({exc})"
            )
        self._finish_current()
        if pending:  # its good records are in the batch being built: move it once they are committed
            self._corrupt[name] = (exc, read)
        else:
            self._last_index.pop(name, None)
            self._dead_letter(name, exc, read)

    def _dead_letter(self, name: str, exc: SpoolFileCorrupt, read: int) -> None:
        if dead_letter_file(self.directory, name, exc, read=read):
            self.dead_files += 1

    def _finish_current(self) -> None:
        assert self._current is not None
        self._handed.add(self._current)
        self._last_index.setdefault(self._current, -1)  # an empty file: nothing to wait for
        self._current, self._records = None, None

    # --- Source ------------------------------------------------------------------------------------
    def consume(self, max_messages: int, timeout: float) -> Sequence[SourceMessage]:
        deadline = time.monotonic() + timeout
        while True:
            batch = self._take(max_messages)
            if batch or time.monotonic() >= deadline:
                return batch
            time.sleep(min(_IDLE_STEP, max(0.0, deadline - time.monotonic())))

    def commit(self, offsets: Mapping[Partition, int]) -> bool:
        if not offsets:
            return True
        last = str(list(offsets)[-1])  # offsets come in batch order: the file being read is last
        self._checkpoint.commit(SpoolPosition(last, offsets[last]))
        # Every file fully handed out and committed up to its last record leaves the spool. Files
        # handed out earlier were committed by earlier batches (batches commit in order).
        done = [
            name
            for name in sorted(self._handed)
            if name in self._last_index
            and offsets.get(name, self._last_index[name] + 1) > self._last_index[name]
        ]
        for name in done:
            corrupt = self._corrupt.pop(name, None)
            if corrupt is not None:
                self._dead_letter(name, *corrupt)
            else:
                mark_consumed(self.directory, name, keep=self._keep)
            self._last_index.pop(name, None)
        return True

    def caught_up(self) -> bool:
        return self._records is None and self._next_file() is None

    def keepalive(self, seconds: float) -> None:
        time.sleep(seconds)

    def resume(self) -> None:
        """Nothing is paused in a spool."""

    def owns(self, partitions: Iterable[Partition]) -> bool:
        return True

    def rewind(self, offsets: Mapping[Partition, int]) -> None:
        """Re-read everything after the last commit (a superset of ``offsets``; sinks are idempotent)."""
        self._reset()

    def lag(self) -> dict[Partition, int]:
        """Published files still in the spool (the file being read included): a spool has no message count."""
        return {"spool": len(spool_files(self.directory))}

    def close(self) -> None:
        try:
            fcntl.flock(self._lock_fh.fileno(), fcntl.LOCK_UN)
        finally:
            self._lock_fh.close()


def _lock(path: Path) -> IO[str]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fh = open(path, "a+")  # noqa: SIM115 - held for the source's lifetime, closed in close()
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        fh.close()
        raise TransportError(
            f"another embedded consumer holds {path} (pid file lock); run one consumer per spool"
        ) from exc
    os.set_inheritable(fh.fileno(), False)
    return fh

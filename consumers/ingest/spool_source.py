"""The embedded source: the local spool directory instead of a Kafka topic.

Each published spool file plays the role of a partition (its name is the "partition" in segment
keys and DLQ letters) and a record's index in the file is its offset. Progress is a
:class:`producers.spool.SpoolCheckpoint` committed only after the batch is durable; a file whose
every record has been committed is then taken out of the spool with
:func:`producers.spool.mark_consumed`. Dying between the two re-reads that file once, which the
idempotent sinks absorb.

One embedded consumer per spool: an exclusive ``flock`` on the checkpoint's lock file makes a second
one fail fast instead of interleaving commits.
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO

from producers.spool import (
    SpoolCheckpoint,
    SpoolPosition,
    SpoolRecord,
    mark_consumed,
    read_spool_file,
    recover_partials,
    spool_files,
)
from schemas.errors import TransportError

from .source import Partition, SourceMessage

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
        keep_consumed: bool = True,
        recover: bool = True,
    ) -> None:
        self.topic = topic
        self.directory = Path(directory)
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

    def _next_file(self) -> str | None:
        for name in spool_files(self.directory):
            if name not in self._handed and name != self._current:
                return name
        return None

    def _open(self, name: str) -> Iterator[SpoolRecord]:
        start = self._start.index if self._start is not None and self._start.file == name else 0
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
            except TransportError:
                if not (self.directory / (self._current or "")).exists():  # marked by someone else
                    self._finish_current()
                    continue
                raise
            out.append(SourceMessage(self.topic, rec.file, rec.index, rec.key, rec.value))
            self._last_index[rec.file] = rec.index
        return out

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

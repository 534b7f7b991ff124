"""The ingest loop: consume a batch, make it durable, then - and only then - commit.

One iteration is a checkpoint in numbered steps (the quix-streams order)::

    1. consume up to ``batch_size`` messages, waiting at most ``max_wait`` seconds
    2. process: decode, verify, dedup, segments PUT, DLQ flushed, index rows inserted
    3. commit the offsets past the batch, synchronously

A crash anywhere before 3 redelivers the batch; the sinks are idempotent (deterministic segment
keys, dedup against the index), so redelivery never duplicates a decision.

When a sink fails with a retriable error (the blob store is paused, the index is busy, the DLQ
topic is unreachable) the same batch is retried in place with backoff while the source keeps group
membership without consuming (:meth:`Source.keepalive`). If the batch's partitions move to another
consumer meanwhile, the batch is abandoned uncommitted and its new owner processes it.

``BLACKBOX_FAULT`` (read once by :mod:`consumers.ingest.service`, passed here as ``fault``) kills
the process with SIGKILL at a named point, for the crash tests: ``after_segments`` (segments
written, index not), ``after_index`` (index written, offsets not committed), ``after_commit``;
``after_tlog_tiles`` (the log's tiles written, its index rows not) and ``after_tlog_append`` (leaves
appended, no checkpoint yet, offsets not committed), see :mod:`consumers.tlog.log`.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol, get_args

from producers.transports.base import Partition, Source, SourceMessage, first_offsets, next_offsets
from schemas.errors import BlobStoreError, IndexError_, TransportError

if TYPE_CHECKING:
    from .batch import BatchProcessor, BatchResult

logger = logging.getLogger(__name__)

FaultPoint = Literal["after_segments", "after_index", "after_commit", "after_tlog_tiles", "after_tlog_append"]
FAULT_POINTS: tuple[str, ...] = get_args(FaultPoint)

RETRIABLE: tuple[type[BaseException], ...] = (BlobStoreError, IndexError_, TransportError)
"""Sink failures worth retrying in place; anything else is a bug and stops the loop uncommitted."""


def kill_at(fault: str | None) -> Callable[[str], None]:
    """A hook that SIGKILLs this process when it reaches the point named by ``fault``."""
    if fault is not None and fault not in FAULT_POINTS:
        raise ValueError(f"unknown fault point {fault!r}; known: {', '.join(FAULT_POINTS)}")

    def hook(point: str) -> None:
        if point == fault:
            logger.warning("fault injection: SIGKILL at %s", point)
            os.kill(os.getpid(), signal.SIGKILL)

    return hook


@dataclass(frozen=True, slots=True)
class LoopConfig:
    """Knobs of the loop. ``max_wait`` bounds how long a batch waits to fill."""

    batch_size: int = 500
    max_wait: float = 1.0
    drain_idle: float = 0.5
    """``--drain`` stops after an empty consume plus this much quiet time, once the source is caught up."""
    retry_initial: float = 0.5
    retry_max: float = 5.0

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        if self.max_wait < 0 or self.drain_idle < 0:
            raise ValueError("max_wait and drain_idle must be >= 0")


@dataclass(slots=True)
class LoopStats:
    """What a run did, summed over batches."""

    batches: int = 0
    messages: int = 0
    indexed: int = 0
    content_upgrades: int = 0
    duplicates: int = 0
    quarantined: int = 0
    conflicts: int = 0
    dead_lettered: int = 0
    flags: int = 0
    pact_violations: int = 0
    pact_errors: int = 0
    logged: int = 0
    commits: int = 0
    abandoned_batches: int = 0
    retries: int = 0
    conflict_ids: list[str] = field(default_factory=list)

    def add(self, result: BatchResult) -> None:
        self.batches += 1
        self.messages += result.messages
        self.indexed += result.indexed
        self.content_upgrades += result.content_upgrades
        self.duplicates += result.duplicates
        self.quarantined += result.quarantined
        self.conflicts += len(result.conflicts)
        self.dead_lettered += result.dead_lettered
        self.flags += result.flags
        self.pact_violations += result.pact_violations
        self.pact_errors += result.pact_errors
        self.logged += result.logged
        self.conflict_ids.extend(result.conflicts)


class LoopObserver(Protocol):
    """What the loop reports as it goes: metrics and health (:mod:`consumers.ingest.telemetry`).

    Called on the loop's thread; an observer must not raise.
    """

    def polled(self, messages: int) -> None:
        """The source was polled and returned ``messages`` messages."""

    def batch_done(self, result: BatchResult, *, seconds: float) -> None:
        """A batch is durable and its commit was attempted, ``seconds`` after it arrived."""

    def batch_failed(self, error: BaseException) -> None:
        """An attempt at a batch failed with a retriable error; it is retried in place."""

    def committed(self, error: BaseException | None) -> None:
        """A commit succeeded (``None``) or failed with ``error`` (kept and retried)."""


class _Unobserved:
    def polled(self, messages: int) -> None:
        pass

    def batch_done(self, result: BatchResult, *, seconds: float) -> None:
        pass

    def batch_failed(self, error: BaseException) -> None:
        pass

    def committed(self, error: BaseException | None) -> None:
        pass


class IngestLoop:
    """Drives a :class:`Source` through a :class:`BatchProcessor` (see the module docstring)."""

    def __init__(
        self,
        *,
        source: Source,
        processor: BatchProcessor,
        config: LoopConfig | None = None,
        hook: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        observer: LoopObserver | None = None,
    ) -> None:
        self.source = source
        self.processor = processor
        self.config = config or LoopConfig()
        self._hook = hook or (lambda point: None)
        self._clock = clock
        self._observer: LoopObserver = observer or _Unobserved()
        self._stop = False
        self._pending: dict[Partition, int] = {}
        self.stats = LoopStats()

    def stop(self) -> None:
        """Finish the current batch (including its commit) and return from :meth:`run`. Signal-safe."""
        self._stop = True

    def run(self, *, drain: bool = False, max_batches: int | None = None) -> LoopStats:
        """Consume until :meth:`stop`, ``max_batches`` batches, or - with ``drain`` - caught up."""
        cfg = self.config
        quiet_since: float | None = None
        while not self._stop:
            if max_batches is not None and self.stats.batches >= max_batches:
                break
            batch = self.source.consume(cfg.batch_size, cfg.max_wait)
            self._observer.polled(len(batch))
            if not batch:
                if drain:
                    now = self._clock()
                    quiet_since = quiet_since if quiet_since is not None else now
                    if now - quiet_since >= cfg.drain_idle and self.source.caught_up():
                        logger.info("caught up; drain finished")
                        break
                if self._pending:
                    self._commit({})
                self.processor.idle()
                continue
            quiet_since = None
            self.run_batch(batch)
        if self._pending and not self._commit({}):
            raise TransportError(
                f"stopped with durable but uncommitted offsets {self._pending}: they will be redelivered "
                "(and deduplicated) on the next start"
            )
        return self.stats

    def run_batch(self, batch: Sequence[SourceMessage]) -> bool:
        """Process and commit one batch; False when it was abandoned (partitions moved away)."""
        started = self._clock()
        result = self._process_with_retry(batch)
        if result is None:
            self.stats.abandoned_batches += 1
            return False
        self.stats.add(result)
        self._hook("after_index")
        self._commit(next_offsets(batch))
        self._observer.batch_done(result, seconds=self._clock() - started)
        self._hook("after_commit")
        return True

    def _commit(self, offsets: dict[Partition, int]) -> bool:
        """Commit ``offsets`` plus any earlier ones whose commit failed; True when nothing is left pending.

        A commit that fails because the broker is unreachable is not fatal - the batch is durable and
        redelivery is idempotent - so it is kept and retried with the next commit.
        """
        merged = dict(self._pending)
        for p, o in offsets.items():
            merged[p] = max(o, merged.get(p, o))
        try:
            if self.source.commit(merged):
                self.stats.commits += 1
        except TransportError as exc:
            logger.warning("commit failed (%s); will retry with the next batch", exc)
            self._pending = merged
            self._observer.committed(exc)
            return False
        self._observer.committed(None)
        self._pending = {}  # committed, or refused because the partitions moved: their new owner decides
        return True

    def _process_with_retry(self, batch: Sequence[SourceMessage]) -> BatchResult | None:
        delay = self.config.retry_initial
        partitions = {m.partition for m in batch}
        try:
            while True:
                try:
                    return self.processor.process(batch, hook=self._hook)
                except RETRIABLE as exc:
                    self.stats.retries += 1
                    self._observer.batch_failed(exc)
                    if self._stop:
                        raise
                    logger.warning(
                        "batch of %d failed (%s: %s); retrying in %.1fs",
                        len(batch),
                        type(exc).__name__,
                        exc,
                        delay,
                    )
                    self.source.keepalive(delay)
                    if not self.source.owns(partitions):
                        logger.warning(
                            "partitions of the failed batch were reassigned; abandoning it uncommitted"
                        )
                        self.source.rewind(first_offsets(batch))
                        return None
                    delay = min(delay * 2, self.config.retry_max)
        finally:
            self.source.resume()

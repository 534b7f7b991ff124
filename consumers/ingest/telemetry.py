"""The ingest loop's observer: batch results into the metrics, liveness into :class:`~consumers.observability.health.Health`.

Counts come from each :class:`~consumers.ingest.batch.BatchResult`, the same numbers the loop's
summary adds up, so the metrics and ``blackbox consume``'s final line never disagree. Commit lag is
read from the source after each commit and, while idle, at most once per ``lag_interval`` seconds.
Nothing here may stop ingest: a failure to read the lag is logged and skipped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from consumers.observability import metrics
from consumers.observability.health import Health

if TYPE_CHECKING:
    from consumers.ingest.batch import BatchResult
    from producers.transports.base import Partition

__all__ = ["IngestTelemetry"]

logger = logging.getLogger(__name__)


class IngestTelemetry:
    """A :class:`consumers.ingest.loop.LoopObserver` that feeds :mod:`consumers.observability.metrics` and a :class:`Health`."""

    def __init__(
        self,
        *,
        health: Health | None = None,
        lag: Callable[[], Mapping[Partition, int]] | None = None,
        lag_interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.health = health or Health()
        self._lag = lag
        self._lag_interval = lag_interval
        self._clock = clock
        self._lag_read: float | None = None
        self._lag_labels: set[str] = set()

    def polled(self, messages: int) -> None:
        self.health.polled()
        metrics.LAST_POLL.set_to_current_time()
        if not messages:
            self._refresh_lag(force=False)

    def batch_done(self, result: BatchResult, *, seconds: float) -> None:
        metrics.CONSUMED.inc(result.messages)
        metrics.INDEXED.inc(result.indexed)
        metrics.DEDUPLICATED.inc(result.duplicates)
        metrics.QUARANTINED.inc(result.quarantined)
        metrics.DEAD_LETTERED.inc(result.dead_lettered)
        metrics.BATCH_SECONDS.observe(seconds)
        self.health.batch_done()

    def batch_failed(self, error: BaseException) -> None:
        metrics.BATCH_RETRIES.inc()
        self.health.batch_failed(error)

    def committed(self, error: BaseException | None) -> None:
        self.health.committed(error)
        if error is not None:
            metrics.COMMIT_FAILURES.inc()
        else:
            self._refresh_lag(force=True)

    def _refresh_lag(self, *, force: bool) -> None:
        if self._lag is None:
            return
        now = self._clock()
        if not force and self._lag_read is not None and now - self._lag_read < self._lag_interval:
            return
        self._lag_read = now
        try:
            lag = {str(p): n for p, n in self._lag().items()}
        except Exception as exc:  # metrics never stop ingest
            logger.warning("could not read commit lag: %s: %s", type(exc).__name__, exc)
            return
        for gone in self._lag_labels - lag.keys():  # partitions moved to another consumer
            metrics.COMMIT_LAG.remove(gone)
        for partition, n in lag.items():
            metrics.COMMIT_LAG.labels(partition=partition).set(n)
        self._lag_labels = set(lag)

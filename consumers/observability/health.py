"""Is the ingest loop alive? Healthy when it polled its source recently and its last commit succeeded.

A loop stuck retrying a batch (the blob store or the index is down) stops polling and turns unhealthy
after ``stale_after`` seconds, with the error it keeps hitting as the reason. A failed commit is
unhealthy until a later commit succeeds. Written by the loop's thread, read by the HTTP server's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Health", "HealthStatus"]


@dataclass(frozen=True, slots=True)
class HealthStatus:
    ok: bool
    reason: str


class Health:
    """The loop's liveness (see the module docstring)."""

    def __init__(self, *, stale_after: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        if stale_after <= 0:
            raise ValueError("stale_after must be > 0")
        self.stale_after = stale_after
        self._clock = clock
        self._last_poll: float | None = None
        self._commit_error: str | None = None
        self._batch_error: str | None = None

    def polled(self) -> None:
        self._last_poll = self._clock()

    def batch_failed(self, error: BaseException) -> None:
        self._batch_error = _describe(error)

    def batch_done(self) -> None:
        self._batch_error = None

    def committed(self, error: BaseException | None = None) -> None:
        self._commit_error = None if error is None else _describe(error)

    def status(self) -> HealthStatus:
        last = self._last_poll
        if last is None:
            return HealthStatus(False, "starting: the source has not been polled yet")
        age = self._clock() - last
        if age > self.stale_after:
            why = f"; last error: {self._batch_error}" if self._batch_error else ""
            return HealthStatus(False, f"no poll for {age:.1f}s (limit {self.stale_after:g}s){why}")
        if self._commit_error is not None:
            return HealthStatus(False, f"last commit failed: {self._commit_error}")
        return HealthStatus(True, f"ok: polled {age:.1f}s ago, last commit succeeded")


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"

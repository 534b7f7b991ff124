"""Request limits: a body-size cap and a token bucket per caller (or per client address before a
caller is known). Both refuse with JSON (413, 429 with ``Retry-After``), never by reading more."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class _Bucket:
    tokens: float
    stamp: float


class RateLimiter:
    """``rate`` requests per second per key, bursts of ``burst``; :meth:`take` answers how long to wait
    (0 when allowed). Keys idle long enough to be full again are forgotten."""

    def __init__(self, *, rate: float, burst: int, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._rate = rate
        self._burst = float(burst)
        self._monotonic = monotonic
        self._buckets: dict[str, _Bucket] = {}
        self._lock = threading.Lock()

    def take(self, key: str) -> float:
        now = self._monotonic()
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None:
                bucket = self._buckets[key] = _Bucket(self._burst, now)
            bucket.tokens = min(self._burst, bucket.tokens + (now - bucket.stamp) * self._rate)
            bucket.stamp = now
            if bucket.tokens >= 1.0:
                bucket.tokens -= 1.0
                wait = 0.0
            else:
                wait = (1.0 - bucket.tokens) / self._rate
            if len(self._buckets) > 10_000:
                self._forget(now)
            return wait

    def _forget(self, now: float) -> None:
        full = self._burst / self._rate
        for key in [k for k, b in self._buckets.items() if now - b.stamp > full]:
            del self._buckets[key]

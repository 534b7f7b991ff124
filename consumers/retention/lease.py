"""One retention writer at a time across hosts: a lease in the blob store (DESIGN 23).

Compaction, legal hold and release, and erasure each take the lease before they change anything:
the object ``leases/retention`` (JSON: holder, fencing token, expiry) replaced only by compare-and-swap
on its ETag, like the transparency log's state. A second writer waits for it up to ``wait`` seconds,
then exits with :class:`RetentionBusy` naming the holder and until when; a holder that died is
taken over when its lease expires, with the next token.

A holder calls :meth:`RetentionLease.check` before each step (compaction does at every step point and
between batches); it renews the lease past half its term, and raises :class:`LeaseLost` once the term
ran out on this process's monotonic clock or another holder swapped the object: a holder stalled
(SIGSTOP, a pause) past its lease that wakes stops before its next step and changes nothing more.
The host-local ``flock`` (:mod:`.lock`) still orders processes sharing one data directory.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from schemas.errors import BlobConflict, BlobNotFound, RetentionError

from .lock import RetentionBusy

if TYPE_CHECKING:
    from producers.blobstore import BlobStore

logger = logging.getLogger(__name__)

__all__ = ["LEASE_KEY", "LeaseLost", "RetentionLease", "retention_lease"]

LEASE_KEY = "leases/retention"


class LeaseLost(RetentionBusy):
    """This retention writer's lease ran out or was taken over: it stops before its next step."""


@dataclass(frozen=True, slots=True)
class _Held:
    holder: str
    token: int
    until: float  # unix seconds

    def to_json(self) -> bytes:
        return json.dumps({"holder": self.holder, "token": self.token, "until": self.until}).encode()

    @classmethod
    def from_json(cls, data: bytes) -> _Held:
        try:
            raw = json.loads(data)
            return cls(str(raw["holder"]), int(raw["token"]), float(raw["until"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise RetentionError(f"the retention lease {LEASE_KEY} is unreadable: {exc}") from exc


class RetentionLease:
    """The retention lease for one writer (module docstring)."""

    def __init__(
        self,
        store: BlobStore,
        *,
        what: str,
        ttl: float = 60.0,
        key: str = LEASE_KEY,
        holder: str | None = None,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if ttl <= 0:
            raise ValueError("a lease's term is a positive number of seconds")
        self.store = store
        self.key = key
        self.ttl = ttl
        self.holder = holder or f"{what}@{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self._wall = wall
        self._monotonic = monotonic
        self._etag: str | None = None
        self._held: _Held | None = None
        self._deadline = 0.0
        self._renew_at = 0.0

    @property
    def token(self) -> int:
        """The fencing token of this holding (0 when not held)."""
        return self._held.token if self._held is not None else 0

    def acquire(self, *, wait: float = 0.0) -> int:
        """Take the lease, waiting up to ``wait`` seconds for a live holder; the fencing token."""
        deadline = self._monotonic() + wait
        pause = 0.05
        while True:
            try:
                current = self.store.get_tagged(self.key)
                etag: str | None = current.etag
                before = _Held.from_json(current.data)
            except BlobNotFound:
                etag, before = None, None
            now = self._wall()
            if before is not None and before.holder != self.holder and before.until > now:
                if self._monotonic() >= deadline:
                    raise RetentionBusy(
                        f"another retention writer holds the lease ({before.holder}, token {before.token}) "
                        f"for {before.until - now:.0f}s more: compaction, hold, release and erasure run one "
                        "at a time across hosts; try again later"
                    )
                time.sleep(pause)
                pause = min(pause * 2, 1.0)
                continue
            token = (before.token if before is not None else 0) + 1
            if self._swap(_Held(self.holder, token, 0.0), etag, taking=True):
                logger.info("retention lease %s taken by %s (token %d)", self.key, self.holder, token)
                return token

    def check(self, point: str = "") -> None:
        """Before a step: raise :class:`LeaseLost` if the lease is gone; renew it past half its term."""
        if self._held is None:
            raise LeaseLost(f"{self.holder} does not hold the retention lease")
        if self._monotonic() >= self._deadline:
            self._held = None
            raise LeaseLost(
                f"{self.holder}'s retention lease ran out before {point or 'its next step'} "
                "(stalled past its term): it stops and changes nothing more"
            )
        if self._monotonic() >= self._renew_at and not self._swap(
            _Held(self.holder, self._held.token, 0.0), self._etag, taking=False
        ):
            self._held = None
            raise LeaseLost(f"another retention writer took the lease from {self.holder}")

    def guard(self, hook: Callable[[str], None]) -> Callable[[str], None]:
        """``hook`` (a step-point callback such as compaction's) with :meth:`check` before it."""

        def guarded(point: str) -> None:
            self.check(point)
            hook(point)

        return guarded

    def release(self) -> None:
        """End the lease now (the next writer need not wait for it to expire)."""
        if self._held is None:
            return
        held, self._held = self._held, None
        try:
            self.store.put_if(self.key, _Held(held.holder, held.token, 0.0).to_json(), etag=self._etag)
        except BlobConflict:
            logger.warning(
                "retention lease %s was taken from %s before it released it", self.key, self.holder
            )

    def _swap(self, held: _Held, etag: str | None, *, taking: bool) -> bool:
        started = self._monotonic()
        renewed = _Held(held.holder, held.token, self._wall() + self.ttl)
        try:
            self._etag = self.store.put_if(self.key, renewed.to_json(), etag=etag).etag
        except BlobConflict:
            return False  # taking: someone else was faster, look again; renewing: lost
        self._held = renewed
        self._deadline = started + self.ttl
        self._renew_at = started + self.ttl / 2
        return True


@contextmanager
def retention_lease(
    store: BlobStore, *, what: str, ttl: float = 60.0, wait: float = 0.0
) -> Iterator[RetentionLease]:
    """Hold the retention lease for the block (see :class:`RetentionLease`)."""
    lease = RetentionLease(store, what=what, ttl=ttl)
    lease.acquire(wait=wait)
    try:
        yield lease
    finally:
        lease.release()

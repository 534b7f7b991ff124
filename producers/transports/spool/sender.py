"""The spool's sending side: the same key/value records Kafka would get, appended to Avro container
files in a local directory (:mod:`.files`) and published by fsync + rename. Publishing is delivery
(the contract in :mod:`producers.transports.base`)."""

from __future__ import annotations

import os
import threading
import time
from typing import TYPE_CHECKING, Any

from producers.transports.base import DeliveryCallback, DeliveryFailed
from schemas.errors import TransportError

from .files import SpoolWriter, recover_partials

if TYPE_CHECKING:
    from producers.settings import BlackboxSettings

__all__ = ["SpoolTransport"]


class SpoolTransport:
    """Embedded transport: records go to Avro container files in ``directory``.

    Accepted records are buffered in the current temp file and *published* (fsync + rename) when
    the file reaches ``max_file_records`` / ``max_file_bytes``, when ``linger_ms`` has passed since
    the first unpublished record (checked in :meth:`poll`), or on :meth:`flush`. Publishing is
    delivery. On start, temp files left by dead writers are recovered.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        linger_ms: int = 50,
        max_file_records: int = 10_000,
        max_file_bytes: int = 64 * 1024 * 1024,
        codec: str = "null",
    ) -> None:
        self.directory = directory
        self.linger = linger_ms / 1000
        recover_partials(directory)
        self._writer = SpoolWriter(
            directory, max_file_records=max_file_records, max_file_bytes=max_file_bytes, codec=codec
        )
        self._lock = threading.Lock()
        self._waiting: list[DeliveryCallback] = []
        self._ready: list[tuple[DeliveryCallback, DeliveryFailed | None]] = []
        self._first_at = 0.0
        self._closed = False

    @classmethod
    def from_settings(
        cls, settings: BlackboxSettings, *, delivery_timeout: float | None = None, **options: Any
    ) -> SpoolTransport:
        """``delivery_timeout`` is accepted and unused: a local publish does not wait on anyone."""
        return cls(settings.resolved_spool_dir, **options)

    def __repr__(self) -> str:
        return f"SpoolTransport({str(self.directory)!r})"

    def send(self, key: bytes, value: bytes, on_delivery: DeliveryCallback) -> None:
        with self._lock:
            if self._closed:
                raise TransportError("transport is closed")
            self._writer.append(key, value)
            if not self._waiting:
                self._first_at = time.monotonic()
            self._waiting.append(on_delivery)
            if self._writer.full:
                self._publish_locked()

    def _publish_locked(self) -> None:
        waiting, self._waiting = self._waiting, []
        if not waiting:
            return
        try:
            self._writer.publish()
        except TransportError as exc:
            failure = DeliveryFailed(str(exc), code="spool_io")
            self._ready.extend((cb, failure) for cb in waiting)
        else:
            self._ready.extend((cb, None) for cb in waiting)

    def _serve(self) -> int:
        with self._lock:
            ready, self._ready = self._ready, []
        for callback, result in ready:
            callback(result)
        return len(ready)

    def poll(self, timeout: float = 0.0) -> int:
        with self._lock:
            due = self._first_at + self.linger - time.monotonic() if self._waiting else None
        if due is not None and due > 0 and timeout > 0:  # wait like Kafka's poll, never spin
            pause = min(due, timeout)
            time.sleep(pause)
            due -= pause
        if due is not None and due <= 0:
            with self._lock:
                self._publish_locked()
        return self._serve()

    def flush(self, timeout: float | None = None) -> int:
        with self._lock:
            self._publish_locked()
        self._serve()
        return 0

    def close(self, timeout: float | None = None) -> None:
        if self._closed:
            return
        self.flush(timeout)
        with self._lock:
            self._closed = True

    def __len__(self) -> int:
        return len(self._waiting) + len(self._ready)

"""Transports: how encoded captures leave the process. One small protocol, two implementations.

- :class:`KafkaTransport` — confluent-kafka (librdkafka) idempotent producer, ``acks=all``, zstd,
  key = agent id so one agent's captures stay in order on one partition.
- :class:`SpoolTransport` — embedded mode: the same key/value records appended to Avro container
  files in a local directory (:mod:`producers.spool`), published by fsync + rename.

Delivery contract, for both: :meth:`Transport.send` either raises :class:`TransportError` (the
message was not accepted; its callback is never called) or accepts the message, and then its
``on_delivery`` callback is called exactly once, with ``None`` once the message is durable (broker
acknowledged with ``acks=all`` / spool file fsync'd and renamed) or with a :class:`DeliveryFailed`
saying why not. Callbacks run on the thread that calls :meth:`~Transport.poll`,
:meth:`~Transport.flush` or :meth:`~Transport.close`. :meth:`~Transport.close` fails whatever it
could not deliver, through the callbacks: nothing is lost silently.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from producers.spool import SpoolWriter, recover_partials
from schemas.errors import TransportError

if TYPE_CHECKING:
    from producers.settings import BlackboxSettings

__all__ = [
    "DeliveryCallback",
    "DeliveryFailed",
    "KafkaTransport",
    "SpoolTransport",
    "Transport",
    "open_transport",
]

log = logging.getLogger(__name__)


class DeliveryFailed(TransportError):
    """An accepted message was not delivered. ``ambiguous``: it may have reached the broker anyway
    (a timeout or purge after it was sent), so a retry may duplicate it — ingest deduplicates."""

    def __init__(self, message: str, *, code: str = "", ambiguous: bool = False) -> None:
        self.code = code
        self.ambiguous = ambiguous
        super().__init__(message)


DeliveryCallback = Callable[[DeliveryFailed | None], None]


@runtime_checkable
class Transport(Protocol):
    """Send keyed byte messages; learn their fate through callbacks."""

    def send(self, key: bytes, value: bytes, on_delivery: DeliveryCallback) -> None:
        """Accept one message or raise :class:`TransportError` (then ``on_delivery`` never runs)."""
        ...

    def poll(self, timeout: float = 0.0) -> int:
        """Serve delivery callbacks, waiting up to ``timeout`` s if something is in flight."""
        ...

    def flush(self, timeout: float | None = None) -> int:
        """Deliver everything accepted so far; return how many messages are still in flight."""
        ...

    def close(self, timeout: float | None = None) -> None:
        """Flush, then fail (through their callbacks) the messages still undelivered, and release."""
        ...


# --- Kafka -------------------------------------------------------------------------------------

_AMBIGUOUS_CODES = {"_MSG_TIMED_OUT", "_PURGE_INFLIGHT", "_TIMED_OUT", "REQUEST_TIMED_OUT"}


class KafkaTransport:
    """Idempotent librdkafka producer for one topic.

    ``message_timeout_ms`` bounds how long a message may wait for the broker (unreachable broker,
    leader election) before its callback reports failure; ``send_timeout`` bounds how long
    :meth:`send` waits for room in librdkafka's local queue (``buffer_kbytes``) before raising.
    ``config`` entries override everything (any librdkafka producer property). ``batch.size`` is
    effectively capped by the broker's ``message.max.bytes``.
    """

    def __init__(
        self,
        *,
        bootstrap: str,
        topic: str,
        linger_ms: int = 10,
        batch_size: int = 1_000_000,
        message_timeout_ms: int = 60_000,
        max_message_bytes: int = 1_048_576,
        send_timeout: float = 5.0,
        buffer_kbytes: int = 256 * 1024,
        config: Mapping[str, Any] | None = None,
        on_error: Callable[[TransportError], None] | None = None,
    ) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        self.send_timeout = send_timeout
        self._on_error = on_error
        conf: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "compression.type": "zstd",
            "linger.ms": linger_ms,
            "batch.size": batch_size,
            "batch.num.messages": 10_000,
            "message.timeout.ms": message_timeout_ms,
            "message.max.bytes": max_message_bytes,
            "queue.buffering.max.kbytes": buffer_kbytes,
            "client.id": f"blackbox-producer-{os.getpid()}",
            "error_cb": self._error_cb,
            # librdkafka's own log lines go to Python logging, not to the agent's stderr
            "logger": logging.getLogger(f"{__name__}.librdkafka"),
        }
        conf.update(config or {})
        try:
            self._producer = Producer(conf)
        except Exception as exc:  # KafkaException on bad config
            raise TransportError(f"cannot create Kafka producer: {exc}") from exc
        self._closed = False

    @classmethod
    def from_settings(cls, settings: BlackboxSettings, **options: Any) -> KafkaTransport:
        options.setdefault("max_message_bytes", max(1_048_576, settings.max_message_bytes + 65_536))
        return cls(bootstrap=settings.kafka_bootstrap, topic=settings.topic, **options)

    def __repr__(self) -> str:
        return f"KafkaTransport(topic={self.topic!r})"

    def _error_cb(self, err: Any) -> None:
        # Client-level errors (all brokers down, fatal idempotence errors). Per-message outcomes
        # still arrive through delivery callbacks; this only makes the condition visible early.
        error = TransportError(f"kafka: {err.name()}: {err.str()}")
        log.warning("%s%s", error, " (fatal)" if err.fatal() else "")
        if self._on_error is not None:
            try:
                self._on_error(error)
            except Exception:
                log.exception("transport on_error callback raised")

    def send(self, key: bytes, value: bytes, on_delivery: DeliveryCallback) -> None:
        if self._closed:
            raise TransportError("transport is closed")

        def delivered(err: Any, _msg: Any) -> None:
            if err is None:
                on_delivery(None)
            else:
                code = err.name()
                on_delivery(
                    DeliveryFailed(
                        f"kafka: {code}: {err.str()}", code=code, ambiguous=code in _AMBIGUOUS_CODES
                    )
                )

        deadline = time.monotonic() + self.send_timeout
        while True:
            try:
                self._producer.produce(self.topic, value=value, key=key, on_delivery=delivered)
                return
            except BufferError:
                # librdkafka's local queue is full: serve callbacks to make room, bounded.
                if time.monotonic() >= deadline:
                    raise TransportError(
                        f"kafka local queue full for {self.send_timeout}s (broker slow or unreachable)"
                    ) from None
                self._producer.poll(0.05)
            except Exception as exc:  # KafkaException: message too large, fatal producer state
                raise TransportError(f"kafka produce failed: {exc}") from exc

    def poll(self, timeout: float = 0.0) -> int:
        return int(self._producer.poll(timeout))

    def flush(self, timeout: float | None = None) -> int:
        return int(self._producer.flush(-1 if timeout is None else timeout))

    def close(self, timeout: float | None = None) -> None:
        if self._closed:
            return
        remaining = self.flush(timeout)
        if remaining:
            # Give up on the rest, but through their callbacks (_PURGE_QUEUE / _PURGE_INFLIGHT).
            self._producer.purge(in_queue=True, in_flight=True, blocking=False)
            self._producer.flush(5.0)
            self._producer.poll(0)
        self._closed = True

    def __len__(self) -> int:
        return len(self._producer)


# --- local spool -------------------------------------------------------------------------------


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
    def from_settings(cls, settings: BlackboxSettings, **options: Any) -> SpoolTransport:
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


def open_transport(settings: BlackboxSettings, **options: Any) -> Transport:
    """The transport the settings name (``kafka`` or ``spool``); ``options`` go to its constructor."""
    if settings.transport == "kafka":
        return KafkaTransport.from_settings(settings, **options)
    return SpoolTransport.from_settings(settings, **options)

"""Kafka's sending side: a confluent-kafka (librdkafka) idempotent producer, ``acks=all``, zstd, key =
agent id so one agent's captures stay in order on one partition (the delivery contract is in
:mod:`producers.transports.base`)."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from producers.transports.base import DeliveryCallback, DeliveryFailed
from schemas.errors import TransportError

if TYPE_CHECKING:
    from producers.settings import BlackboxSettings

__all__ = ["KafkaTransport"]

log = logging.getLogger(__name__)

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
    def from_settings(
        cls, settings: BlackboxSettings, *, delivery_timeout: float | None = None, **options: Any
    ) -> KafkaTransport:
        """``delivery_timeout`` (seconds, at least 1) becomes librdkafka's ``message.timeout.ms``."""
        options.setdefault("max_message_bytes", max(1_048_576, settings.max_message_bytes + 65_536))
        if delivery_timeout is not None:
            options["message_timeout_ms"] = max(1000, int(delivery_timeout * 1000))
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

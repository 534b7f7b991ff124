"""Kafka's dead-letter path: dead letters to a topic (default ``blackbox.captures.v1.dlq``), the
original key and bytes kept, with headers ``reason``, ``detail`` and ``original_topic`` /
``original_partition`` / ``original_offset``."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

from producers.transports.base import DeadLetter, SourceMessage, parse_partition
from schemas.errors import TransportError

__all__ = ["KafkaDeadLetters", "read_dead_letters"]


class KafkaDeadLetters:
    """Dead letters to a Kafka topic, original key kept."""

    def __init__(self, *, bootstrap: str, topic: str, config: dict[str, Any] | None = None) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "compression.type": "zstd",
                "linger.ms": 5,
                "message.timeout.ms": 60_000,
                "logger": logging.getLogger(f"{__name__}.librdkafka"),
                **(config or {}),
            }
        )
        self._lock = threading.Lock()
        self._errors: list[str] = []

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            with self._lock:
                self._errors.append(str(err))

    def send(self, letters: Sequence[DeadLetter]) -> None:
        for letter in letters:
            while True:
                try:
                    self._producer.produce(
                        self.topic,
                        value=letter.message.value,
                        key=letter.message.key,
                        headers=letter.headers(),
                        on_delivery=self._on_delivery,
                    )
                    break
                except BufferError:
                    self._producer.poll(0.1)
            self._producer.poll(0)

    def flush(self) -> None:
        remaining = self._producer.flush(60)
        with self._lock:
            errors, self._errors = self._errors, []
        if remaining:
            raise TransportError(f"{remaining} dead letters not delivered to {self.topic} within 60 s")
        if errors:
            raise TransportError(f"dead letters to {self.topic} failed: {errors[0]} ({len(errors)} in all)")

    def close(self) -> None:
        self._producer.flush(10)


def read_dead_letters(*, bootstrap: str, topic: str, expect: int, timeout: float = 30.0) -> list[DeadLetter]:
    """Up to ``expect`` dead letters from the start of ``topic``, as they were sent (``timeout`` s at most).

    Reads with a throwaway consumer group and commits nothing.
    """
    from confluent_kafka import Consumer, KafkaException

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"blackbox-dlq-reader-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "logger": logging.getLogger(f"{__name__}.librdkafka"),
        }
    )
    letters: list[DeadLetter] = []
    deadline = time.monotonic() + timeout
    try:
        consumer.subscribe([topic])
        while len(letters) < expect and time.monotonic() < deadline:
            for msg in consumer.consume(expect - len(letters), 0.5):
                if msg.error() is None:
                    letters.append(_letter(msg))
    except KafkaException as exc:
        raise TransportError(f"cannot read dead letters from {topic}: {exc}") from exc
    finally:
        consumer.close()
    return letters


def _letter(msg: Any) -> DeadLetter:
    headers = {name: (value or b"").decode("utf-8", "replace") for name, value in msg.headers() or []}
    original = SourceMessage(
        topic=headers.get("original_topic", ""),
        partition=parse_partition(headers.get("original_partition", "")),
        offset=int(headers.get("original_offset", "-1")),
        key=msg.key(),
        value=msg.value() or b"",
    )
    return DeadLetter(original, headers.get("reason", ""), headers.get("detail", ""))

"""The Kafka backend: :mod:`.sender` (idempotent producer), :mod:`.source` (consumer group ingest reads),
:mod:`.dead_letter` (the DLQ topic). Built from settings by the four functions below, which
:mod:`producers.transports` calls; confluent-kafka loads only when one of them runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from producers.settings import BlackboxSettings
    from producers.transports.base import DeadLetterSink, Source, Transport


def open_sender(settings: BlackboxSettings, **options: Any) -> Transport:
    from .sender import KafkaTransport

    return KafkaTransport.from_settings(settings, **options)


def open_source(
    settings: BlackboxSettings, *, config: Mapping[str, Any] | None, max_dead_files: int
) -> Source:
    """Consumer group ``consumer_group`` on ``topic``; a topic has no input files (``max_dead_files``)."""
    from .source import KafkaSource

    return KafkaSource(
        bootstrap=settings.kafka_bootstrap, topic=settings.topic, group=settings.consumer_group, config=config
    )


def open_dead_letter(settings: BlackboxSettings) -> DeadLetterSink:
    from .dead_letter import KafkaDeadLetters

    return KafkaDeadLetters(bootstrap=settings.kafka_bootstrap, topic=settings.dlq_topic)


def dead_letter_location(settings: BlackboxSettings) -> str:
    return f"topic {settings.dlq_topic}"

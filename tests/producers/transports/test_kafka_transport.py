"""The transport contract on the real Kafka broker (``deploy/local``), through the settings."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from transport_contract import TransportContract

from producers.settings import BlackboxSettings, load_settings
from producers.transports import DeadLetter, Transport, open_sender
from producers.transports.kafka.dead_letter import read_dead_letters

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]


class TestKafkaTransport(TransportContract):
    kind = "kafka"
    undelivered_code = "_PURGE"
    sample_partition = 2

    @pytest.fixture
    def settings(
        self, tmp_path: Path, kafka_bootstrap: str, new_kafka_topic: Callable[..., str]
    ) -> BlackboxSettings:
        topic = new_kafka_topic("bbtest.transport", partitions=3)
        return load_settings(
            transport="kafka",
            data_dir=tmp_path / "bb",
            kafka_bootstrap=kafka_bootstrap,
            topic=topic,
            dlq_topic=new_kafka_topic(f"{topic}.dlq"),
            consumer_group=f"bbtest-{uuid.uuid4().hex[:8]}",
        )

    def undeliverable(self, settings: BlackboxSettings) -> tuple[Transport, Callable[[], None]]:
        # Nothing listens on port 1; the messages would wait there for ten minutes, so close() gives up.
        nowhere = settings.model_copy(update={"kafka_bootstrap": "127.0.0.1:1", "topic": "never"})
        return open_sender(nowhere, delivery_timeout=600), lambda: None

    def read_dead_letters(self, settings: BlackboxSettings, *, expect: int) -> list[DeadLetter]:
        return read_dead_letters(bootstrap=settings.kafka_bootstrap, topic=settings.dlq_topic, expect=expect)

"""A commit librdkafka never answers, and a close stuck behind it, do not stop ingest (real broker).

librdkafka has been seen to leave a synchronous commit blocked forever after a broker restart (the
reply never delivered). The wedge cannot be produced on demand, so these tests hold the real
consumer's ``commit``/``close`` on an event the way librdkafka does and check what the source does
around it; everything else is the real consumer on the real broker.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from producers.transports.base import SourceMessage
from producers.transports.kafka.source import KafkaSource
from schemas.errors import TransportError

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]


class _Held:
    """The real consumer, with ``commit``/``close`` calls named in ``hold`` blocked until released."""

    def __init__(self, consumer: Consumer, hold: set[str]) -> None:
        self._consumer = consumer
        self.hold = hold
        self.release = threading.Event()
        self.calls: list[str] = []
        self.closed = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._consumer, name)

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(name)
        if name in self.hold:
            self.hold.discard(name)
            self.release.wait(60)
        return getattr(self._consumer, name)(*args, **kwargs)

    def commit(self, *args: Any, **kwargs: Any) -> Any:
        return self._call("commit", *args, **kwargs)

    def close(self) -> Any:
        try:
            return self._call("close")
        finally:
            self.closed.set()


@pytest.fixture
def source(kafka_bootstrap: str, new_kafka_topic: Callable[..., str]) -> Iterator[KafkaSource]:
    topic = new_kafka_topic("bbtest.commit", partitions=1)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for i in range(5):
        producer.produce(topic, value=f"m{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    src = KafkaSource(
        bootstrap=kafka_bootstrap,
        topic=topic,
        group=f"g-{uuid.uuid4().hex[:8]}",
        commit_retry_seconds=1.5,
        close_seconds=1.0,
    )
    got: list[SourceMessage] = []
    deadline = time.monotonic() + 60
    while len(got) < 5 and time.monotonic() < deadline:
        got.extend(src.consume(5 - len(got), 1.0))
    assert len(got) == 5
    yield src
    held = src._consumer
    if isinstance(held, _Held):
        held.release.set()
        if "close" in held.calls:  # its own close finishes on the thread the source left it on
            assert held.closed.wait(30)
            return
        src._consumer = held._consumer
    src._close_seconds = 30.0
    src.close()


def _committed(src: KafkaSource) -> int:
    """The group's committed offset of partition 0, read from the coordinator."""
    held = src._consumer
    consumer = held._consumer if isinstance(held, _Held) else held
    [tp] = consumer.committed([TopicPartition(src.topic, 0)], timeout=10)
    return int(tp.offset)


def test_an_unanswered_commit_is_given_up_at_its_deadline_and_the_next_one_lands(source: KafkaSource) -> None:
    held = _Held(source._consumer, {"commit"})
    source._consumer = held  # type: ignore[assignment]
    started = time.monotonic()
    with pytest.raises(TransportError, match=r"got no answer within .*\(1 unanswered"):
        source.commit({0: 3})
    assert 1.0 <= time.monotonic() - started < 5.0  # the deadline, not librdkafka, ended the wait
    assert source._unanswered == 1

    assert source.commit({0: 5}) is True  # the source still works: the next commit goes through
    assert _committed(source) == 5
    assert source.lag() == {0: 0}

    held.release.set()  # the stuck request answers late: counted out, and it changes nothing later
    deadline = time.monotonic() + 10
    while source._unanswered and time.monotonic() < deadline:
        time.sleep(0.05)
    assert source._unanswered == 0
    assert held.calls == ["commit", "commit"]


def test_a_commit_that_answers_in_time_is_waited_for(source: KafkaSource) -> None:
    assert source.commit({0: 2}) is True
    assert _committed(source) == 2
    assert source._unanswered == 0


def test_close_stuck_behind_librdkafka_returns_at_its_deadline(source: KafkaSource) -> None:
    held = _Held(source._consumer, {"close"})
    source._consumer = held  # type: ignore[assignment]
    started = time.monotonic()
    source.close()
    assert 0.9 <= time.monotonic() - started < 5.0
    assert held.calls == ["close"]
    held.release.set()  # the fixture lets the real close finish

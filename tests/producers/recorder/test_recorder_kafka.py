"""The Recorder against the real broker: volume and verification, an unreachable broker, a broker that
comes up late, claim check through MinIO (the transport's own contract: tests/producers/transports)."""

from __future__ import annotations

import contextlib
import random
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from recorder_testdata import configure, make_content, new_signer, record, record_tiny, trust_for

from producers.blobstore import S3BlobStore
from producers.claimcheck import resolve_claim_check
from producers.evidence import verify_capture
from producers.policy import CapturePolicy
from producers.recorder import CaptureFailure, Recorder
from producers.transports import DeliveryFailed
from producers.transports.kafka.sender import KafkaTransport
from schemas.codec import decode

pytestmark = pytest.mark.kafka


@pytest.fixture
def topic(kafka_bootstrap: str) -> Iterator[str]:
    name = f"test.recorder.{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    for future in admin.create_topics([NewTopic(name, num_partitions=4, replication_factor=1)]).values():
        future.result(30)
    yield name
    for future in admin.delete_topics([name]).values():
        with contextlib.suppress(Exception):
            future.result(30)


def consume(bootstrap: str, topic: str, count: int, *, timeout: float = 60.0) -> list[Any]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"test-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "fetch.message.max.bytes": 2_000_000,
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        messages: list[Any] = []
        deadline = time.monotonic() + timeout
        while len(messages) < count and time.monotonic() < deadline:
            for message in consumer.consume(500, 0.5):
                assert message.error() is None, message.error()
                messages.append(message)
        time.sleep(0.3)
        messages.extend(m for m in consumer.consume(100, 0.2) if m.error() is None)  # nothing extra expected
        return messages
    finally:
        consumer.close()


def kafka_recorder(
    bootstrap: str, topic: str, agent_id: str, failures: list[CaptureFailure], **options: Any
) -> Recorder:
    transport_options = options.pop("transport_options", {})
    rec = Recorder(
        agent_id=agent_id,
        runtime_id="rt_test",
        transport=KafkaTransport(bootstrap=bootstrap, topic=topic, **transport_options),
        signer=options.pop("signer", None) or new_signer(),
        on_error=failures.append,
        **options,
    )
    configure(rec)
    return rec


def test_thousands_of_mixed_size_captures_arrive_verified_and_in_order(
    kafka_bootstrap: str, topic: str
) -> None:
    signer = new_signer()
    failures: list[CaptureFailure] = []
    total = 2_000
    recorders = {
        agent: kafka_recorder(
            kafka_bootstrap,
            topic,
            agent,
            failures,
            signer=signer,
            policy=CapturePolicy(sample_one_in=3),
            queue_size=total,  # this test wants every capture; backpressure is tested elsewhere
            consequential_wait=30,
        )
        for agent in ("agt_a", "agt_b")
    }
    rng = random.Random(42)
    contents = {size: make_content(size, seed=size) for size in (10_000, 20_000, 50_000, 120_000, 200_000)}
    sent: dict[str, list[str]] = {agent: [] for agent in recorders}
    for i in range(total):
        agent = "agt_a" if i % 2 else "agt_b"
        rec = recorders[agent]
        roll = rng.random()
        if roll < 0.4:
            d = record_tiny(rec, consequential=True)
        else:
            d = record(rec, contents[rng.choice(list(contents))], consequential=roll < 0.7)
        sent[agent].append(d.decision_id)
    for rec in recorders.values():
        assert rec.close(60)
    assert failures == []
    assert sum(r.stats.delivered for r in recorders.values()) == total

    messages = consume(kafka_bootstrap, topic, total)
    assert len(messages) == total
    trust = trust_for(signer)
    received: dict[str, list[str]] = {agent: [] for agent in recorders}
    levels: set[str] = set()
    sizes = []
    for message in messages:
        decoded = decode(message.value())
        assert decoded.kind == "capture"
        capture = decoded.value
        assert message.key() == capture["agentId"].encode()
        verify_capture(capture, trust)
        received[capture["agentId"]].append(capture["decisionId"])
        levels.add(capture["captureLevel"])
        sizes.append(len(message.value()))
    assert received == sent  # per-agent order is kept (key = agent id, idempotent producer)
    assert levels == {"full", "sampled", "structured-only"}
    assert min(sizes) < 2_000 and max(sizes) > 150_000


def test_unreachable_broker_reports_every_capture_as_failed(topic: str) -> None:
    failures: list[CaptureFailure] = []
    transport_errors: list[Any] = []
    rec = kafka_recorder(
        "127.0.0.1:1",
        topic,
        "agt_1",
        failures,
        transport_options={"message_timeout_ms": 1_500, "on_error": transport_errors.append},
    )
    ids = [record(rec, make_content(5_000), consequential=True).decision_id for _ in range(5)]
    assert rec.flush(20)  # settled: every capture has an outcome
    stats = rec.stats
    assert (stats.enqueued, stats.delivered, stats.failed, stats.outstanding) == (5, 0, 5, 0)
    assert sorted(f.decision_id for f in failures if f.decision_id) == sorted(ids)
    assert all(f.stage == "delivery" and isinstance(f.error, DeliveryFailed) for f in failures)
    assert {f.error.code for f in failures if isinstance(f.error, DeliveryFailed)} == {"_MSG_TIMED_OUT"}
    assert transport_errors  # the client-level "all brokers down" was visible too
    rec.close(5)


class LateProxy:
    """A loopback port where nothing listens at first (connection refused); ``start()`` makes it
    forward to the broker. Kafka advertises 127.0.0.1:9092 in metadata, so once bootstrapped the
    client talks to the broker directly: this proves buffering until the bootstrap succeeds."""

    def __init__(self, target: tuple[str, int]) -> None:
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self.target = target
        self._server: socket.socket | None = None
        self._stop = threading.Event()

    def start(self) -> None:
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", self.port))
        server.listen(16)
        server.settimeout(0.2)
        self._server = server
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        assert self._server is not None
        while not self._stop.is_set():
            try:
                client, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def stop(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.close()


def test_captures_buffer_until_the_broker_becomes_reachable(kafka_bootstrap: str, topic: str) -> None:
    host, port = kafka_bootstrap.split(",")[0].rsplit(":", 1)
    proxy = LateProxy((host, int(port)))
    failures: list[CaptureFailure] = []
    signer = new_signer()
    rec = kafka_recorder(
        f"127.0.0.1:{proxy.port}",
        topic,
        "agt_1",
        failures,
        signer=signer,
        transport_options={"message_timeout_ms": 60_000, "config": {"reconnect.backoff.max.ms": 500}},
    )
    try:
        ids = [record(rec, make_content(8_000), consequential=True).decision_id for _ in range(20)]
        time.sleep(1.5)
        assert rec.stats.delivered == 0 and rec.stats.failed == 0 and rec.stats.outstanding == 20
        proxy.start()
        assert rec.flush(30)
        assert rec.stats.delivered == 20 and failures == []
    finally:
        rec.close(10)
        proxy.stop()
    messages = consume(kafka_bootstrap, topic, 20)
    trust = trust_for(signer)
    got = []
    for message in messages:
        capture = decode(message.value()).value
        verify_capture(capture, trust)
        got.append(capture["decisionId"])
    assert got == ids


@pytest.mark.minio
def test_two_megabyte_capture_goes_by_claim_check(
    kafka_bootstrap: str, topic: str, minio_config: dict[str, Any]
) -> None:
    store = S3BlobStore(
        minio_config["endpoint"],
        minio_config["access_key"],
        minio_config["secret_key"],
        minio_config["bucket"],
    )
    failures: list[CaptureFailure] = []
    signer = new_signer()
    rec = kafka_recorder(
        kafka_bootstrap, topic, f"agt_{uuid.uuid4().hex[:6]}", failures, signer=signer, blob_store=store
    )
    big = record(rec, make_content(2_600_000), consequential=True)
    assert rec.close(30) and failures == []
    assert rec.stats.claim_checked == 1
    [message] = consume(kafka_bootstrap, topic, 1)
    assert len(message.value()) < 2_000
    event = decode(message.value())
    assert event.kind == "claim_check"
    claim = event.value
    assert claim["decisionId"] == big.decision_id and claim["size"] > 2_000_000
    assert store.exists(claim["blobKey"])
    body = resolve_claim_check(store, claim)  # size and sha256 checked
    capture = decode(body).value
    assert capture["decisionId"] == big.decision_id
    verify_capture(capture, trust_for(signer))
    store.delete(claim["blobKey"])

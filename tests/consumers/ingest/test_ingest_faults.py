"""Faults on the real services, each followed by a Jepsen-style lost-write check: every capture the
producer saw acknowledged is in the index exactly once and reads back from its segment unchanged.

- the consumer SIGKILLed after its segments were written but before the index rows, and after the
  index rows but before the commit (a subprocess with ``BLACKBOX_FAULT``);
- MinIO paused (SIGSTOP) while a batch is in flight: nothing is committed, and after SIGCONT the
  same consumer recovers on its own;
- the broker restarted while a producer and the consumer are running.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ingest_testdata import (
    ROOT,
    assert_exactly_once,
    chdb_index,
    committed_offsets,
    create_topics,
    kafka_s3_settings,
    lag,
    make_capture,
    new_signer,
    produce_raw,
    trust_for,
)

from consumers.ingest.loop import LoopConfig
from consumers.ingest.service import build_service
from producers.blobstore import S3BlobStore
from producers.evidence import Signer, seal
from schemas.codec import encode_capture, normalize_capture

pytestmark = [pytest.mark.kafka, pytest.mark.minio, pytest.mark.slow, pytest.mark.timeout(90)]
PARTITIONS = 3
CAUGHT_UP = dict.fromkeys(range(PARTITIONS), 0)


@pytest.fixture
def topic(kafka_bootstrap: str) -> str:
    name = f"bbtest.fault.{uuid.uuid4().hex[:10]}"
    create_topics(kafka_bootstrap, name, partitions=PARTITIONS)
    create_topics(kafka_bootstrap, f"{name}.dlq", partitions=1)
    return name


@pytest.fixture
def signer() -> Signer:
    return new_signer()


@pytest.fixture
def settings(
    tmp_path: Path, kafka_bootstrap: str, minio_config: dict[str, Any], topic: str, signer: Signer
) -> Any:
    s = kafka_s3_settings(
        tmp_path,
        bootstrap=kafka_bootstrap,
        minio=minio_config,
        topic=topic,
        group=f"g-{uuid.uuid4().hex[:8]}",
    )
    trust_for(signer).save(s.resolved_trust_store)
    return s


def _store(minio: dict[str, Any], **kw: Any) -> S3BlobStore:
    return S3BlobStore(minio["endpoint"], minio["access_key"], minio["secret_key"], minio["bucket"], **kw)


def _produce(
    bootstrap: str, topic: str, signer: Signer, n: int, *, start: int = 0
) -> dict[str, dict[str, Any]]:
    """Produce ``n`` sealed captures (all acknowledged) and return them by decision id."""
    caps = {}
    items = []
    for i in range(start, start + n):
        sealed = seal(make_capture(i, tag="f", size=4000, flagged=i % 5 == 0), signer)
        caps[sealed["decisionId"]] = normalize_capture(sealed)
        items.append((f"agt_{i % 5}".encode(), encode_capture(sealed)))
    produce_raw(bootstrap, topic, items)
    return caps


def _env(settings: Any, fault: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BLACKBOX_")}
    env.update(
        {
            "BLACKBOX_DATA_DIR": str(settings.data_dir),
            "BLACKBOX_TRANSPORT": "kafka",
            "BLACKBOX_KAFKA_BOOTSTRAP": settings.kafka_bootstrap,
            "BLACKBOX_TOPIC": settings.topic,
            "BLACKBOX_DLQ_TOPIC": settings.dlq_topic,
            "BLACKBOX_CONSUMER_GROUP": settings.consumer_group,
            "BLACKBOX_BLOB": "s3",
            "BLACKBOX_S3_ENDPOINT": settings.s3_endpoint,
            "BLACKBOX_S3_ACCESS_KEY": settings.s3_access_key,
            "BLACKBOX_S3_SECRET_KEY": settings.s3_secret_key.get_secret_value(),
            "BLACKBOX_S3_BUCKET": settings.s3_bucket,
            "BLACKBOX_CHDB_PATH": str(settings.chdb_path),
            "BLACKBOX_TRUST_STORE": str(settings.resolved_trust_store),
        }
    )
    if fault:
        env["BLACKBOX_FAULT"] = fault
    return env


def _consume(settings: Any, fault: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "consumers.app.ingest",
            "--drain",
            "--batch-size",
            "10",
            "--max-wait",
            "0.3",
            # the killed member's partitions move to the restarted one after this
            "--kafka-option",
            "session.timeout.ms=6000",
            "--kafka-option",
            "heartbeat.interval.ms=1000",
        ],
        env=_env(settings, fault),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _decisions(settings: Any) -> int:
    with chdb_index(settings.chdb_path, database="blackbox") as index:
        return int(index.query("SELECT count() AS n FROM decisions")[0]["n"])


@pytest.mark.parametrize("fault", ["after_segments", "after_index"])
def test_consumer_sigkill_loses_and_duplicates_nothing(
    settings: Any, signer: Signer, minio_config: dict[str, Any], kafka_bootstrap: str, fault: str
) -> None:
    expected = _produce(kafka_bootstrap, settings.topic, signer, 40)
    killed = _consume(settings, fault)
    assert killed.returncode == -9, killed.stderr[-2000:]
    committed = committed_offsets(kafka_bootstrap, settings.consumer_group, settings.topic, PARTITIONS)
    assert all(o < 0 for o in committed.values()), f"committed before the crash point: {committed}"
    store = _store(minio_config)
    assert any(f"/{settings.topic}/" in k for k in store.list("segments/"))
    written = _decisions(settings)
    assert written == (0 if fault == "after_segments" else 10)

    done = _consume(settings)
    assert done.returncode == 0, done.stderr[-2000:]
    assert lag(kafka_bootstrap, settings.consumer_group, settings.topic, PARTITIONS) == CAUGHT_UP
    with chdb_index(settings.chdb_path, database="blackbox") as index:
        assert_exactly_once(index, store, expected)


def test_minio_paused_mid_batch_commits_nothing_then_recovers(
    settings: Any,
    signer: Signer,
    minio_config: dict[str, Any],
    kafka_bootstrap: str,
    services: Any,
    tmp_path: Path,
) -> None:
    store = _store(minio_config, read_timeout=2.0, connect_timeout=2.0, retries=0)
    topic, group = settings.topic, settings.consumer_group
    expected = _produce(kafka_bootstrap, topic, signer, 20)
    with chdb_index(tmp_path / "chdb-inproc") as index:
        service = build_service(
            settings,
            index=index,
            store=store,
            trust=trust_for(signer),
            loop_config=LoopConfig(batch_size=10, max_wait=0.2, retry_initial=0.5, retry_max=1.0),
        )
        thread = threading.Thread(target=service.run)
        thread.start()
        try:
            _wait(lambda: lag(kafka_bootstrap, group, topic, PARTITIONS) == CAUGHT_UP, 30, "first batches")
            with services.minio_paused():
                expected |= _produce(kafka_bootstrap, topic, signer, 20, start=20)
                _wait(lambda: service.loop.stats.retries >= 2, 30, "a failed PUT")
                stuck = lag(kafka_bootstrap, group, topic, PARTITIONS)
                assert stuck is not None and sum(stuck.values()) == 20, (
                    stuck
                )  # nothing of the in-flight batches was committed
            _wait(lambda: lag(kafka_bootstrap, group, topic, PARTITIONS) == CAUGHT_UP, 40, "recovery")
        finally:
            service.stop()
            thread.join(30)
            service.close()
        assert not thread.is_alive()
        assert_exactly_once(index, _store(minio_config), expected)


def test_broker_restart_mid_stream(
    settings: Any,
    signer: Signer,
    minio_config: dict[str, Any],
    kafka_bootstrap: str,
    services: Any,
    tmp_path: Path,
) -> None:
    from confluent_kafka import Producer

    topic, group = settings.topic, settings.consumer_group
    produced: dict[str, dict[str, Any]] = {}
    acked: dict[str, dict[str, Any]] = {}
    unacked: set[str] = set()
    producer = Producer(
        {
            "bootstrap.servers": kafka_bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "message.timeout.ms": 45_000,
            "logger": logging.getLogger("test.producer"),
        }
    )
    stop_producing = threading.Event()

    def produce() -> None:
        i = 0
        while not stop_producing.is_set():
            sealed = seal(make_capture(i, tag="r", size=2000), signer)
            did = sealed["decisionId"]
            produced[did] = normalize_capture(sealed)

            def delivered(err: Any, _msg: Any, did: str = did) -> None:
                if err is None:
                    acked[did] = produced[did]
                else:
                    unacked.add(did)

            try:
                producer.produce(
                    topic, key=f"agt_{i % 5}".encode(), value=encode_capture(sealed), on_delivery=delivered
                )
            except BufferError:
                producer.poll(0.1)
                continue
            producer.poll(0)
            i += 1
            time.sleep(0.02)
        producer.flush(60)

    with chdb_index(tmp_path / "chdb-inproc") as index:
        service = build_service(
            settings,
            index=index,
            trust=trust_for(signer),
            loop_config=LoopConfig(batch_size=20, max_wait=0.2),
        )
        consumer = threading.Thread(target=service.run)
        writer = threading.Thread(target=produce)
        consumer.start()
        writer.start()
        try:
            _wait(lambda: service.loop.stats.indexed >= 20, 30, "ingest before the restart")
            services.restart_kafka()
            _wait(lambda: len(acked) >= service.loop.stats.indexed + 20, 30, "producing after the restart")
            stop_producing.set()
            writer.join(60)
            _wait(lambda: lag(kafka_bootstrap, group, topic, PARTITIONS) == CAUGHT_UP, 45, "catch up")
        finally:
            stop_producing.set()
            service.stop()
            consumer.join(30)
            service.close()
        assert acked
        rows = {r["decision_id"] for r in index.query("SELECT DISTINCT decision_id FROM decisions")}
        maybe = unacked & rows  # an unacknowledged send may still have landed: allowed, once
        assert_exactly_once(index, _store(minio_config), acked | {d: produced[d] for d in maybe})


def _wait(condition: Any, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {seconds:.0f}s waiting for {what}")
        time.sleep(0.2)


@pytest.fixture(autouse=True)
def _no_env_leak() -> Iterator[None]:
    before = os.environ.get("BLACKBOX_FAULT")
    yield
    assert os.environ.get("BLACKBOX_FAULT") == before

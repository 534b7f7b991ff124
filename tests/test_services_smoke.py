"""The real services answer: one Kafka round trip on a fresh topic, one MinIO put/get."""

from __future__ import annotations

import io
import uuid
from typing import Any

import pytest


@pytest.mark.kafka
def test_kafka_produce_and_consume_one_message(kafka_bootstrap: str) -> None:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"smoke.{uuid.uuid4().hex}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(timeout=30)
    try:
        delivered: list[Any] = []
        producer = Producer({"bootstrap.servers": kafka_bootstrap, "enable.idempotence": True})
        producer.produce(topic, key=b"k", value=b"hello", on_delivery=lambda err, msg: delivered.append(err))
        assert producer.flush(30) == 0
        assert delivered == [None]

        consumer = Consumer(
            {
                "bootstrap.servers": kafka_bootstrap,
                "group.id": f"smoke-{uuid.uuid4().hex}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        try:
            consumer.subscribe([topic])
            msg = None
            for _ in range(60):
                msg = consumer.poll(1.0)
                if msg is not None:
                    break
            assert msg is not None, "no message consumed within 60s"
            assert msg.error() is None
            assert (msg.key(), msg.value()) == (b"k", b"hello")
        finally:
            consumer.close()
    finally:
        admin.delete_topics([topic])[topic].result(timeout=30)


@pytest.mark.kafka
def test_kafka_capture_topics_exist(kafka_bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient

    topics = AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(timeout=10).topics
    assert len(topics["blackbox.captures.v1"].partitions) == 4
    assert len(topics["blackbox.captures.v1.dlq"].partitions) == 1


@pytest.mark.minio
def test_minio_put_and_get_one_object(minio_config: dict[str, Any]) -> None:
    from minio import Minio

    client = Minio(
        minio_config["endpoint"],
        access_key=minio_config["access_key"],
        secret_key=minio_config["secret_key"],
        secure=minio_config["secure"],
    )
    key = f"smoke/{uuid.uuid4().hex}"
    data = b"blackbox smoke \x00\xff"
    client.put_object(minio_config["bucket"], key, io.BytesIO(data), length=len(data))
    try:
        resp = client.get_object(minio_config["bucket"], key)
        try:
            assert resp.read() == data
        finally:
            resp.close()
            resp.release_conn()
        ranged = client.get_object(minio_config["bucket"], key, offset=9, length=5)
        try:
            assert ranged.read() == b"smoke"
        finally:
            ranged.close()
            ranged.release_conn()
    finally:
        client.remove_object(minio_config["bucket"], key)


@pytest.mark.kafka
@pytest.mark.minio
@pytest.mark.slow
def test_fault_helpers_pause_minio_and_restart_kafka(services: Any, kafka_bootstrap: str) -> None:
    import urllib.error
    import urllib.request

    from confluent_kafka.admin import AdminClient

    url = f"http://{services.minio_endpoint}/minio/health/ready"
    with services.minio_paused(), pytest.raises((urllib.error.URLError, TimeoutError)):
        urllib.request.urlopen(url, timeout=1)
    with urllib.request.urlopen(url, timeout=5) as resp:
        assert resp.status == 200

    before = services.kafka_pid_file.read_text()
    services.restart_kafka()
    assert services.kafka_pid_file.read_text() != before
    topics = AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(timeout=10).topics
    assert "blackbox.captures.v1" in topics, "restart must keep the broker's data"


@pytest.mark.kafka
@pytest.mark.minio
def test_status_sh_answers_from_a_shell_without_the_virtual_environment(kafka_bootstrap: str) -> None:
    """status.sh asks Kafka with the Python that up.sh used, not whatever python is on PATH (issue 9,
    item 10: it printed a traceback and called a running broker "not answering")."""
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    out = subprocess.run(
        ["bash", str(root / "deploy" / "local" / "status.sh")],
        env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "kafka: running" in out.stdout and "minio: running" in out.stdout
    assert "Traceback" not in out.stderr

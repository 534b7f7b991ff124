"""The Node SDK delivers to the real Kafka broker (KafkaJS, idempotent, key = agent id), with a claim
check for a capture above the message limit; Python reads, decodes and verifies every message."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from node_sdk import build_package, node

from producers.blobstore import BlobStore, LocalBlobStore, S3BlobStore
from producers.claimcheck import resolve_claim_check
from producers.evidence import TrustStore, load_signer, verify_capture
from schemas.codec import decode

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(240)]
SEED_B64 = (Path(__file__).resolve().parents[1] / "evidence" / "golden" / "test-key.seed").read_text().strip()
COUNT = 20


@pytest.mark.parametrize("blob", ["local", pytest.param("s3", marks=pytest.mark.minio)])
def test_node_captures_through_kafka_verify_in_python(
    kafka_bootstrap: str,
    new_kafka_topic: Callable[..., str],
    tmp_path: Path,
    request: pytest.FixtureRequest,
    blob: str,
) -> None:
    build_package()
    topic = new_kafka_topic("node-sdk", partitions=3)
    env = {
        "BLACKBOX_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "BLACKBOX_TOPIC": topic,
        "BLACKBOX_SIGNING_KEY_B64": SEED_B64,
        "COUNT": str(COUNT),
    }
    store: BlobStore
    if blob == "s3":  # the real MinIO, keys at the bucket's root as the Python store writes them
        minio = request.getfixturevalue("minio_config")
        env |= {
            "BLACKBOX_S3_ENDPOINT": f"http://{minio['endpoint']}",
            "BLACKBOX_S3_BUCKET": minio["bucket"],
            "BLACKBOX_S3_ACCESS_KEY": minio["access_key"],
            "BLACKBOX_S3_SECRET_KEY": minio["secret_key"],
        }
        store = S3BlobStore(minio["endpoint"], minio["access_key"], minio["secret_key"], minio["bucket"])
    else:
        env["BLACKBOX_BLOB_DIR"] = str(tmp_path / "blobs")
        store = LocalBlobStore(tmp_path / "blobs")
    done = node(["dist/examples/kafka-agent.js"], env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    ran = json.loads(done.stdout)
    assert ran["stats"]["delivered"] == COUNT + 1 and ran["stats"]["failed"] == 0

    trust = TrustStore()
    trust.add(load_signer(b64=SEED_B64).public_raw, not_before=datetime(2000, 1, 1, tzinfo=UTC))
    consumer = Consumer(
        {"bootstrap.servers": kafka_bootstrap, "group.id": f"{topic}-check", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    seen: dict[str, dict[str, object]] = {}
    partitions: set[int] = set()
    try:
        deadline = datetime.now(UTC).timestamp() + 60
        while len(seen) < COUNT + 1 and datetime.now(UTC).timestamp() < deadline:
            message = consumer.poll(1.0)
            if message is None or message.error():
                continue
            value, partition = message.value(), message.partition()
            assert message.key() == b"agt_node_kafka" and value is not None and partition is not None
            partitions.add(partition)
            decoded = decode(value)
            if decoded.kind == "claim_check":
                claim = decoded.value
                assert claim["decisionId"] == ran["big"] and claim["size"] > 20_000
                decoded = decode(resolve_claim_check(store, claim))
            capture = decoded.value
            verify_capture(capture, trust)
            seen[capture["decisionId"]] = capture
    finally:
        consumer.close()
    assert sorted(seen) == sorted(ran["ids"])
    assert len(partitions) == 1  # one agent, one key: one partition, in order
    assert seen[ran["big"]]["renderedContext"]["text"].startswith("context line ✓")  # type: ignore[index]

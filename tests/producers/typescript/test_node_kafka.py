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

from producers.blobstore import LocalBlobStore
from producers.claimcheck import resolve_claim_check
from producers.evidence import TrustStore, load_signer, verify_capture
from schemas.codec import decode

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(240)]
SEED_B64 = (Path(__file__).resolve().parents[1] / "evidence" / "golden" / "test-key.seed").read_text().strip()
COUNT = 20


def test_node_captures_through_kafka_verify_in_python(
    kafka_bootstrap: str, new_kafka_topic: Callable[..., str], tmp_path: Path
) -> None:
    build_package()
    topic = new_kafka_topic("node-sdk", partitions=3)
    blobs = tmp_path / "blobs"
    done = node(
        ["dist/examples/kafka-agent.js"],
        env={
            "BLACKBOX_KAFKA_BOOTSTRAP": kafka_bootstrap,
            "BLACKBOX_TOPIC": topic,
            "BLACKBOX_BLOB_DIR": str(blobs),
            "BLACKBOX_SIGNING_KEY_B64": SEED_B64,
            "COUNT": str(COUNT),
        },
        timeout=120,
    )
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
                decoded = decode(resolve_claim_check(LocalBlobStore(blobs), claim))
            capture = decoded.value
            verify_capture(capture, trust)
            seen[capture["decisionId"]] = capture
    finally:
        consumer.close()
    assert sorted(seen) == sorted(ran["ids"])
    assert len(partitions) == 1  # one agent, one key: one partition, in order
    assert seen[ran["big"]]["renderedContext"]["text"].startswith("context line ✓")  # type: ignore[index]

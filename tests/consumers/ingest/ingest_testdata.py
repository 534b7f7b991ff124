"""Shared builders for the ingest tests and benchmark: sealed captures with known ground truth."""

from __future__ import annotations

import copy
import hashlib
import json
import random
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from consumers.index import ChdbIndex, Index
from producers.evidence import Signer, TrustStore, seal
from schemas.codec import encode_capture, encode_event

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = json.loads((ROOT / "schemas" / "examples" / "capture.unsealed.json").read_text(encoding="utf-8"))


def _with_v2_defaults(capture: dict[str, Any]) -> dict[str, Any]:
    """The members capture/v2 and v3 add, at their defaults and in schema order, as decoding yields them."""
    out: dict[str, Any] = {}
    for key, value in capture.items():
        out[key] = value
        if key == "captureLevel":
            out["fidelity"] = "sdk"
        if key == "replayPolicy":
            out["privacy"] = None  # capture/v3: nothing redacted
    trace: dict[str, Any] = {}
    for key, value in capture["executionTrace"].items():
        trace[key] = value
        if key == "toolCalls":
            trace["modelCalls"] = []
    out["executionTrace"] = trace
    return out


EXAMPLE = _with_v2_defaults(EXAMPLE)  # what a capture decodes to since capture/v2 (and v3)
DAY0 = datetime(2026, 7, 20, 9, 0, tzinfo=UTC)

_WORDS = (
    "account",
    "balance",
    "refund",
    "charge",
    "customer",
    "ticket",
    "policy",
    "agent",
    "tool",
    "schema",
    "memory",
    "context",
    "window",
    "ledger",
    "transfer",
    "pending",
    "approved",
    "declined",
    "review",
    "escalate",
    "note",
    "email",
    "invoice",
    "order",
    "shipment",
    "日本語",
    "✓",
    "𝄞",
)

# Content parts compared byte for byte by the tests (paths in the JSON form).
TEXT_PARTS = ("agentConfiguration.systemPromptText", "renderedContext.text", "executionTrace.finalOutputText")
JSON_PARTS = ("input.requestPayload", "agentConfiguration.toolSchemaJson", "executionTrace.reasoningTokens")


def new_signer(name: str = "did:test:ingest") -> Signer:
    return Signer(Ed25519PrivateKey.generate(), name=name)


def trust_for(*signers: Signer) -> TrustStore:
    trust = TrustStore()
    for signer in signers:
        trust.add(signer.public_raw, not_before=datetime(2000, 1, 1, tzinfo=UTC))
    return trust


def _text(rng: random.Random, n: int) -> str:
    out: list[str] = []
    size = 0
    while size < n:
        w = rng.choice(_WORDS)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)


def make_capture(
    i: int,
    *,
    tag: str = "t",
    agent: str = "agt_support_1",
    size: int = 0,
    level: str = "full",
    flagged: bool = False,
    status: str = "success",
    prompt: str = "v4.7",
    model_version: str = "2026-06-01",
    day: int = 0,
    seed: int | None = None,
) -> dict[str, Any]:
    """An unsealed capture in the JSON form; ``size`` pads the final output to roughly that many bytes."""
    rng = random.Random(seed if seed is not None else i)
    c = copy.deepcopy(EXAMPLE)
    c["decisionId"] = f"dec_{tag}_{i:06d}"
    c["agentId"] = agent
    c["capturedAt"] = (
        (DAY0 + timedelta(days=day, seconds=i)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )
    c["captureLevel"] = level
    c["consequential"] = {"flagged": flagged, "reason": "issues refunds" if flagged else None}
    c["outcome"] = {"status": status, "reason": "refund failed" if status == "failure" else None}
    c["agentConfiguration"]["systemPromptVersion"] = prompt
    c["agentConfiguration"]["modelVersion"] = model_version
    c["input"]["requestPayload"]["n"] = i
    c["input"]["requestPayload"]["note"] = _text(rng, 40)
    trace = c["executionTrace"]
    trace["finalOutputText"] = f"Refund #{i}: " + _text(rng, max(0, size - 4300))
    trace["totalLatencyMs"] = 1000 + (i * 37) % 900
    trace["toolCalls"][0]["output"]["balance"] = float(i)
    c["memoryState"]["workingSetEntries"][1]["renderedContent"] = f"Note {i}: " + _text(rng, 60)
    return c


def sealed(capture: Mapping[str, Any], signer: Signer) -> dict[str, Any]:
    return seal(dict(capture), signer)


def encoded(capture: Mapping[str, Any], signer: Signer) -> bytes:
    return encode_capture(seal(dict(capture), signer))


def flag_bytes(
    decision_id: str, signer: Signer | None, *, failure: bool = True, agent: str = "agt_support_1"
) -> bytes:
    from producers.evidence import sign_flag

    value: dict[str, Any] = {
        "decisionId": decision_id,
        "agentId": agent,
        "reason": "customer complaint",
        "flaggedAt": "2026-07-24T10:00:00.000Z",
        "failure": failure,
    }
    if signer is not None:
        value = sign_flag(value, signer)
    return encode_event("flag", value)


def get_path(capture: Mapping[str, Any], path: str) -> Any:
    node: Any = capture
    for part in path.split("."):
        node = node[part]
    return node


def content_bytes(capture: Mapping[str, Any]) -> dict[str, bytes]:
    """Every content part as exact bytes: text parts as UTF-8, JSON parts as order-preserving JSON text."""
    out: dict[str, bytes] = {}
    for path in TEXT_PARTS:
        out[path] = get_path(capture, path).encode("utf-8")
    for path in JSON_PARTS:
        out[path] = json.dumps(get_path(capture, path), ensure_ascii=False).encode("utf-8")
    for n, e in enumerate(capture["memoryState"]["workingSetEntries"]):
        out[f"memory[{n}]"] = e["renderedContent"].encode("utf-8")
    for n, call in enumerate(capture["executionTrace"]["toolCalls"]):
        out[f"toolCalls[{n}].input"] = json.dumps(call["input"], ensure_ascii=False).encode()
        out[f"toolCalls[{n}].output"] = json.dumps(call["output"], ensure_ascii=False).encode()
    for n, ext in enumerate(capture["externalState"]["observableExternals"]):
        out[f"externals[{n}]"] = json.dumps(ext["capturedValue"], ensure_ascii=False).encode()
    return out


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@contextmanager
def chdb_index(path: Path, database: str | None = None) -> Iterator[ChdbIndex]:
    """A fresh database on a chdb path, schema created, closed afterwards (one chdb path per process)."""
    index = ChdbIndex(path, database=database or f"t_{uuid.uuid4().hex[:12]}")
    try:
        index.ensure_schema()
        yield index
    finally:
        index.close()


def current_row(index: Index, decision_id: str) -> dict[str, Any] | None:
    """The current version of one decision (``decisions_current``: FINAL, failure flags folded in)."""
    rows = index.query(
        "SELECT * FROM decisions_current WHERE decision_id = {id:String} LIMIT 1", {"id": decision_id}
    )
    return rows[0] if rows else None


# --- Kafka helpers ------------------------------------------------------------------------------------------


def create_topics(bootstrap: str, *names: str, partitions: int = 3) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(n, num_partitions=partitions, replication_factor=1) for n in names]
    )
    for future in futures.values():
        future.result(30)


def high_watermarks(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{uuid.uuid4().hex[:8]}"})
    try:
        return {
            p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)
        }
    finally:
        c.close()


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return {tp.partition: tp.offset for tp in got}
    finally:
        c.close()


def read_topic(bootstrap: str, topic: str, *, expect: int, timeout: float = 20.0) -> list[Any]:
    """Up to ``expect`` messages from the start of ``topic`` (all partitions)."""
    import time

    from confluent_kafka import Consumer

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
        }
    )
    c.subscribe([topic])
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < expect and time.monotonic() < deadline:
            out.extend(m for m in c.consume(expect - len(out), 1.0) if m.error() is None)
    finally:
        c.close()
    return out


def produce_raw(bootstrap: str, topic: str, items: list[tuple[bytes, bytes]]) -> None:
    """Produce (key, value) pairs and wait until every one is acknowledged."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5})
    errors: list[Any] = []
    for key, value in items:
        p.produce(
            topic, key=key, value=value, on_delivery=lambda err, _m: errors.append(err) if err else None
        )
        p.poll(0)
    assert p.flush(30) == 0 and not errors, errors


def kafka_s3_settings(tmp: Path, *, bootstrap: str, minio: Mapping[str, Any], topic: str, group: str) -> Any:
    from consumers.app.settings import load_service_settings

    return load_service_settings(
        data_dir=tmp / "bb",
        transport="kafka",
        kafka_bootstrap=bootstrap,
        topic=topic,
        dlq_topic=f"{topic}.dlq",
        consumer_group=group,
        blob="s3",
        s3_endpoint=minio["endpoint"],
        s3_access_key=minio["access_key"],
        s3_secret_key=minio["secret_key"],
        s3_bucket=minio["bucket"],
        chdb_path=tmp / "chdb",
        trust_store=tmp / "trust.toml",
    )


def assert_exactly_once(index: Any, store: Any, expected: Mapping[str, Mapping[str, Any]]) -> None:
    """Jepsen-style lost-write check: every expected decision is in ``decisions`` exactly once (raw rows,
    no FINAL), nothing else is, and each reads back from its segment as exactly the expected capture."""
    from consumers.storage.reader import load_capture

    rows = index.query("SELECT decision_id, count() AS n FROM decisions GROUP BY decision_id")
    counts = {r["decision_id"]: r["n"] for r in rows}
    missing = sorted(set(expected) - set(counts))
    extra = sorted(set(counts) - set(expected))
    dupes = sorted(d for d, n in counts.items() if n != 1)
    assert not missing and not extra and not dupes, (
        f"missing={missing[:5]} extra={extra[:5]} dupes={dupes[:5]}"
    )
    for did, capture in expected.items():
        shown = load_capture(did, index=index, store=store)
        assert shown.capture == capture, did


def lag(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int] | None:
    """Per partition, messages not covered by the group's committed offset (an empty partition has 0);
    ``None`` while the broker cannot say (its group coordinator is still loading after a restart)."""
    from confluent_kafka import KafkaException

    try:
        high = high_watermarks(bootstrap, topic, partitions)
        done = committed_offsets(bootstrap, group, topic, partitions)
    except KafkaException:
        return None
    return {p: high[p] - max(done[p], 0) for p in range(partitions)}

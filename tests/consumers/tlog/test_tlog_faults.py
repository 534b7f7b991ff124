"""The log survives a consumer SIGKILL on the real services (Kafka, MinIO): killed after the leaves are
appended but before any checkpoint, and after the tiles but before the leaf rows, a restarted consumer
logs every capture exactly once and signs a checkpoint that ``log verify`` (and the SDK) accepts."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from ingest_testdata import (
    ROOT,
    chdb_index,
    create_topics,
    kafka_s3_settings,
    make_capture,
    new_signer,
    produce_raw,
    trust_for,
)

from consumers.privacy.ids import index_ids
from consumers.tlog import prove
from consumers.tlog.audit import audit
from consumers.tlog.checkpoints import latest, load_log_signer
from producers.blobstore import S3BlobStore
from producers.evidence import seal
from producers.evidence.tlog import capture_leaf, verify_inclusion
from schemas.codec import encode_capture

pytestmark = [pytest.mark.kafka, pytest.mark.minio, pytest.mark.slow, pytest.mark.timeout(120)]


def _env(settings: Any, prefix: str, fault: str | None) -> dict[str, str]:
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
            "BLACKBOX_TLOG_PREFIX": prefix,
            "BLACKBOX_TLOG_CHECKPOINT_INTERVAL": "3600",  # only the end of the drain signs one
        }
    )
    if fault:
        env["BLACKBOX_FAULT"] = fault
    return env


def _consume(settings: Any, prefix: str, fault: str | None = None) -> subprocess.CompletedProcess[str]:
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
            "--kafka-option",
            "session.timeout.ms=6000",
            "--kafka-option",
            "heartbeat.interval.ms=1000",
        ],
        env=_env(settings, prefix, fault),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


@pytest.mark.parametrize("fault", ["after_tlog_append", "after_tlog_tiles"])
def test_tiles_and_checkpoints_survive_a_sigkill_between_append_and_checkpoint(
    tmp_path: Path, kafka_bootstrap: str, minio_config: dict[str, Any], fault: str
) -> None:
    topic = f"bbtest.tlog.{uuid.uuid4().hex[:10]}"
    create_topics(kafka_bootstrap, topic, partitions=2)
    create_topics(kafka_bootstrap, f"{topic}.dlq", partitions=1)
    settings = kafka_s3_settings(
        tmp_path,
        bootstrap=kafka_bootstrap,
        minio=minio_config,
        topic=topic,
        group=f"g-{uuid.uuid4().hex[:8]}",
    )
    signer = new_signer()
    trust_for(signer).save(settings.resolved_trust_store)
    prefix = f"tlog-test/{uuid.uuid4().hex[:12]}"
    captures = [seal(make_capture(i, tag="l", size=2000), signer) for i in range(30)]
    produce_raw(
        kafka_bootstrap, topic, [(f"agt_{i % 3}".encode(), encode_capture(c)) for i, c in enumerate(captures)]
    )

    killed = _consume(settings, prefix, fault)
    assert killed.returncode == -9, killed.stderr[-2000:]
    store = S3BlobStore(
        minio_config["endpoint"],
        minio_config["access_key"],
        minio_config["secret_key"],
        minio_config["bucket"],
    )
    assert any("/tile/" in k for k in store.list(prefix + "/")), "the tiles were written before the kill"
    assert latest(store, prefix) is None, "no checkpoint before the kill"

    done = _consume(settings, prefix)
    assert done.returncode == 0, done.stderr[-2000:]
    key = load_log_signer(settings.data_dir / "tlog.key", settings.tlog_origin, create=False)
    current = latest(store, prefix, key.key)
    assert current is not None and current[1].size == 30
    with chdb_index(settings.chdb_path, database="blackbox") as index:
        rows = index.query("SELECT decision_id, count() AS n FROM tlog_leaves GROUP BY decision_id")
        assert sorted(r["decision_id"] for r in rows) == sorted(c["decisionId"] for c in captures)
        assert all(r["n"] == 1 for r in rows)
        # the index holds origin ids as keyed hashes; the audit unseals the signed manifests with the key
        report = audit(store=store, index=index, prefix=prefix, key=key.key, ids=index_ids(settings))
        assert report.ok and report.leaves == 30, report.findings
        for capture in captures[::7]:
            proof = prove(store, capture["decisionId"], index=index, prefix=prefix)
            assert base64.b64decode(proof["leaf"]) == capture_leaf(capture)
            verify_inclusion(capture_leaf(capture), proof, key.vkey)

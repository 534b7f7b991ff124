"""Immutability where the store offers it, on the real MinIO with a bucket created with object locking:
ingest writes consequential segments under retention until their decisions expire, and the log's tiles
and checkpoints under the configured retention; the store then refuses to delete them."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from ingest_testdata import chdb_index, encoded, make_capture, new_signer, sealed, trust_for
from minio.commonconfig import GOVERNANCE

from consumers.index import ChdbIndex
from consumers.ingest.batch import BatchProcessor
from consumers.tlog.checkpoints import history_key, load_log_signer
from consumers.tlog.log import TransparencyLog
from producers.blobstore import S3BlobStore
from producers.transports.base import SourceMessage
from producers.transports.spool.dead_letter import LocalDeadLetters
from schemas.errors import BlobLocked

pytestmark = pytest.mark.minio

TOPIC = "blackbox.captures.v1"
PREFIX = "tlog/lock"


@pytest.fixture
def index(tmp_path: Path) -> Iterator[ChdbIndex]:
    with chdb_index(tmp_path / "chdb") as idx:
        yield idx


def _retention(store: S3BlobStore, key: str) -> Any:
    return store._client.get_object_retention(store.bucket, key)


def _msgs(values: Sequence[bytes]) -> list[SourceMessage]:
    return [SourceMessage(TOPIC, 0, i, b"agt_support_1", v) for i, v in enumerate(values)]


def test_ingest_locks_consequential_segments_and_log_tiles(
    object_lock_store: S3BlobStore, index: ChdbIndex, tmp_path: Path
) -> None:
    store = object_lock_store
    signer = new_signer()
    log = TransparencyLog(
        store=store,
        index=index,
        signer=load_log_signer(tmp_path / "tlog.key", "blackbox.test/log"),
        prefix=PREFIX,
        lock_path=tmp_path / "tlog.lock",
        interval=3600.0,
        retain_for=timedelta(days=2),
    )
    processor = BatchProcessor(
        store=store,
        index=index,
        trust=trust_for(signer),
        dead_letters=LocalDeadLetters(tmp_path / "dlq"),
        tlog=log,
    )
    captures = [sealed(make_capture(i, size=300, flagged=i < 2), signer) for i in range(4)]
    before = datetime.now(UTC)
    result = processor.process(_msgs([encoded(c, signer) for c in captures]))
    assert result.logged == 4
    assert log.publish() is not None

    rows = {
        r["decision_id"]: r
        for r in index.query(
            "SELECT decision_id, segment_key, retention_class, expires_at FROM decisions FINAL"
        )
    }
    consequential = {r["segment_key"] for r in rows.values() if r["retention_class"] == "consequential"}
    routine = {r["segment_key"] for r in rows.values()} - consequential
    assert len(consequential) == 1 and len(routine) == 1
    [segment] = consequential
    retention = _retention(store, segment)
    expires = max(r["expires_at"] for r in rows.values() if r["segment_key"] == segment)
    assert retention.mode == GOVERNANCE
    assert abs(retention.retain_until_date.timestamp() - expires.replace(tzinfo=UTC).timestamp()) < 1
    with pytest.raises(BlobLocked, match="retained \\(governance\\) until"):
        store.delete(segment)
    assert store.exists(segment)
    [routine_segment] = routine
    assert store.lock_reason(routine_segment) is None  # routine content is compacted after 30 days

    tiles = list(store.list(f"{PREFIX}/tile/"))
    assert tiles and any("/entries/" in t for t in tiles)
    for key in [*tiles, history_key(PREFIX, 4)]:
        until = _retention(store, key).retain_until_date
        assert (
            before + timedelta(days=2) - timedelta(minutes=1) < until < datetime.now(UTC) + timedelta(days=2)
        )
        with pytest.raises(BlobLocked):
            store.delete(key)
        assert store.exists(key)

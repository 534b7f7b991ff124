"""A small retention world: sealed captures packed into real segments, indexed like ingest does.

``world`` runs against a :class:`LocalBlobStore` and, with the ``minio`` marker, a fresh bucket on the
real MinIO. The index is chdb, one database per test, on the process's one chdb path (the path another
module holds open, else a session directory of ours).
Times are in 2030 so the index's TTL backstop (real time) never fires during a test.
"""

from __future__ import annotations

import copy
import hashlib
import json
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from consumers.app.settings import ServiceSettings, load_service_settings
from consumers.index import ChdbIndex, ClickHouseServerIndex, Index, chdb_open_path, decision_rows, flag_row
from consumers.ingest.batch import manifest_json
from consumers.ingest.store import insert_captures, insert_flags
from consumers.retention.clock import FixedClock
from consumers.retention.compaction import Compactor
from consumers.retention.policy import RetentionPolicy, default_policy
from consumers.storage.segments import SegmentWriter, read_capture
from producers.blobstore import BlobStore, LocalBlobStore, S3BlobStore
from producers.evidence import Signer, TrustStore, public_raw, seal
from producers.policy import strip_content
from schemas.codec import decode, encode_capture

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = json.loads((ROOT / "schemas" / "examples" / "capture.unsealed.json").read_text())
T0 = datetime(2030, 1, 1, tzinfo=UTC)
TOPIC = "blackbox.captures.v1"


def ts(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


@pytest.fixture(scope="session")
def own_chdb_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("retention-chdb")


@pytest.fixture
def chdb_dir(own_chdb_dir: Path) -> Path:
    """The process's one chdb path: the one another test module holds open, else ours."""
    return Path(chdb_open_path() or own_chdb_dir)


@pytest.fixture(params=["chdb", "connect"])
def index(request: pytest.FixtureRequest, chdb_dir: Path) -> Iterator[Index]:
    """chdb, and ClickHouseServerIndex's code path (clickhouse-connect, server-side parameter binding)
    over clickhouse-connect's in-process chdb backend: the SQL a ClickHouse server would run."""
    database = f"ret_{uuid.uuid4().hex[:12]}"
    idx: Index
    if request.param == "chdb":
        idx = ChdbIndex(chdb_dir, database=database)
    else:
        idx = ClickHouseServerIndex(f"chdb://{chdb_dir}", database=database)
    idx.ensure_schema()
    try:
        yield idx
    finally:
        try:
            idx.command(f"DROP DATABASE IF EXISTS {idx.database}")
        finally:
            idx.close()


@pytest.fixture(scope="session")
def signer() -> Signer:
    return Signer(Ed25519PrivateKey.generate())


@pytest.fixture(scope="session")
def trust(signer: Signer) -> TrustStore:
    store = TrustStore()
    store.add(public_raw(signer.public_key), not_before=datetime(2020, 1, 1, tzinfo=UTC))
    return store


def _minio_store(cfg: dict[str, Any]) -> Iterator[BlobStore]:
    bucket = f"bb-retention-{uuid.uuid4().hex[:10]}"
    store = S3BlobStore(cfg["endpoint"], cfg["access_key"], cfg["secret_key"], bucket, cfg["secure"])
    try:
        yield store
    finally:
        from minio import Minio

        client = Minio(
            cfg["endpoint"], access_key=cfg["access_key"], secret_key=cfg["secret_key"], secure=False
        )
        if client.bucket_exists(bucket):
            for obj in client.list_objects(bucket, recursive=True):
                if obj.object_name:
                    client.remove_object(bucket, obj.object_name)
            client.remove_bucket(bucket)


@pytest.fixture(params=["local", pytest.param("minio", marks=pytest.mark.minio)])
def blob_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BlobStore]:
    if request.param == "local":
        yield LocalBlobStore(tmp_path / "blobs")
        return
    cfg = request.getfixturevalue("minio_config")
    yield from _minio_store(cfg)


@pytest.fixture
def local_store(tmp_path: Path) -> BlobStore:
    return LocalBlobStore(tmp_path / "blobs")


def make_capture(
    signer: Signer,
    decision_id: str,
    captured_at: datetime,
    *,
    consequential: bool = False,
    level: str = "full",
    retention_days: int | None = 365,
) -> dict[str, Any]:
    """The example capture, re-identified and sealed; structured-only ones have their content stripped."""
    capture = copy.deepcopy(EXAMPLE)
    capture["decisionId"] = decision_id
    capture["capturedAt"] = ts(captured_at)
    capture["captureLevel"] = level
    capture["consequential"] = {
        "flagged": consequential,
        "reason": "issues refunds" if consequential else None,
    }
    if retention_days is None:
        capture["replayPolicy"].pop("retentionDays", None)
    else:
        capture["replayPolicy"]["retentionDays"] = retention_days
    sealed = seal(capture, signer)
    return strip_content(sealed) if level == "structured-only" else sealed


@dataclass
class World:
    """Captures in segments and rows in the index, as ingest leaves them; plus helpers to look."""

    index: Index
    store: BlobStore
    signer: Signer
    trust: TrustStore
    tmp: Path
    clock: FixedClock
    policy: RetentionPolicy = field(default_factory=default_policy)
    segments: dict[str, str] = field(default_factory=dict)
    sha: dict[str, str] = field(default_factory=dict)
    _offset: int = 0

    @property
    def log_path(self) -> Path:
        return self.tmp / "data" / "retention" / "deletions.jsonl"

    @property
    def settings(self) -> ServiceSettings:
        return load_service_settings(data_dir=self.tmp / "data")

    def compactor(
        self, *, hook: Callable[[str], None] | None = None, policy: RetentionPolicy | None = None
    ) -> Compactor:
        return Compactor(
            index=self.index,
            store=self.store,
            policy=policy or self.policy,
            log_path=self.log_path,
            clock=self.clock,
            hook=hook,
        )

    def ingest(self, captures: Sequence[dict[str, Any]], *, partition: int = 0) -> list[str]:
        """Pack captures into one segment per retention class and index them (version-0 rows)."""
        groups: dict[str, list[dict[str, Any]]] = {}
        for c in captures:
            groups.setdefault(self.policy.retention_class(c), []).append(c)
        keys: list[str] = []
        rows = []
        for cls, items in groups.items():
            writer = SegmentWriter(
                retention_class=cls, topic=TOPIC, partition=partition, first_offset=self._offset
            )
            datas = [encode_capture(c) for c in items]
            for data in datas:
                writer.append(data)
            self._offset += len(items)
            key, body = writer.finish()
            self.store.put(key, body)
            keys.append(key)
            for c, data, loc in zip(items, datas, writer.locations(), strict=True):
                sha = "sha256:" + hashlib.sha256(data).hexdigest()
                self.sha[c["decisionId"]] = sha
                self.segments[c["decisionId"]] = key
                decision = self.policy.decide(c)
                rows.append(
                    decision_rows(
                        c,
                        segment_key=key,
                        segment_offset=loc.offset,
                        segment_length=loc.length,
                        capture_bytes=len(data),
                        content_sha256=sha,
                        manifest_json=manifest_json(c),
                        key_id=signer_key_id(self.signer),
                        source=f"{TOPIC}/{partition}/{self._offset}",
                        ingested_at=c_time(c),
                        retention_class=decision.retention_class,
                        retention_days=decision.retention_days,
                        expires_at=decision.expires_at,
                    )
                )
        insert_captures(self.index, rows)
        return keys

    def flag(
        self, decision_id: str, at: datetime, reason: str = "customer complaint", failure: bool = True
    ) -> None:
        row = self.row(decision_id)
        event = {
            "decisionId": decision_id,
            "agentId": row["agent_id"],
            "reason": reason,
            "flaggedAt": ts(at),
            "failure": failure,
        }
        insert_flags(self.index, [flag_row(event, received_at=at)])

    def row(self, decision_id: str) -> dict[str, Any]:
        rows = self.index.query(
            "SELECT * FROM decisions FINAL WHERE decision_id = {id:String}", {"id": decision_id}
        )
        assert rows, decision_id
        return rows[0]

    def read_bytes(self, decision_id: str) -> bytes:
        row = self.row(decision_id)
        return read_capture(self.store, row["segment_key"], row["segment_offset"], row["segment_length"])

    def read(self, decision_id: str) -> dict[str, Any]:
        """The capture as stored in its (current) segment."""
        row = self.row(decision_id)
        data = read_capture(self.store, row["segment_key"], row["segment_offset"], row["segment_length"])
        assert "sha256:" + hashlib.sha256(data).hexdigest() == row["content_sha256"]
        return decode(data).value

    def snapshot(self) -> list[tuple[Any, ...]]:
        cols = (
            "decision_id, content_state, segment_key, segment_offset, segment_length, retention_class, "
            "consequential, legal_hold, hold_reason, expires_at, retention_days, manifest_json != '' AS has_manifest"
        )
        return [
            tuple(r.values())
            for r in self.index.query(f"SELECT {cols} FROM decisions FINAL ORDER BY decision_id")
        ]

    def blobs(self) -> dict[str, bytes]:
        return {key: self.store.get(key) for key in self.store.list("segments/")}

    def deletions(self) -> list[dict[str, Any]]:
        return self.index.query("SELECT * FROM deletions FINAL ORDER BY segment_key, decision_id, action")


def signer_key_id(signer: Signer) -> str:
    return signer.key_id


def c_time(capture: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(capture["capturedAt"])


@pytest.fixture
def make_world(
    index: Index, signer: Signer, trust: TrustStore, tmp_path: Path
) -> Callable[[BlobStore], World]:
    def build(store: BlobStore) -> World:
        return World(index=index, store=store, signer=signer, trust=trust, tmp=tmp_path, clock=FixedClock(T0))

    return build


def standard_captures(signer: Signer) -> dict[str, dict[str, Any]]:
    """The cast of the main scenario, captured within the first hour of T0."""
    m = timedelta(minutes=1)
    spec: dict[str, dict[str, Any]] = {
        "dec_routine_1": {"at": T0 + 1 * m},
        "dec_routine_2": {"at": T0 + 2 * m},
        "dec_promoted": {"at": T0 + 3 * m},
        "dec_held": {"at": T0 + 4 * m},
        "dec_late_flag": {"at": T0 + 5 * m},
        "dec_sampled": {"at": T0 + 6 * m, "level": "sampled"},
        "dec_conseq_1": {"at": T0 + 7 * m, "consequential": True},
        "dec_conseq_2": {"at": T0 + 8 * m, "consequential": True},
        "dec_structured": {"at": T0 + 9 * m, "level": "structured-only"},
    }
    return {
        did: make_capture(
            signer, did, s["at"], consequential=s.get("consequential", False), level=s.get("level", "full")
        )
        for did, s in spec.items()
    }

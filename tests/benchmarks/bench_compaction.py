"""Benchmark: compaction of 100,000 decisions (target < 60 s on the 2-core machines).

Not collected by pytest (file name). Run::

    python tests/benchmarks/bench_compaction.py [--decisions 100000] [--per-segment 500] [--minio]

World: one sealed example capture, re-identified per decision (same frame bytes, so the copy check
is real), packed 500 per segment; mix: 93 % routine full/sampled/structured (due), 5 % consequential
(not due), 1 % promoted by a flag in time, 0.1 % under legal hold, the rest flagged too late. The
policy is evaluated at T0 + 31 days.

Measured side by side in the same run with a *floor*: the unavoidable work of the same compaction
done as bluntly as possible - one ``INSERT ... SELECT`` flipping every due row to metadata-only and one
DELETE per due segment - so the ratio says how much the plan, the copies, the write-ahead log and the
checks cost on top.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import shutil
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from consumers.index import ChdbIndex, decision_rows
from consumers.ingest.batch import manifest_json
from consumers.retention.clock import FixedClock
from consumers.retention.compaction import Compactor
from consumers.retention.policy import default_policy
from consumers.storage.segments import SegmentWriter
from producers.blobstore import BlobStore, LocalBlobStore, S3BlobStore
from producers.evidence import Signer, seal
from schemas.codec import encode_capture

T0 = datetime(2030, 1, 1, tzinfo=UTC)
TOPIC = "blackbox.captures.v1"


def _template() -> tuple[dict[str, Any], bytes, dict[str, Any]]:
    capture = json.loads((ROOT / "schemas" / "examples" / "capture.unsealed.json").read_text())
    capture["capturedAt"] = "2030-01-01T00:00:00.000Z"
    capture["consequential"] = {"flagged": False, "reason": None}
    sealed = seal(capture, Signer(Ed25519PrivateKey.generate()))
    data = encode_capture(sealed)
    row = decision_rows(sealed, manifest_json=manifest_json(sealed)).decision
    return sealed, data, row


def build(index: ChdbIndex, store: BlobStore, *, decisions: int, per_segment: int) -> dict[str, int]:
    """Segments in the store, rows in the index, flags and holds; returns the mix."""
    _sealed, data, template = _template()
    sha = "sha256:" + hashlib.sha256(data).hexdigest()
    conseq_manifest = copy.deepcopy(json.loads(template["manifest_json"]))
    conseq_manifest["consequential"] = {"flagged": True, "reason": "bench"}
    conseq_manifest_json = json.dumps(conseq_manifest, separators=(",", ":"))
    policy = default_policy()
    mix = {
        "routine": 0,
        "sampled": 0,
        "structured": 0,
        "consequential": 0,
        "promoted": 0,
        "held": 0,
        "late_flag": 0,
    }
    columns: dict[str, list[Any]] = {name: [] for name in template}
    flags: dict[str, list[Any]] = {
        k: [] for k in ("decision_id", "agent_id", "reason", "failure", "flagged_at", "received_at")
    }
    held: list[str] = []

    def flush() -> None:
        if columns["decision_id"]:
            index.insert("decisions", columns)
            for values in columns.values():
                values.clear()

    n_segments = (decisions + per_segment - 1) // per_segment
    made = 0
    for seg_no in range(n_segments):
        size = min(per_segment, decisions - made)
        cls = "consequential" if seg_no % 20 == 19 else ("structured" if seg_no % 10 == 3 else "routine")
        writer = SegmentWriter(retention_class=cls, topic=TOPIC, partition=seg_no % 4, first_offset=made)
        for _ in range(size):
            writer.append(data)
        key, body = writer.finish()
        store.put(key, body)
        for i, loc in enumerate(writer.locations()):
            n = made + i
            did = f"dec_{n:08d}"
            at = T0 + timedelta(milliseconds=100 * n)
            level = "structured-only" if cls == "structured" else ("sampled" if n % 7 == 0 else "full")
            conseq = cls == "consequential"
            facts = {
                "captured_at": at,
                "capture_level": level,
                "consequential": conseq,
                "capture_retention_days": 365,
            }
            d = policy.decide(facts)
            row = dict(template)
            row.update(
                decision_id=did,
                captured_at=at,
                capture_level=level,
                content_state="structured-only" if level == "structured-only" else "full",
                consequential=conseq,
                manifest_json=conseq_manifest_json if conseq else template["manifest_json"],
                retention_class=d.retention_class,
                retention_days=d.retention_days,
                expires_at=d.expires_at,
                segment_key=key,
                segment_offset=loc.offset,
                segment_length=loc.length,
                capture_bytes=len(data),
                content_sha256=sha,
                ingested_at=at,
            )
            if conseq:
                mix["consequential"] += 1
            elif n % 100 == 1:
                flags["decision_id"].append(did)
                flags["flagged_at"].append(at + timedelta(days=3))
                mix["promoted"] += 1
            elif n % 1000 == 2:
                held.append(did)
                row.update(legal_hold=True, hold_reason="bench hold", version=1)
                mix["held"] += 1
            elif n % 100 == 5:
                flags["decision_id"].append(did)
                flags["flagged_at"].append(at + timedelta(days=45))
                mix["late_flag"] += 1
            else:
                mix[
                    "structured" if cls == "structured" else ("sampled" if level == "sampled" else "routine")
                ] += 1
            for name, value in row.items():
                columns[name].append(value)
        made += size
        if len(columns["decision_id"]) >= 10_000:
            flush()
    flush()
    count = len(flags["decision_id"])
    flags["agent_id"] = [template["agent_id"]] * count
    flags["reason"] = ["bench flag"] * count
    flags["failure"] = [True] * count
    flags["received_at"] = list(flags["flagged_at"])
    index.insert("flags", flags)
    mix["segments"] = n_segments
    return mix


def floor(index: ChdbIndex, store: BlobStore, *, as_of: datetime) -> float:
    """The blunt minimum: flip every due row in one statement, delete every due segment."""
    started = time.perf_counter()
    keys = [
        r["segment_key"]
        for r in index.query(
            "SELECT DISTINCT segment_key FROM decisions FINAL WHERE segment_key != '' "
            "AND retention_class != 'consequential' AND captured_at <= {cut:DateTime64(3, 'UTC')}",
            {"cut": as_of - timedelta(days=30)},
        )
    ]
    index.command(
        "INSERT INTO decisions SELECT * REPLACE ('metadata-only' AS content_state, '' AS segment_key, "
        "toUInt64(0) AS segment_offset, toUInt64(0) AS segment_length, toUInt64(9) AS version) FROM "
        "(SELECT * FROM decisions FINAL WHERE segment_key IN {keys:Array(String)})",
        {"keys": keys},
    )
    for key in keys:
        store.delete(key)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=100_000)
    parser.add_argument("--per-segment", type=int, default=500)
    parser.add_argument("--minio", action="store_true", help="use the real MinIO at 127.0.0.1:9000")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-compaction-"))
    index = ChdbIndex(tmp / "index", database="bench")
    index.ensure_schema()
    floor_index = ChdbIndex(tmp / "index", database="bench_floor")
    floor_index.ensure_schema()

    def new_store(name: str) -> BlobStore:
        if args.minio:
            return S3BlobStore(
                "127.0.0.1:9000", "blackbox", "blackbox-secret", f"bench-{name}-{uuid.uuid4().hex[:8]}"
            )
        return LocalBlobStore(tmp / f"blobs-{name}")

    store, floor_store = new_store("run"), new_store("floor")
    as_of = T0 + timedelta(days=31)
    results: dict[str, Any] = {
        "decisions": args.decisions,
        "per_segment": args.per_segment,
        "store": repr(store),
    }

    t = time.perf_counter()
    results["mix"] = build(index, store, decisions=args.decisions, per_segment=args.per_segment)
    build(floor_index, floor_store, decisions=args.decisions, per_segment=args.per_segment)
    results["build_seconds"] = round(time.perf_counter() - t, 2)

    compactor = Compactor(
        index=index,
        store=store,
        policy=default_policy(),
        log_path=tmp / "retention" / "deletions.jsonl",
        clock=FixedClock(as_of),
    )
    t = time.perf_counter()
    plan = compactor.plan()
    results["plan_seconds"] = round(time.perf_counter() - t, 2)

    t = time.perf_counter()
    result = compactor.run()
    results["compaction_seconds"] = round(time.perf_counter() - t, 2)
    results["result"] = result.summary()
    results["planned_decisions"] = plan.decisions

    t = time.perf_counter()
    again = compactor.run()
    results["second_run_seconds"] = round(time.perf_counter() - t, 2)
    results["second_run_changed"] = again.changed

    results["floor_seconds"] = round(floor(floor_index, floor_store, as_of=as_of), 2)
    results["ratio_to_floor"] = round(results["compaction_seconds"] / max(results["floor_seconds"], 1e-9), 2)
    results["target_met"] = results["compaction_seconds"] < 60
    print(json.dumps(results, indent=2))
    index.close()
    floor_index.close()
    for used in (store, floor_store):
        if isinstance(used, S3BlobStore):
            _drop_bucket(used.bucket)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0 if results["target_met"] else 1


def _drop_bucket(bucket: str) -> None:
    from minio import Minio

    client = Minio("127.0.0.1:9000", access_key="blackbox", secret_key="blackbox-secret", secure=False)
    for obj in client.list_objects(bucket, recursive=True):
        if obj.object_name:
            client.remove_object(bucket, obj.object_name)
    client.remove_bucket(bucket)


if __name__ == "__main__":
    raise SystemExit(main())

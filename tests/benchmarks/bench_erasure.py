"""Benchmark: erasure of one subject with 10,000 decisions (``blackbox erase --subject``).

Not collected by pytest (file name). Run::

    python tests/benchmarks/bench_erasure.py [--decisions 10000] [--others 1000] [--minio]

World: an embedded (chdb) index in a temporary directory holding ``--decisions`` decisions of one
subject (its origin id stored as a keyed hash, as ingest writes it) and ``--others`` of other subjects,
1 in 1,000 of the subject's under legal hold; one wrapped data key per decision in the blob store
(local files, or MinIO on 127.0.0.1:9000 with ``--minio``, access ``blackbox`` / ``blackbox-secret``).

Timed: what the command does after opening the runtime - find the subject's decisions through the
keyed hash, then erase them: hold check, the ``erase`` entries written ahead to the retention log
(JSONL file, fsync'd, and the ``deletions`` table), every data key replaced by its tombstone, the
``erased`` entries. Then the same erasure again (every key already gone: the idempotent rerun).
Checked afterwards: every unheld key is a tombstone, held ones are intact, the log has one ``erase``
and one ``erased`` entry per erased decision.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from consumers.index import ChdbIndex, decision_rows, insert_rows
from consumers.privacy.ids import IndexIds
from consumers.retention.erasure import Eraser
from consumers.retention.log import DeletionLog, read_jsonl
from producers.blobstore import BlobStore, LocalBlobStore, S3BlobStore
from producers.privacy.keys import DataKeyRecord, DataKeyStore

SUBJECT = "cus_bench_subject"
HOLD_EVERY = 1000


def _template() -> dict[str, Any]:
    capture = json.loads((ROOT / "schemas" / "examples" / "capture.unsealed.json").read_text())
    return decision_rows(capture).decision


def _world(index: ChdbIndex, keys: DataKeyStore, ids: IndexIds, *, decisions: int, others: int) -> set[str]:
    """Index rows and key records; returns the subject's held decision ids."""
    template = _template()
    rows, held = [], set()
    for n in range(decisions + others):
        mine = n < decisions
        did = f"dec_{n:08d}"
        row = dict(template, decision_id=did, origin_user_id=ids.of(SUBJECT if mine else f"cus_{n}"))
        if mine and n % HOLD_EVERY == 0:
            row.update(legal_hold=True, hold_reason="bench hold")
            held.add(did)
        rows.append(row)
    for i in range(0, len(rows), 5000):
        insert_rows(index, "decisions", rows[i : i + 5000])
    wrapped = b"\x00" * 60  # the records' shape; nobody unwraps them here
    for row in rows:
        keys.put(DataKeyRecord(decision_id=row["decision_id"], kek_id="local:bench", wrapped=wrapped))
    return held


def _store(minio: bool, root: Path) -> BlobStore:
    if not minio:
        return LocalBlobStore(root / "blobs")
    bucket = f"bench-erasure-{uuid.uuid4().hex[:8]}"
    return S3BlobStore(
        endpoint="127.0.0.1:9000",
        access_key="blackbox",
        secret_key="blackbox-secret",
        bucket=bucket,
        secure=False,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--decisions", type=int, default=10_000)
    parser.add_argument("--others", type=int, default=1_000)
    parser.add_argument("--minio", action="store_true")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="bench-erasure-"))
    index = ChdbIndex(root / "chdb", database="blackbox")
    try:
        index.ensure_schema()
        store = _store(args.minio, root)
        keys = DataKeyStore(store)
        ids = IndexIds(b"k" * 32)
        built = time.perf_counter()
        held = _world(index, keys, ids, decisions=args.decisions, others=args.others)
        print(f"world: {args.decisions} + {args.others} decisions in {time.perf_counter() - built:.1f} s")
        log_path = root / "retention" / "deletions.jsonl"
        eraser = Eraser(index=index, keys=keys, log=DeletionLog(index, log_path), ids=ids)

        start = time.perf_counter()
        found = eraser.decisions_of(SUBJECT)
        looked = time.perf_counter()
        results = eraser.erase(found, reason="GDPR Art. 17, bench")
        done = time.perf_counter()
        again = eraser.erase(found, reason="GDPR Art. 17, bench")
        rerun = time.perf_counter()

        erased = [r.decision_id for r in results if r.outcome == "erased"]
        assert len(found) == args.decisions, len(found)
        assert {r.decision_id for r in results if r.outcome == "held"} == held
        assert len(erased) == args.decisions - len(held)
        assert all(r.outcome in ("already erased", "held") for r in again)
        for did in (erased[0], erased[-1]):
            record = keys.get(did)
            assert record is not None and record.erased, did
        for did in held:
            record = keys.get(did)
            assert record is not None and not record.erased, did
        log = read_jsonl(log_path)
        assert sorted(e["action"] for e in log) == ["erase"] * len(erased) + ["erased"] * len(erased)
        rows = index.query("SELECT count() AS n FROM deletions WHERE policy = 'erasure'")
        assert rows[0]["n"] == 2 * len(erased), rows

        total = done - start
        store_name = "MinIO" if args.minio else "local"
        print(f"erasure of {args.decisions} decisions of one subject (index chdb, blobs {store_name}):")
        print(f"  lookup {looked - start:.2f} s, erase {done - looked:.2f} s, total {total:.2f} s")
        print(f"  {len(found) / total:,.0f} decisions/s ({len(erased)} erased, {len(held)} held)")
        print(f"  rerun (idempotent, nothing left to erase): {rerun - done:.2f} s")
    finally:
        index.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

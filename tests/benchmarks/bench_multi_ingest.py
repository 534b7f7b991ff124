"""Ingest on many hosts, one log (DESIGN 23): the writer's rate on MinIO and ingest with 1, 2 and 3 processes.

    python tests/benchmarks/bench_multi_ingest.py [--n 6000] [--size 2000] [--procs 1,2,3] [--leaves 60000]

Not collected by pytest. Needs Kafka and MinIO (``bash deploy/local/up.sh``). In one run:

1. **writer**: leaves per second through the fenced writer on MinIO, as ingest drives it - hold the lease
   (compare-and-swap), stage, swap, write the tiles once, release - at batches of 500 and 2,000, bare
   (:class:`LogWriter`) and through :meth:`TransparencyLog.append` with its chdb rows and redelivery
   check. Baseline (published, not this run): Tessera POSIX ~2,900/s on HDD, Sunlight ~3,750/s; target
   >= 5,000/s.
2. **ingest with K processes** (K in ``--procs``), each with its own data directory, one consumer group on
   a 6-partition topic, one log: captures per second from the first produce to the log holding them
   all, side by side with K = 1 (target >= 0.8 x K x one process's rate, up to the cores available);
   and the time from a leaf's integration (its batch commits right after) to the first public checkpoint
   that includes it (target <= 10 s, checkpoint interval ``--interval``).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "consumers" / "ingest"))
sys.path.insert(0, str(ROOT / "tests" / "benchmarks"))

from bench_ingest import BOOTSTRAP, MINIO, build_corpus
from ingest_testdata import chdb_index, create_topics, produce_raw, trust_for

from consumers.tlog.checkpoints import checkpoint_key, load_log_signer
from consumers.tlog.log import Entry, TransparencyLog
from consumers.tlog.state import StateStore
from consumers.tlog.writer import LogWriter
from producers.blobstore import S3BlobStore
from producers.evidence.tlog import leaf_bytes

PREFIX_ROOT = "bench-multi"


def _store() -> S3BlobStore:
    return S3BlobStore(MINIO["endpoint"], MINIO["access_key"], MINIO["secret_key"], MINIO["bucket"])


def _leaves(n: int, tag: str) -> list[bytes]:
    now = datetime.now(UTC).isoformat()
    return [
        leaf_bytes(decision_id=f"{tag}-{i:08d}", captured_at=now, envelope_hash="sha256:" + "ab" * 32)
        for i in range(n)
    ]


def bench_writer(leaves: int, batch: int, tmp: Path) -> dict[str, float]:
    store = _store()
    signer = load_log_signer(tmp / "tlog.key", "bench.example/log")
    bare = LogWriter(
        store=store, prefix=f"{PREFIX_ROOT}/{uuid.uuid4().hex[:10]}", signer=signer, writer="bench"
    )
    data = _leaves(leaves, "w")
    t0 = time.perf_counter()
    for start in range(0, leaves, batch):
        bare.hold()
        bare.integrate(data[start : start + batch])
        bare.release()
    bare_rate = leaves / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    bare.hold()
    bare.publish()
    publish_s = time.perf_counter() - t0
    bare.release()

    now = datetime.now(UTC)
    with chdb_index(tmp / "chdb") as index:
        log = TransparencyLog(
            store=store,
            index=index,
            signer=signer,
            prefix=f"{PREFIX_ROOT}/{uuid.uuid4().hex[:10]}",
            lock_path=tmp / f"tlog-{batch}.lock",
            interval=3600.0,
        )
        entries = [Entry(f"a-{i:08d}", now, leaf) for i, leaf in enumerate(_leaves(leaves, "a"))]
        t0 = time.perf_counter()
        for start in range(0, leaves, batch):
            log.append(entries[start : start + batch])
        append_rate = leaves / (time.perf_counter() - t0)
    return {"bare": bare_rate, "append": append_rate, "publish_s": publish_s}


def _env(host: Path, *, topic: str, group: str, prefix: str, interval: float) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BLACKBOX_")}
    env.update(
        {
            "PYTHONPATH": str(ROOT),
            "BLACKBOX_DATA_DIR": str(host),
            "BLACKBOX_TRANSPORT": "kafka",
            "BLACKBOX_KAFKA_BOOTSTRAP": BOOTSTRAP,
            "BLACKBOX_TOPIC": topic,
            "BLACKBOX_DLQ_TOPIC": f"{topic}.dlq",
            "BLACKBOX_CONSUMER_GROUP": group,
            "BLACKBOX_BLOB": "s3",
            "BLACKBOX_S3_ENDPOINT": MINIO["endpoint"],
            "BLACKBOX_S3_ACCESS_KEY": MINIO["access_key"],
            "BLACKBOX_S3_SECRET_KEY": MINIO["secret_key"],
            "BLACKBOX_S3_BUCKET": MINIO["bucket"],
            "BLACKBOX_TRUST_STORE": str(host.parent / "trust.toml"),
            "BLACKBOX_TLOG_KEY": str(host.parent / "tlog.key"),
            "BLACKBOX_TLOG_PREFIX": prefix,
            "BLACKBOX_TLOG_CHECKPOINT_INTERVAL": str(interval),
        }
    )
    return env


def bench_ingest(k: int, values: list[bytes], signer: Any, tmp: Path, *, interval: float) -> dict[str, float]:
    """K ingest processes on one group and one log; rate and leaf-to-checkpoint latency."""
    run = tmp / f"k{k}"
    run.mkdir()
    trust_for(signer).save(run / "trust.toml")
    topic = f"bench.multi.{uuid.uuid4().hex[:8]}"
    create_topics(BOOTSTRAP, topic, partitions=6)
    create_topics(BOOTSTRAP, f"{topic}.dlq", partitions=1)
    group, prefix = f"g-{uuid.uuid4().hex[:8]}", f"{PREFIX_ROOT}/{uuid.uuid4().hex[:10]}"
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "consumers.app.ingest", "--batch-size", "500", "--max-wait", "0.2"],
            env=_env(run / f"host-{i}", topic=topic, group=group, prefix=prefix, interval=interval),
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=(run / f"ingest-{i}.log").open("wb"),
        )
        for i in range(k)
    ]
    store = _store()
    states = StateStore(store, prefix)
    n = len(values)
    integrated: dict[int, float] = {}  # size -> when the state first reached it
    signed: dict[int, float] = {}  # size -> when the public checkpoint first reached it
    try:
        time.sleep(12.0)  # every process started and joined the group
        t0 = time.perf_counter()
        produce_raw(BOOTSTRAP, topic, [(f"agt_{i % 24}".encode(), v) for i, v in enumerate(values)])
        deadline = t0 + 600
        done_at = None
        while time.perf_counter() < deadline:
            now = time.perf_counter()
            size = states.read()[0].size
            integrated.setdefault(size, now)
            try:
                note = store.get(checkpoint_key(prefix))
                signed.setdefault(int(note.split(b"\n")[1]), now)
            except Exception:
                pass
            if size >= n and done_at is None:
                done_at = now
            if done_at is not None and max(signed, default=0) >= n:
                break
            time.sleep(0.05)
        if done_at is None:
            raise SystemExit(f"K={k}: the log did not reach {n} leaves in time; see {run}/ingest-*.log")
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
    latencies = []
    for size, at in integrated.items():
        if size == 0:
            continue
        first = min((t for s, t in signed.items() if s >= size), default=None)
        if first is not None:
            latencies.append(max(0.0, first - at))
    return {
        "rate": n / (done_at - t0),
        "lat_p50": statistics.median(latencies) if latencies else float("nan"),
        "lat_max": max(latencies) if latencies else float("nan"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=6000, help="captures per ingest run")
    parser.add_argument("--size", type=int, default=2000, help="content bytes per capture")
    parser.add_argument("--procs", default="1,2,3", help="process counts to run, comma-separated")
    parser.add_argument("--leaves", type=int, default=60_000, help="leaves through the bare writer")
    parser.add_argument("--interval", type=float, default=5.0, help="checkpoint interval (s)")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory(prefix="bench-multi-") as d:
        tmp = Path(d)
        print(
            f"writer on MinIO ({args.leaves} leaves; target >= 5,000/s; Tessera ~2,900/s, Sunlight ~3,750/s)"
        )
        for batch in (500, 2000):
            w = bench_writer(args.leaves, batch, tmp / f"w{batch}")
            print(
                f"  batch {batch:>5}: bare writer {w['bare']:>8,.0f} leaves/s   through append (chdb rows) "
                f"{w['append']:>8,.0f} leaves/s   ({w['bare'] / 5000:.2f}x / {w['append'] / 5000:.2f}x the target)"
                f"   publish {w['publish_s'] * 1000:.0f} ms"
            )
        values, _, signer = build_corpus(args.n, args.size)
        counts = [int(p) for p in args.procs.split(",")]
        print(f"ingest, {args.n} captures of ~{args.size} B, 6 partitions, one log ({cores} cores here)")
        base = None
        for k in counts:
            r = bench_ingest(k, values, signer, tmp, interval=args.interval)
            if base is None:
                base = r["rate"]
            ratio = r["rate"] / (base * k)
            print(
                f"  K={k}: {r['rate']:>7,.0f} captures/s = leaves/s through the writer   "
                f"{r['rate'] / base:.2f}x K=1 ({ratio:.2f} of K x K=1)   leaf to checkpoint "
                f"p50 {r['lat_p50']:.1f} s, max {r['lat_max']:.1f} s (interval {args.interval:g} s, target <= 10 s)"
            )


if __name__ == "__main__":
    main()

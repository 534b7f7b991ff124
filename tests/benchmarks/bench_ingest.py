"""Ingest throughput and ``show`` latency on the real services, side by side with a floor baseline.

    python tests/benchmarks/bench_ingest.py [--n 6000] [--size 20000] [--batch-size 500] [--workers N]
        [--decode native,codec]

Not collected by pytest. Needs Kafka and MinIO (``bash deploy/local/up.sh``). Both runs read the same
topic (fresh consumer groups), write to the same MinIO bucket and to chdb in the same process:

- **floor**: raw confluent-kafka ``consume(500)`` + one ed25519 verify per capture + zstd per capture + one
  PUT per batch-sized segment + an insert of rows computed *before* the clock started + a synchronous
  commit. The least any ingest that verifies, compresses, stores and indexes must do.
- **ingest**: the real consumer (``build_service``): decode, full evidence verification (every content
  hash, Merkle root, signature), dedup query, classification, segments per class, index rows, commit.

``--decode codec`` adds ingest runs that decode with :func:`schemas.codec.decode` instead of the native
reader (:func:`producers.avro.decode`): the same run's before/after (in-process only, so workers=0).

Throughput is counted from the first batch to the last commit (group join excluded). Targets (DESIGN):
>= 2,000 captures/s per consumer process and >= 0.7x the floor (issue 15); ``show`` of one capture p50 < 20 ms.
"""

from __future__ import annotations

import argparse
import importlib
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "consumers" / "ingest"))

import zstandard
from confluent_kafka import Consumer, TopicPartition
from ingest_testdata import (
    chdb_index,
    create_topics,
    kafka_s3_settings,
    make_capture,
    new_signer,
    trust_for,
)

from consumers.index import RowBatch, decision_rows
from consumers.ingest.prepare import manifest_json
from consumers.ingest.service import build_service
from consumers.ingest.store import insert_captures
from consumers.storage.reader import load_capture
from consumers.verify.stored import judge_shown
from producers import avro, native
from producers.blobstore import S3BlobStore
from producers.evidence import MANIFEST_PAYLOAD_TYPE, manifest_bytes, pae, seal
from producers.evidence.dsse import b64decode
from schemas import codec
from schemas.codec import encode_capture

MINIO = {
    "endpoint": "127.0.0.1:9000",
    "access_key": "blackbox",
    "secret_key": "blackbox-secret",
    "bucket": "blackbox",
}
BOOTSTRAP = "127.0.0.1:9092"
PARTITIONS = 4


class Timed:
    """Wraps a source: time of the first non-empty batch and of the last commit."""

    def __init__(self, source: Any) -> None:
        self._source = source
        self.first: float | None = None
        self.last_commit = 0.0
        self.first_cpu = 0.0
        self.last_cpu = 0.0
        self.messages = 0

    def consume(self, max_messages: int, timeout: float) -> Any:
        batch = self._source.consume(max_messages, timeout)
        if batch and self.first is None:
            self.first = time.perf_counter()
            self.first_cpu = time.process_time()
        self.messages += len(batch)
        return batch

    def commit(self, offsets: Any) -> bool:
        ok = self._source.commit(offsets)
        self.last_commit = time.perf_counter()
        self.last_cpu = time.process_time()
        return bool(ok)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._source, name)


def build_corpus(n: int, size: int) -> tuple[list[bytes], list[dict[str, Any]], Any]:
    signer = new_signer()
    captures = []
    for i in range(n):
        level = "structured-only" if i % 4 == 3 else "full"
        captures.append(
            seal(make_capture(i, tag=f"b{n}", size=size, flagged=i % 10 == 0, level=level), signer)
        )
    return [encode_capture(c) for c in captures], captures, signer


def run_floor(
    topic: str,
    n: int,
    batch_size: int,
    store: S3BlobStore,
    index: Any,
    captures: list[dict[str, Any]],
    signer: Any,
) -> tuple[float, float]:
    """The floor: see the module docstring. Everything not on that list is precomputed.

    Returns (captures/s, CPU µs of this process per capture)."""
    public = signer.public_key
    signed = {
        c["decisionId"]: (
            b64decode(c["signature"]["signatureBytes"][7:]),
            pae(MANIFEST_PAYLOAD_TYPE, manifest_bytes(c)),
        )
        for c in captures
    }
    rows = {c["decisionId"]: decision_rows(c, manifest_json=manifest_json(c)) for c in captures}
    ids = [c["decisionId"] for c in captures]
    zc = zstandard.ZstdCompressor(level=3, write_checksum=True)
    consumer = Consumer(
        {
            "bootstrap.servers": BOOTSTRAP,
            "group.id": f"floor-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "fetch.max.bytes": 64 * 1024 * 1024,
        }
    )
    consumer.subscribe([topic])
    done = 0
    first: float | None = None
    first_cpu = 0.0
    seq = 0
    while done < n:
        msgs: list[Any] = [m for m in consumer.consume(batch_size, 1.0) if m.error() is None]
        if not msgs:
            continue
        if first is None:
            first, first_cpu = time.perf_counter(), time.process_time()
        frames = []
        batch_rows = []
        for m in msgs:
            did = ids[int(m.headers()[0][1])] if m.headers() else None
            assert did is not None
            sig, message = signed[did]
            public.verify(sig, message)
            frames.append(zc.compress(m.value()))
            batch_rows.append(rows[did])
        store.put(f"floor/{topic}/{seq:08d}.seg", b"".join(frames))
        insert_captures(index, RowBatch.of(batch_rows))
        offsets: dict[int, int] = {}
        for m in msgs:
            offsets[m.partition()] = max(offsets.get(m.partition(), 0), m.offset() + 1)
        consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
        done += len(msgs)
        seq += 1
    elapsed = time.perf_counter() - (first or time.perf_counter())
    cpu = time.process_time() - first_cpu
    consumer.close()
    return done / elapsed, cpu / done * 1e6


def run_ingest(
    topic: str, batch_size: int, store: S3BlobStore, index: Any, trust: Any, tmp: Path, workers: int
) -> tuple[float, float, Any]:
    """(captures/s, CPU µs of this process per capture - workers' CPU not included, stats)."""
    settings = kafka_s3_settings(
        tmp, bootstrap=BOOTSTRAP, minio=MINIO, topic=topic, group=f"ingest-{uuid.uuid4().hex[:8]}"
    )
    with build_service(
        settings, index=index, store=store, trust=trust, batch_size=batch_size, max_wait=0.5, workers=workers
    ) as service:
        timed = Timed(service.source)
        service.loop.source = timed  # type: ignore[assignment]
        stats = service.run(drain=True)
    assert timed.first is not None
    cpu = (timed.last_cpu - timed.first_cpu) / timed.messages * 1e6
    return timed.messages / (timed.last_commit - timed.first), cpu, stats


def bench_show(
    index: Any, store: S3BlobStore, ids: list[str], samples: int, trust: Any
) -> tuple[tuple[float, float], tuple[float, float]]:
    """((p50, p99) of the read ``show`` does, (p50, p99) of that read plus its verdict) in ms: the
    target is on the read; the verdict (signature, hashes, index rows against the capture) is what
    ``blackbox show`` adds before it prints."""
    rng = random.Random(3)
    reads, shows = [], []
    for did in rng.sample(ids, min(samples, len(ids))):
        t0 = time.perf_counter()
        shown = load_capture(did, index=index, store=store)
        t1 = time.perf_counter()
        judge_shown(shown, index=index, trust=trust)
        t2 = time.perf_counter()
        reads.append((t1 - t0) * 1000)
        shows.append((t2 - t0) * 1000)
    return _p50_p99(reads), _p50_p99(shows)


def _p50_p99(times: list[float]) -> tuple[float, float]:
    times = sorted(times)
    return statistics.median(times), times[int(len(times) * 0.99) - 1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=6000)
    parser.add_argument("--size", type=int, default=20000, help="approximate encoded capture size in bytes")
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--show-samples", type=int, default=200)
    parser.add_argument("--workers", default="0,1", help="comma-separated worker counts to run ingest with")
    parser.add_argument(
        "--decode", default="native", help="comma-separated decoders: native (producers.avro), codec"
    )
    args = parser.parse_args()
    worker_counts = [int(w) for w in args.workers.split(",")]

    t0 = time.perf_counter()
    values, captures, signer = build_corpus(args.n, args.size)
    avg = sum(map(len, values)) / len(values)
    print(
        f"corpus: {args.n} sealed captures, {avg / 1000:.1f} KB average encoded ({time.perf_counter() - t0:.1f}s)"
    )
    topic = f"bbbench.ingest.{uuid.uuid4().hex[:8]}"
    create_topics(BOOTSTRAP, topic, f"{topic}.dlq", partitions=PARTITIONS)
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": BOOTSTRAP, "linger.ms": 20, "compression.type": "zstd", "acks": "all"}
    )
    for i, v in enumerate(values):
        while True:
            try:
                producer.produce(
                    topic, key=f"agt_{i % 8}".encode(), value=v, headers=[("i", str(i).encode())]
                )
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(60) == 0

    store = S3BlobStore(MINIO["endpoint"], MINIO["access_key"], MINIO["secret_key"], MINIO["bucket"])
    results: list[tuple[int, float, float, Any, str]] = []
    decoders = args.decode.split(",")
    runs = [(w, d) for d in decoders for w in worker_counts if d == "native" or w == 0]
    with tempfile.TemporaryDirectory() as tmp:
        # The first query of a process imports chdb's Arrow/pandas path (~0.4 s here): pay it before
        # both clocks, not inside whichever run happens to come first (the floor).
        with chdb_index(Path(tmp) / "chdb-warmup") as index:
            index.column_types("decisions")
        with chdb_index(Path(tmp) / "chdb-floor") as index:
            floor, floor_cpu = run_floor(topic, args.n, args.batch_size, store, index, captures, signer)
        for workers, decoder in runs:
            _use_decoder(decoder)
            with chdb_index(Path(tmp) / f"chdb-ingest-{workers}-{decoder}") as index:
                rate, cpu, stats = run_ingest(
                    topic,
                    args.batch_size,
                    store,
                    index,
                    trust_for(signer),
                    Path(tmp) / f"w{workers}-{decoder}",
                    workers,
                )
                assert stats.indexed == args.n, stats
                results.append((workers, rate, cpu, stats, decoder))
                if (workers, decoder) == runs[-1]:
                    (p50, p99), (v50, v99) = bench_show(
                        index,
                        store,
                        [c["decisionId"] for c in captures],
                        args.show_samples,
                        trust_for(signer),
                    )
    print(f"native core: {native.status()}")
    print(
        f"floor : {floor:8.0f} captures/s  {floor_cpu:6.0f} µs CPU/capture  "
        "(consume + 1 verify + zstd + 1 PUT/segment + precomputed rows + commit)"
    )
    # CPU per capture is this process's (all its threads); on a busy machine it is the steadier figure.
    for workers, rate, cpu, stats, decoder in results:
        mine = " (this process; workers' CPU not counted)" if workers else ""
        print(
            f"ingest: {rate:8.0f} captures/s  = {rate / floor:.2f}x floor  {cpu:6.0f} µs CPU/capture"
            f" = {floor_cpu / cpu:.2f}x floor's{mine}  "
            f"(workers={workers}, decode={decoder}, batches={stats.batches}, batch size {args.batch_size})"
        )
    print(f"show  : p50 {p50:.1f} ms, p99 {p99:.1f} ms  ({args.show_samples} random captures from MinIO)")
    print(
        f"show with its verdict: p50 {v50:.1f} ms, p99 {v99:.1f} ms  (the read + signature, hashes, index rows)"
    )
    best = max(rate for _, rate, _, _, _ in results)
    ok = best >= 2000 and best >= 0.7 * floor and p50 < 20
    print("targets (>= 2000/s, >= 0.7x floor, show p50 < 20 ms):", "MET" if ok else "NOT MET")


def _use_decoder(decoder: str) -> None:
    """Point ingest's decode (prepare and batch, this process) at the native reader or the codec."""
    chosen = {"native": avro.decode, "codec": codec.decode}[decoder]
    # by module name: ``consumers.ingest.prepare`` the attribute is the function it exports
    for module in ("consumers.ingest.prepare", "consumers.ingest.batch"):
        importlib.import_module(module).decode = chosen


if __name__ == "__main__":
    main()

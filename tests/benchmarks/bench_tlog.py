"""The transparency log's cost inside ingest, side by side with ingest without it, on the real services.

    python tests/benchmarks/bench_tlog.py [--n 4000] [--size 20000] [--batch-size 500] [--rounds 2]

Not collected by pytest. Needs Kafka and MinIO (``bash deploy/local/up.sh``). The same topic is read by
fresh consumer groups, alternately without and with the log (so drift hits both alike), each into its own
chdb database and, with the log, its own log prefix in the MinIO bucket:

- **append rate**: leaves per second inside :meth:`TransparencyLog.append` during ingest (the writer lock,
  the index's leaf count, the redelivery check, the tile PUTs, the leaf-row insert; checkpoints every
  ``--interval`` seconds and one at the end);
- **ingest throughput**: captures per second from the first batch to the last commit (bench_ingest's
  measure), without and with the log, and their ratio.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "consumers" / "ingest"))
sys.path.insert(0, str(ROOT / "tests" / "benchmarks"))

from bench_ingest import BOOTSTRAP, MINIO, PARTITIONS, Timed, build_corpus
from confluent_kafka import Producer
from ingest_testdata import chdb_index, create_topics, kafka_s3_settings, trust_for

from consumers.ingest.service import build_service
from consumers.tlog.checkpoints import load_log_signer
from consumers.tlog.log import TransparencyLog
from producers.blobstore import S3BlobStore


class TimedLog:
    """Wraps a log's ``append``: leaves appended and seconds spent in it."""

    def __init__(self, log: TransparencyLog) -> None:
        self.log = log
        self.seconds = 0.0
        self.leaves = 0
        self._append = log.append
        log.append = self.append  # type: ignore[method-assign]

    def append(self, entries: Any, *, hook: Any = None) -> int:
        t0 = time.perf_counter()
        n = self._append(entries, hook=hook)
        self.seconds += time.perf_counter() - t0
        self.leaves += n
        return n


def run(
    topic: str, *, with_log: bool, batch_size: int, store: S3BlobStore, tmp: Path, trust: Any, interval: float
) -> tuple[float, TimedLog | None]:
    settings = kafka_s3_settings(
        tmp, bootstrap=BOOTSTRAP, minio=MINIO, topic=topic, group=f"tlog-{uuid.uuid4().hex[:8]}"
    )
    with chdb_index(tmp / "chdb") as index:
        timed_log = None
        log = None
        if with_log:
            log = TransparencyLog(
                store=store,
                index=index,
                signer=load_log_signer(tmp / "tlog.key", "bench.blackbox/log"),
                prefix=f"tlog-bench/{uuid.uuid4().hex[:10]}",
                lock_path=tmp / "tlog.lock",
                interval=interval,
            )
            timed_log = TimedLog(log)
        with build_service(
            settings, index=index, store=store, trust=trust, batch_size=batch_size, max_wait=0.5, tlog=log
        ) as service:
            timed = Timed(service.source)
            service.loop.source = timed  # type: ignore[assignment]
            stats = service.run(drain=True)
        assert timed.first is not None
        assert not with_log or stats.logged == stats.indexed, stats
    return timed.messages / (timed.last_commit - timed.first), timed_log


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=4000)
    parser.add_argument("--size", type=int, default=20000, help="approximate encoded capture size in bytes")
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--interval", type=float, default=10.0, help="seconds between checkpoints")
    args = parser.parse_args()

    values, _captures, signer = build_corpus(args.n, args.size)
    print(f"corpus: {args.n} sealed captures, {sum(map(len, values)) / len(values) / 1000:.1f} KB average")
    topic = f"bbbench.tlog.{uuid.uuid4().hex[:8]}"
    create_topics(BOOTSTRAP, topic, f"{topic}.dlq", partitions=PARTITIONS)
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
    trust = trust_for(signer)
    without: list[float] = []
    with_: list[float] = []
    append_rates: list[float] = []
    shares: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for flag in (False, True):
                rate, timed_log = run(
                    topic,
                    with_log=flag,
                    batch_size=args.batch_size,
                    store=store,
                    tmp=Path(tmp) / f"r{r}-{int(flag)}",
                    trust=trust,
                    interval=args.interval,
                )
                (with_ if flag else without).append(rate)
                if timed_log is not None:
                    append_rates.append(timed_log.leaves / timed_log.seconds)
                    shares.append(timed_log.seconds * rate / args.n)
                print(
                    f"round {r + 1}: {'with the log   ' if flag else 'without the log'} {rate:8.0f} captures/s"
                )
    a, b = statistics.median(without), statistics.median(with_)
    print(f"ingest without the log : {a:8.0f} captures/s (median of {len(without)})")
    print(f"ingest with the log    : {b:8.0f} captures/s (median of {len(with_)})  = {b / a:.2f}x")
    print(
        f"log append inside ingest: {statistics.median(append_rates):8.0f} leaves/s "
        f"({statistics.median(shares) * 100:.1f}% of ingest's wall time)"
    )


if __name__ == "__main__":
    main()

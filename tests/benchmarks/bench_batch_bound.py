"""What a native batch worker could reach (not collected by pytest): the bound behind issue 15's
throughput target, beside the floor from the same run.

    python tests/benchmarks/bench_batch_bound.py [--bootstrap 127.0.0.1:9092] [--work 40,80,120,160]

The agent's side is the real public API (``recorder_testdata.record``, ~20 KB decisions, a backlog
of 2,000). The worker is the best any native worker behind that API could be: it takes the waiting
decisions in batches of up to 64 and spends ``--work`` µs of CPU per decision in C that never holds
the GIL (sha256 over a buffer sized to take that long), and nothing else: no copy out of Python, no
encoding, no send. Each rate is therefore an upper bound for a worker whose own CPU per decision is
that figure; ``bench_producer.py`` prints the recorder's measured figure (its process CPU per
capture less the caller's). The floor is ``bench_producer.py``'s, over the same encoded bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import queue
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_producer import (
    VARIANTS,
    create_topic,
    delete_topic,
    encoded_captures,
    floor,
)
from recorder_testdata import NullTransport, configure, make_content, new_signer, record

from producers import recorder as recorder_module
from producers.policy import CapturePolicy

BATCH = 64


def _hash_rate() -> float:
    """sha256 bytes per second of one thread's CPU on this machine."""
    data = bytes(8 << 20)
    began = time.thread_time()
    for _ in range(8):
        hashlib.sha256(data)
    return 8 * len(data) / (time.thread_time() - began)


class _GilFreeWorker(recorder_module.Recorder):
    """The recorder with its worker replaced by the ideal batch worker (see the module docstring)."""

    def __init__(self, *, work_bytes: int, **kwargs: Any) -> None:
        self.done = 0
        self._buffer = memoryview(bytes(work_bytes * BATCH + 1))
        self._work_bytes = work_bytes
        super().__init__(**kwargs)

    def _run(self) -> None:
        take = self._queue.get
        take_waiting = self._queue.get_nowait
        while True:
            batch = [take()]
            while len(batch) < BATCH:
                try:
                    batch.append(take_waiting())
                except queue.Empty:
                    break
            stop = recorder_module._STOP in batch
            n = len(batch) - stop
            hashlib.sha256(self._buffer[: self._work_bytes * n])  # the GIL is released from 2 KB
            self.done += n
            if stop:
                return


def bound(size: int, count: int, work_us: float, hash_rate: float) -> float:
    contents = [make_content(size, seed=seed) for seed in range(VARIANTS)]
    rec = _GilFreeWorker(
        work_bytes=int(work_us * 1e-6 * hash_rate),
        agent_id="agt_bench",
        transport=NullTransport(),
        signer=new_signer(),
        policy=CapturePolicy(sample_one_in=0),
        queue_size=2_000,
        consequential_wait=60.0,
    )
    configure(rec)
    for i in range(100):  # warm up
        record(rec, contents[i % VARIANTS], consequential=True)
    while rec.done < 100:
        time.sleep(0.001)
    rec.done = 0
    start = time.perf_counter()
    for i in range(count):
        record(rec, contents[i % VARIANTS], consequential=True)
    while rec.done < count:
        time.sleep(0.0005)
    elapsed = time.perf_counter() - start
    rec._queue.put(recorder_module._STOP)
    rec._worker.join(10)
    return count / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--size", type=int, default=20_000)
    parser.add_argument("--count", type=int, default=6_000)
    parser.add_argument("--work", default="40,80,120,160", help="the worker's GIL-free µs per decision")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, load average {os.getloadavg()[0]:.2f}")
    hash_rate = _hash_rate()
    payloads = encoded_captures(args.size)
    topic = create_topic(args.bootstrap)
    works = [float(w) for w in args.work.split(",")]
    floors: list[float] = []
    rates: dict[float, list[float]] = {w: [] for w in works}
    try:
        for _ in range(args.repeat):
            floors.append(args.count / floor(args.bootstrap, topic, payloads, args.count))
            for work in works:
                rates[work].append(bound(args.size, args.count, work, hash_rate))
    finally:
        delete_topic(args.bootstrap, topic)
    f_rate = statistics.median(floors)
    print(f"floor {f_rate:8.0f} captures/s   runs {[round(x) for x in floors]}")
    for work in works:
        rate = statistics.median(rates[work])
        print(
            f"GIL-free batch worker at {work:4.0f} us/decision: {rate:7.0f} captures/s = "
            f"{rate / f_rate:.2f}x the floor   runs {[round(x) for x in rates[work]]}"
        )


if __name__ == "__main__":
    main()

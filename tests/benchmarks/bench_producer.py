"""Producer benchmark (not collected by pytest): the Recorder into the real broker, beside its floor.

    python tests/benchmarks/bench_producer.py [--bootstrap 127.0.0.1:9092] [--sizes 20000,120000]
                                              [--count-20k 6000] [--count-120k 1200] [--rate 1000]
                                              [--transport kafka|null]

For each capture size, in the same run:

* **floor**: raw confluent-kafka producing the same already-encoded capture bytes, plus one sha256
  over them and one ed25519 signature per capture (same producer settings: idempotent, acks=all,
  zstd, same linger) — what any signed producer must at least pay;
* **ceiling**: the public API on the caller's thread followed by only the floor's work for the same
  bytes — what a recorder behind this API could reach if sealing, scanning and encoding were free;
* **recorder throughput**: full-capture decisions recorded through the public API as fast as the
  caller can go (consequential, so none is dropped and all are full size), from the first call to
  ``flush()`` returning with every capture acknowledged by the broker;
* **CPU bound**: the machine's cores over the recorder run's process CPU per capture — no
  arrangement of threads does better on this machine for the same work;
* **GC**: the cyclic garbage collector's time in the recorder run, per capture, and its longest
  collection (a pause on whichever thread triggered it, mostly the caller's): what decisions waiting
  in a deep backlog cost (``DecisionBuilder._pack``);
* **caller cost**: the time the runtime's thread spends in the recorder per decision (``decision()``
  … ``finish()``, including rendering the context), p50/p99/max, at a paced rate (``--rate``/s, a
  realistic load below capacity) while the worker runs; beside it the thread's own CPU, how late it
  woke from each paced sleep (the GIL the worker holds is what it waits for there) and its wait for
  a CPU (on a busy machine, preemption by other processes is most of a high p99).

``--transport null`` needs no broker: the recorder hands its bytes to a transport that discards
them (delivered at once), there is no floor, and throughput is the recorder's own capacity; the
caller cost is then the recorder's alone (its worker still busy), without librdkafka's threads.

Targets (DESIGN): throughput >= 0.5x floor and >= 5,000/s at ~20 KB; caller p99 < 1 ms.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import hashlib
import os
import resource
import statistics
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "producers" / "recorder"))

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from recorder_testdata import NullTransport, configure, make_content, new_signer, record

from producers.policy import CapturePolicy
from producers.recorder import Recorder
from producers.transports.kafka.sender import KafkaTransport

VARIANTS = 16
LINGER_MS = 10


def create_topic(bootstrap: str) -> str:
    topic = f"bench.producer.{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)]).values():
        future.result(30)
    return topic


def delete_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.delete_topics([topic]).values():
        with contextlib.suppress(Exception):
            future.result(30)


def open_transport(bootstrap: str, topic: str | None) -> Any:
    """Kafka on ``topic``, or the discarding transport when ``topic`` is None (``--transport null``)."""
    if topic is None:
        return NullTransport()
    return KafkaTransport(bootstrap=bootstrap, topic=topic, linger_ms=LINGER_MS)


def encoded_captures(size: int) -> list[bytes]:
    """The exact bytes the recorder sends for the benchmark's decisions (full captures)."""
    sent: list[bytes] = []
    rec = Recorder(agent_id="agt_bench", transport=NullTransport(sent), signer=new_signer())
    configure(rec)
    for seed in range(VARIANTS):
        record(rec, make_content(size, seed=seed), consequential=True)
    rec.close()
    return sent


def floor_producer(bootstrap: str, topic: str, first: bytes) -> Producer:
    """The floor's producer (the recorder's Kafka settings), connected before any timing."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "compression.type": "zstd",
            "linger.ms": LINGER_MS,
            "batch.size": 4 * 1024 * 1024,
            "batch.num.messages": 10_000,
            "queue.buffering.max.kbytes": 512 * 1024,
        }
    )
    producer.produce(topic, first, key=b"agt_bench")
    producer.flush(30)
    return producer


class Delivered:
    """Counts the floor's delivery reports."""

    def __init__(self) -> None:
        self.ok = 0
        self.failed = 0

    def __call__(self, err: Any, _msg: Any) -> None:
        if err is None:
            self.ok += 1
        else:
            self.failed += 1


def floor_step(producer: Producer, topic: str, signer: Any, data: bytes, on_delivery: Delivered) -> None:
    """The floor's work for one capture: one sha256, one ed25519 signature, one produce."""
    signer.sign(hashlib.sha256(data).digest())
    while True:
        try:
            producer.produce(topic, data, key=b"agt_bench", on_delivery=on_delivery)
            return
        except BufferError:
            producer.poll(0.01)


def floor(bootstrap: str, topic: str, payloads: list[bytes], count: int) -> float:
    signer = new_signer()
    producer = floor_producer(bootstrap, topic, payloads[0])
    delivered = Delivered()
    start = time.perf_counter()
    for i in range(count):
        floor_step(producer, topic, signer, payloads[i % len(payloads)], delivered)
        if i % 64 == 0:
            producer.poll(0)
    producer.flush(60)
    elapsed = time.perf_counter() - start
    assert delivered.ok == count and not delivered.failed, (delivered.ok, delivered.failed)
    return elapsed


def ceiling(bootstrap: str, topic: str, payloads: list[bytes], size: int, count: int) -> float:
    """The most any recorder behind this API could reach: each decision recorded through the public
    API on the caller's thread (as in the throughput run), then only the floor's work for its bytes
    (sha256, ed25519, produce) in the same thread — as if sealing, scanning and encoding were free.
    Both hold the GIL in the real recorder, so they add up; nothing else is counted."""
    contents = [make_content(size, seed=seed) for seed in range(VARIANTS)]
    rec = Recorder(agent_id="agt_bench", transport=NullTransport(), signer=new_signer())
    configure(rec)
    rec._submit_decision = lambda builder: None  # type: ignore[method-assign]  # the free worker
    signer = new_signer()
    producer = floor_producer(bootstrap, topic, payloads[0])
    delivered = Delivered()
    start = time.perf_counter()
    for i in range(count):
        record(rec, contents[i % VARIANTS], consequential=True)
        floor_step(producer, topic, signer, payloads[i % len(payloads)], delivered)
        if i % 64 == 0:
            producer.poll(0)
    producer.flush(60)
    elapsed = time.perf_counter() - start
    rec.close()
    assert delivered.ok == count and not delivered.failed, (delivered.ok, delivered.failed)
    return elapsed


class GcWatch:
    """The cyclic GC's collections while installed: total and longest, in seconds."""

    def __init__(self) -> None:
        self.total = 0.0
        self.longest = 0.0
        self._began = 0.0

    def __call__(self, phase: str, _info: dict[str, Any]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
        else:
            took = time.perf_counter() - self._began
            self.total += took
            self.longest = max(self.longest, took)

    def __enter__(self) -> GcWatch:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *_exc: object) -> None:
        gc.callbacks.remove(self)


def recorder_throughput(
    bootstrap: str, topic: str | None, size: int, count: int, queue_size: int, watch: GcWatch
) -> float:
    contents = [make_content(size, seed=seed) for seed in range(VARIANTS)]
    errors: list[Any] = []
    transport = open_transport(bootstrap, topic)
    rec = Recorder(
        agent_id="agt_bench",
        transport=transport,
        signer=new_signer(),
        policy=CapturePolicy(sample_one_in=0),
        queue_size=queue_size,
        consequential_wait=60.0,
        on_error=errors.append,
    )
    configure(rec)
    record(rec, contents[0], consequential=True)  # connect before timing
    rec.flush(30)
    start = time.perf_counter()
    with watch:
        for i in range(count):
            record(rec, contents[i % VARIANTS], consequential=True)
        ok = rec.flush(120)
    elapsed = time.perf_counter() - start
    stats = rec.stats
    rec.close()
    assert ok and not errors and stats.delivered == count + 1, (stats, errors[:3])
    return elapsed


@dataclass(frozen=True, slots=True)
class CallerCost:
    """Per decision (µs): wall time on the caller's thread inside the recorder, that thread's own CPU
    time in it, and how late the thread got to run again after its paced sleep (waiting for the GIL
    the worker held, or for a CPU). ``run_queue``: the thread's total wait for a CPU (OS
    preemption, Linux schedstat) over the run, per decision; None where it cannot be read."""

    wall: list[float]
    cpu: list[float]
    wake: list[float]
    run_queue: float | None


def run_delay_ns() -> int | None:
    """This thread's total time runnable but not running (``/proc/.../schedstat``), or None."""
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/schedstat", "rb") as handle:
            return int(handle.read().split()[1])
    except (OSError, IndexError, ValueError):
        return None


def caller_cost(bootstrap: str, topic: str | None, size: int, count: int, rate: float) -> CallerCost:
    """The caller's side at a paced load (see :class:`CallerCost`); the worker is busy meanwhile."""
    contents = [make_content(size, seed=seed) for seed in range(VARIANTS)]
    rec = Recorder(
        agent_id="agt_bench",
        transport=open_transport(bootstrap, topic),
        signer=new_signer(),
        policy=CapturePolicy(sample_one_in=0),
        queue_size=10_000,
    )
    configure(rec)
    for i in range(50):  # warm up
        record(rec, contents[i % VARIANTS], consequential=True)
    rec.flush(30)
    durations: list[float] = []
    cpu: list[float] = []
    wake: list[float] = []
    interval = 1.0 / rate
    delay0 = run_delay_ns()
    next_at = time.perf_counter()
    for i in range(count):
        now = time.perf_counter()
        if next_at > now:
            time.sleep(next_at - now)
            wake.append((time.perf_counter() - next_at) * 1e6)
        next_at += interval
        c0 = time.thread_time_ns()
        t0 = time.perf_counter_ns()
        record(rec, contents[i % VARIANTS], consequential=True)
        durations.append((time.perf_counter_ns() - t0) / 1000)
        cpu.append((time.thread_time_ns() - c0) / 1000)
    delay1 = run_delay_ns()
    rec.close()
    assert rec.stats.failed == 0 and rec.stats.dropped_queue_full == 0, rec.stats
    queued = None if delay0 is None or delay1 is None else (delay1 - delay0) / 1000 / count
    return CallerCost(durations, cpu, wake or [0.0], queued)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--sizes", default="20000,120000")
    parser.add_argument("--count-20k", type=int, default=6_000)
    parser.add_argument("--count-120k", type=int, default=1_200)
    parser.add_argument(
        "--repeat", type=int, default=3, help="alternating floor/recorder runs; medians reported"
    )
    parser.add_argument(
        "--rate",
        type=float,
        default=1_000.0,
        help="decisions/s for the caller-cost run (capped at half capacity)",
    )
    parser.add_argument("--caller-count", type=int, default=2_000)
    parser.add_argument(
        "--queue-size", type=int, default=2_000, help="the recorder's backlog in the throughput run"
    )
    parser.add_argument(
        "--transport",
        choices=("kafka", "null"),
        default="kafka",
        help="null: no broker, no floor; the recorder's own capacity and caller cost",
    )
    parser.add_argument("--switch-interval", type=float, default=None, help="sys.setswitchinterval (s)")
    args = parser.parse_args()
    if args.switch_interval:
        sys.setswitchinterval(args.switch_interval)

    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, load average {os.getloadavg()[0]:.2f}, "
        f"switch interval {sys.getswitchinterval() * 1000:.1f} ms"
    )
    for size in (int(s) for s in args.sizes.split(",")):
        count = args.count_20k if size <= 50_000 else args.count_120k
        payloads = encoded_captures(size)
        mean = statistics.mean(len(p) for p in payloads)
        print(f"\n== captures of ~{size / 1000:.0f} KB (encoded mean {mean / 1000:.1f} KB), {count} per run")
        topic = create_topic(args.bootstrap) if args.transport == "kafka" else None
        floors: list[float] = []
        ceilings: list[float] = []
        recorders: list[float] = []
        f_cpu: list[float] = []
        r_cpu: list[float] = []
        watches: list[GcWatch] = []
        try:
            for _ in range(args.repeat):
                c0 = cpu_seconds()
                if topic is not None:
                    floors.append(count / floor(args.bootstrap, topic, payloads, count))
                c1 = cpu_seconds()
                watches.append(GcWatch())
                r_elapsed = recorder_throughput(
                    args.bootstrap, topic, size, count, args.queue_size, watches[-1]
                )
                c2 = cpu_seconds()
                if topic is not None:
                    ceilings.append(count / ceiling(args.bootstrap, topic, payloads, size, count))
                recorders.append(count / r_elapsed)
                f_cpu.append((c1 - c0) / count * 1e6)
                r_cpu.append((c2 - c1) / count * 1e6)
            r_rate = statistics.median(recorders)
            rate = min(args.rate, 0.5 * r_rate)  # well below capacity: no backpressure
            caller = caller_cost(args.bootstrap, topic, size, args.caller_count, rate)
        finally:
            if topic is not None:
                delete_topic(args.bootstrap, topic)
        mb = mean / 1e6
        if floors:
            f_rate = statistics.median(floors)
            print(
                f"floor     {f_rate:9.0f} captures/s  {f_rate * mb:7.1f} MB/s   "
                f"process CPU {statistics.median(f_cpu):6.0f} us/capture   runs {[round(x) for x in floors]}"
            )
        print(
            f"recorder  {r_rate:9.0f} captures/s  {r_rate * mb:7.1f} MB/s   "
            f"process CPU {statistics.median(r_cpu):6.0f} us/capture   runs {[round(x) for x in recorders]}"
            + ("" if floors else "   (null transport)")
        )
        print(
            f"GC in the recorder run (backlog of {args.queue_size}): "
            f"{statistics.median(w.total / count * 1e6 for w in watches):.1f} us/capture, longest "
            f"collection {max(w.longest for w in watches) * 1e3:.1f} ms"
        )
        # Whatever the threads do, a run cannot go faster than the machine's cores over the CPU it
        # spends per capture: the hard upper bound for this recorder's work on this machine.
        cores = len(os.sched_getaffinity(0))
        bound = cores / statistics.median(r_cpu) * 1e6
        print(
            f"CPU bound {bound:9.0f} captures/s  ({cores} cores / {statistics.median(r_cpu):.0f} us of "
            "process CPU per capture, perfectly parallel)"
            + (f": {bound / statistics.median(floors):.2f}x the floor" if floors else "")
        )
        if floors:
            c_rate = statistics.median(ceilings)
            print(
                f"ceiling   {c_rate:9.0f} captures/s  (the public API + the floor's work, sealing free): "
                f"{c_rate / f_rate:.2f}x the floor   runs {[round(x) for x in ceilings]}"
            )
            print(
                f"ratio recorder/floor: {r_rate / f_rate:.2f} (median of runs; per run "
                f"{[round(r / f, 2) for r, f in zip(recorders, floors, strict=True)]})  target >= 0.5"
                + (" and >= 5000/s" if size <= 50_000 else "")
            )
        wall, own = caller.wall, caller.cpu
        print(
            f"caller cost at {rate:.0f}/s: wall p50 {pct(wall, 0.5):.0f} us, p99 {pct(wall, 0.99):.0f} us, "
            f"max {max(wall):.0f} us (target p99 < 1000 us); caller-thread CPU p50 "
            f"{pct(own, 0.5):.0f} us, p99 {pct(own, 0.99):.0f} us"
        )
        print(
            f"caller's wake-up after its paced sleep: late by p50 {pct(caller.wake, 0.5):.0f} us, "
            f"p99 {pct(caller.wake, 0.99):.0f} us (GIL held by the worker, or no free CPU)"
            + (
                ""
                if caller.run_queue is None
                else f"; its wait for a CPU (OS run queue) {caller.run_queue:.0f} us per decision"
            )
        )
    print(f"\nload average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

"""Audit endpoint benchmark (not collected by pytest): p50 / p99 of a capture read and of a bundle
export at 50 concurrent clients on loopback.

    python tests/benchmarks/bench_audit.py [--clients 50] [--requests 20]

A data directory with a few ingested captures (embedded chdb, local blobs, the transparency log on)
is served by the real ``blackbox serve`` in its own process; ``--clients`` asyncio clients in this
process, each on its own keep-alive connection with an operator token, send ``--requests`` requests
each, back to back. Every request is a full read: token check, rate limit, the gate, one chained
access-log row (a chdb INSERT), the index row, a range GET of the segment, verification (and, for the
bundle, the inclusion proof from the log's tiles). Latency is per request as the client sees it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "consumers" / "audit")]

import httpx
from audit_world import DECISIONS, make_world


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _run(url: str, token: str, path: str, *, clients: int, requests: int) -> tuple[list[float], float]:
    latencies: list[float] = []
    headers = {"Authorization": f"Bearer {token}"}
    ids = list(DECISIONS)

    async def client(n: int) -> None:
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120) as http:
            for i in range(requests):
                decision = ids[(n + i) % len(ids)]
                start = time.perf_counter()
                answer = await http.get(path.format(id=decision))
                latencies.append(time.perf_counter() - start)
                if answer.status_code != 200:
                    raise SystemExit(f"{path}: HTTP {answer.status_code}: {answer.text[:200]}")

    began = time.perf_counter()
    await asyncio.gather(*(client(n) for n in range(clients)))
    return latencies, time.perf_counter() - began


def _report(name: str, latencies: list[float], elapsed: float) -> None:
    ordered = sorted(latencies)
    p50 = statistics.median(ordered) * 1000
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000
    print(
        f"{name:<14} n={len(ordered):<5} p50={p50:7.1f} ms  p99={p99:7.1f} ms  {len(ordered) / elapsed:7.1f} req/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests", type=int, default=20)
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="bench-audit-"))
    world = make_world(root)
    token = world.token("bench-operator", "operator")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("BLACKBOX_")} | world.env
    env |= {"BLACKBOX_AUDIT_RATE": "1000000", "BLACKBOX_AUDIT_BURST": "1000000"}
    server = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from consumers.entry import main; main()",
            "serve",
            "--listen",
            f"127.0.0.1:{port}",
        ],
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{url}/openapi.json", timeout=2)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit("blackbox serve did not start") from None
                time.sleep(0.2)
        # warm-up: one of each, so the first-use costs (chdb caches, tiles) are not counted
        asyncio.run(_run(url, token, "/v1/decisions/{id}", clients=1, requests=4))
        asyncio.run(_run(url, token, "/v1/decisions/{id}/bundle", clients=1, requests=4))
        print(
            f"audit endpoint, {args.clients} concurrent clients x {args.requests} requests, loopback, 2 cores shared"
        )
        for name, path in (
            ("capture read", "/v1/decisions/{id}"),
            ("bundle export", "/v1/decisions/{id}/bundle"),
        ):
            latencies, elapsed = asyncio.run(
                _run(url, token, path, clients=args.clients, requests=args.requests)
            )
            _report(name, latencies, elapsed)
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()

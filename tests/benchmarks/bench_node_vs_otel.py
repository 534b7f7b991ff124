"""The Node SDK's CPU per decision beside the OpenTelemetry JS SDK, and the event-loop delay it adds
(not collected by pytest).

    python tests/benchmarks/bench_node_vs_otel.py [--size 20000] [--count 2000] [--warmup 300]
                                                  [--repeat 3] [--paced 1500]

The same decisions (``recorder_testdata.make_content``, the content ``bench_vs_otel.py`` uses for
the Python SDK) are recorded by ``producers/typescript/bench/vs-otel.ts``, each variant in a fresh
Node process so its CPU is clean (``process.cpuUsage``: every thread):

* ``otel``: the OpenTelemetry JS SDK (sdk-trace-base 2.12.1) records each decision as one GenAI
  ``chat`` span (the attributes ``bench_vs_otel.py`` builds) through a ``BatchSpanProcessor`` into an
  exporter that OTLP-protobuf-encodes every batch (otlp-transformer) and discards the bytes;
* ``blackbox``: the TypeScript ``Recorder``, every decision consequential so every capture is full
  (redacted with the built-in detectors, its default; hashed per part, Merkle root, ed25519-signed,
  Avro-encoded) into a transport that discards it;
* ``redact-off``: the same with ``redact: "off"`` (what redaction costs, as ``bench_vs_otel.py``);
* ``threads``: ``blackbox`` with ``sealThreads: 2`` (redaction, sealing and encoding on worker threads).

Variants alternate, ``--repeat`` rounds, each figure the median of its rounds; the result is the
ratio blackbox / otel (target <= 1.0x at ~20 KB). Then the paced run: the agent decides every 2 ms
while ``perf_hooks.monitorEventLoopDelay`` samples the loop, with no recorder (``none``), with
OpenTelemetry and with blackbox; the delay blackbox *adds* is its p99 minus ``none``'s (target
< 1 ms).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [
    str(ROOT / "tests" / "producers" / "recorder"),
    str(ROOT / "tests" / "producers" / "typescript"),
]

from node_sdk import PACKAGE, build_package
from recorder_testdata import SYSTEM_PROMPT, TOOL_SCHEMA, make_content

CONTENTS = 16


def write_contents(size: int, path: Path) -> None:
    contents = []
    for seed in range(CONTENTS):
        content = dataclasses.asdict(make_content(size, seed=seed))
        contents.append(
            {
                "request": content["request"],
                "userMessage": content["user_message"],
                "memory": [list(pair) for pair in content["memory"]],
                "toolOutputs": list(content["tool_outputs"]),
                "finalOutput": content["final_output"],
                "reasoning": list(content["reasoning"]),
            }
        )
    path.write_text(
        json.dumps({"systemPrompt": SYSTEM_PROMPT, "toolSchema": TOOL_SCHEMA, "contents": contents}),
        encoding="utf-8",
    )


def run(variant: str, contents: Path, count: int, warmup: int) -> dict[str, Any]:
    done = subprocess.run(
        ["node", "dist/bench/vs-otel.js", variant, str(contents), str(count), str(warmup)],
        cwd=PACKAGE,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{variant} failed:\n{done.stderr.strip()}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=20_000)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--paced", type=int, default=1500, help="decisions in the paced (event-loop) run")
    args = parser.parse_args()
    build_package()
    with tempfile.TemporaryDirectory() as tmp:
        contents = Path(tmp) / "contents.json"
        write_contents(args.size, contents)
        rounds: dict[str, list[dict[str, Any]]] = {
            "otel": [],
            "blackbox": [],
            "redact-off": [],
            "threads": [],
        }
        for _ in range(args.repeat):
            for variant in rounds:
                rounds[variant].append(run(variant, contents, args.count, args.warmup))
        us = {
            v: statistics.median(r["cpu"] for r in results) / args.count * 1e6
            for v, results in rounds.items()
        }
        size = statistics.median(r["bytes"] for r in rounds["blackbox"])
        print(
            f"CPU per decision at ~{args.size // 1000} KB (blackbox capture {size / 1000:.1f} KB), median of {args.repeat}:"
        )
        for variant, value in us.items():
            print(f"  {variant:9s} {value:8.1f} us   {value / us['otel']:.2f}x otel")
        paced = {
            v: run(f"paced-{v}", contents, args.paced, 50) for v in ("none", "otel", "blackbox", "threads")
        }
        print(f"event-loop delay, a decision every 2 ms ({args.paced} decisions), ms:")
        for variant, result in paced.items():
            print(
                f"  {variant:9s} p50 {result['p50']:.3f}  p99 {result['p99']:.3f}  max {result['max']:.3f}"
                f"   the agent's call: p50 {result['callP50']:.3f}  p99 {result['callP99']:.3f}"
            )
        added = {v: paced[v]["p99"] - paced["none"]["p99"] for v in ("otel", "blackbox", "threads")}
        print(
            f"p99 added by blackbox: {added['blackbox']:.3f} ms (target < 1 ms); with sealThreads 2: "
            f"{added['threads']:.3f} ms; by otel: {added['otel']:.3f} ms"
        )


if __name__ == "__main__":
    main()

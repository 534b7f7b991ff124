"""Index benchmark (not collected by pytest): insert N synthetic decisions into chdb, time every trend.

    python tests/benchmarks/bench_index.py [--rows 1000000] [--batch 10000] [--path DIR] [--runs 5]

Reports, side by side in the same run:
* insert rows/s for ``decisions`` (and ``tool_calls``) through ``Index.insert`` (Python lists -> Arrow ->
  ``INSERT ... SELECT * FROM Python(...)``), plus ``rows.decision_rows`` captures/s on the example capture;
* each trend's median latency (target < 200 ms at 1M decisions) with the baseline of the same failure
  query without FINAL and without the flags join, and the argMax alternative to FINAL;
* the same after 1% of decisions got a second, unmerged row version (what FINAL has to resolve).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from consumers.index import TRENDS, ChdbIndex, decision_rows, run_trend
from consumers.ingest.store import update_decisions

ROOT = Path(__file__).resolve().parents[2]
START = datetime(2026, 5, 1, tzinfo=UTC)
DAYS = 90
AGENTS = [f"agt_{i:02d}" for i in range(20)]
PROMPTS = [f"v4.{i}" for i in range(1, 8)]
MODELS = ["2026-03-01", "2026-06-01", "2026-09-01"]
STOPS = ["end_turn", "tool_use", "max_tokens", "stop_sequence", "error"]
TOOLS = ["get_balance", "issue_refund", "search_kb", "send_email", "lookup_order", "escalate"]


def synth_decisions(
    rng: np.random.Generator, start_id: int, n: int, total: int
) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
    """Column lists for n decisions and their tool calls (values as ingest would produce them).

    Like a real ingest stream, batch k covers the k-th slice of the 90 days (captures arrive roughly
    in time order), so most batches land in one monthly partition."""
    ids = [f"dec_{i:012d}" for i in range(start_id, start_id + n)]
    agent = rng.integers(0, len(AGENTS), n)
    prompt = rng.integers(0, len(PROMPTS), n)
    model = rng.integers(0, len(MODELS), n)
    span = DAYS * 86_400_000
    lo, hi = span * start_id // total, span * (start_id + n) // total
    offset_ms = np.sort(rng.integers(lo, max(hi, lo + 1), n))
    captured = [START + timedelta(milliseconds=int(ms)) for ms in offset_ms]
    entries = rng.integers(0, 25, n)
    ws_bytes = (entries * rng.integers(100, 20_000, n)).tolist()
    latency = rng.lognormal(7.0, 0.6, n).astype(np.int64).tolist()
    stop = rng.integers(0, len(STOPS), n)
    calls = rng.integers(0, 5, n)
    # a failure cluster: prompt v4.7 with large working sets fails often
    p_fail = np.where((prompt == 6) & (np.array(ws_bytes) > 100_000), 0.4, 0.03)
    failed = (rng.random(n) < p_fail).tolist()
    level = rng.integers(0, 10, n)
    consequential = (level == 0).tolist()
    cols: dict[str, list[Any]] = {
        "decision_id": ids,
        "agent_id": [AGENTS[i] for i in agent],
        "runtime_id": [f"rt_{i % 4}" for i in agent],
        "captured_at": captured,
        "capture_level": [
            "full" if c else ("sampled" if lv == 1 else "structured-only")
            for c, lv in zip(consequential, level, strict=True)
        ],
        "content_state": [
            "full" if c or lv == 1 else "structured-only" for c, lv in zip(consequential, level, strict=True)
        ],
        "trust": ["verified"] * n,
        "consequential": consequential,
        "failed": failed,
        "outcome_status": ["failure" if f else "success" for f in failed],
        "stop_reason": [STOPS[i] for i in stop],
        "prompt_version": [PROMPTS[i] for i in prompt],
        "prompt_hash": [f"sha256:{i:064x}" for i in prompt],
        "model_id": ["acme-chat"] * n,
        "model_version": [MODELS[i] for i in model],
        "temperature": [0.2] * n,
        "total_context_tokens": rng.integers(500, 30_000, n).tolist(),
        "working_set_entries": entries.tolist(),
        "working_set_bytes": ws_bytes,
        "context_set_hash": [f"sha256:{i:064x}" for i in range(start_id, start_id + n)],
        "tool_call_count": calls.tolist(),
        "total_latency_ms": latency,
        "retention_class": ["consequential" if c else "routine" for c in consequential],
        "retention_days": [365 if c else 30 for c in consequential],
        "expires_at": [t + timedelta(days=365) for t in captured],
        "segment_key": [f"segments/blackbox.captures.v1/0/{start_id:019d}" for _ in range(n)],
        "segment_offset": list(range(0, n * 9000, 9000)),
        "segment_length": [9000] * n,
        "capture_bytes": [20_000] * n,
        "content_sha256": [f"{i:064x}" for i in range(start_id, start_id + n)],
        "source": [f"blackbox.captures.v1/0/{start_id + i}" for i in range(n)],
        "ingested_at": captured,
        "version": [0] * n,
    }
    tc: dict[str, list[Any]] = {
        k: []
        for k in (
            "decision_id",
            "agent_id",
            "captured_at",
            "sequence",
            "tool_name",
            "latency_ms",
            "error_ref",
            "is_error",
        )
    }
    errs = rng.random(int(calls.sum()))
    tool_pick = rng.integers(0, len(TOOLS), int(calls.sum()))
    k = 0
    for i in range(n):
        for seq in range(int(calls[i])):
            is_err = bool(errs[k] < (0.2 if tool_pick[k] == 3 else 0.02))
            tc["decision_id"].append(ids[i])
            tc["agent_id"].append(cols["agent_id"][i])
            tc["captured_at"].append(captured[i])
            tc["sequence"].append(seq + 1)
            tc["tool_name"].append(TOOLS[tool_pick[k]])
            tc["latency_ms"].append(100 + seq)
            tc["error_ref"].append("err:timeout" if is_err else "")
            tc["is_error"].append(is_err)
            k += 1
    return cols, tc


def median_ms(fn: Any, runs: int) -> float:
    fn()  # warm-up
    samples = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t) * 1000)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--path", type=Path, default=None)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    tmp = args.path or Path(tempfile.mkdtemp(prefix="bb-bench-index-"))
    rng = np.random.default_rng(7)
    index = ChdbIndex(tmp, database="bench")
    try:
        index.command("DROP DATABASE IF EXISTS bench")
        index.ensure_schema()

        # rows.py throughput on the example capture (what ingest pays per capture)
        capture = json.loads((ROOT / "schemas/examples/capture.unsealed.json").read_text())
        t = time.perf_counter()
        for _ in range(20_000):
            decision_rows(capture, segment_key="s", capture_bytes=20_000)
        rows_rate = 20_000 / (time.perf_counter() - t)

        dec_time = tc_time = 0.0
        dec_rows = tc_rows = 0
        for start in range(0, args.rows, args.batch):
            n = min(args.batch, args.rows - start)
            cols, tc = synth_decisions(rng, start, n, args.rows)
            t = time.perf_counter()
            dec_rows += index.insert("decisions", cols)
            dec_time += time.perf_counter() - t
            t = time.perf_counter()
            tc_rows += index.insert("tool_calls", tc)
            tc_time += time.perf_counter() - t
        # failure flags for ~0.5% of decisions, arriving after their capture
        flagged = rng.choice(args.rows, size=max(1, args.rows // 200), replace=False)
        index.insert(
            "flags",
            {
                "decision_id": [f"dec_{int(i):012d}" for i in flagged],
                "agent_id": ["agt_00"] * len(flagged),
                "reason": ["customer complaint"] * len(flagged),
                "failure": [True] * len(flagged),
                "flagged_at": [START + timedelta(days=DAYS)] * len(flagged),
            },
        )
        print(
            f"decisions: {dec_rows:,} rows in {dec_time:.1f} s = {dec_rows / dec_time:,.0f} rows/s (batches of {args.batch:,}, 55 columns)"
        )
        print(f"tool_calls: {tc_rows:,} rows in {tc_time:.1f} s = {tc_rows / tc_time:,.0f} rows/s")
        print(f"rows.decision_rows(example capture): {rows_rate:,.0f} captures/s")
        parts = index.query(
            "SELECT count() AS n FROM system.parts WHERE database = 'bench' AND table = 'decisions' AND active"
        )
        print(f"active parts in decisions: {parts[0]['n']}")

        since, until = START, START + timedelta(days=DAYS + 1)

        def report(label: str) -> None:
            print(f"\n{label}")
            for name in TRENDS:
                ms = median_ms(lambda name=name: run_trend(index, name, since=since, until=until), args.runs)
                flag = "ok" if ms < 200 else "OVER 200 ms"
                print(f"  trend {name:<24} {ms:7.1f} ms  {flag}")
            ms = median_ms(
                lambda: run_trend(
                    index, "failure_rate", since=since, until=until, agent="agt_03", by="stop_reason"
                ),
                args.runs,
            )
            print(f"  trend failure_rate --agent --by    {ms:7.1f} ms")
            p = {"since": since, "until": until}
            base = (
                "SELECT toDate(captured_at) AS day, prompt_version, model_version, count() AS decisions, "
                "countIf(failed) AS failures FROM decisions {final} WHERE trust = 'verified' AND "
                "captured_at >= {since:DateTime64(3, 'UTC')} AND captured_at < {until:DateTime64(3, 'UTC')} "
                "GROUP BY day, prompt_version, model_version ORDER BY day, prompt_version, model_version"
            )
            for tag, sql in (
                ("baseline: no FINAL, no flags join", base.replace("{final}", "")),
                ("FINAL, no flags join", base.replace("{final}", "FINAL")),
            ):
                print(f"  {tag:<34} {median_ms(lambda sql=sql: index.query(sql, p), args.runs):7.1f} ms")
            argmax = (
                "SELECT toDate(ts) AS day, prompt_version, model_version, count() AS decisions, "
                "countIf(failed) AS failures FROM (SELECT decision_id, any(captured_at) AS ts, "
                "argMax(prompt_version, version) AS prompt_version, argMax(model_version, version) AS model_version, "
                "argMax(failed, version) AS failed, argMax(trust, version) AS trust FROM decisions "
                "WHERE captured_at >= {since:DateTime64(3, 'UTC')} AND captured_at < {until:DateTime64(3, 'UTC')} "
                "GROUP BY decision_id) WHERE trust = 'verified' "
                "GROUP BY day, prompt_version, model_version ORDER BY day, prompt_version, model_version"
            )
            print(
                f"  {'argMax instead of FINAL':<34} {median_ms(lambda: index.query(argmax, p), args.runs):7.1f} ms"
            )
            one = "SELECT * FROM decisions_current WHERE decision_id = {id:String} LIMIT 1"
            middle = {"id": f"dec_{args.rows // 2:012d}"}
            ms = median_ms(lambda: index.query(one, middle), args.runs)
            print(f"  one current decision (bloom filter) {ms:7.1f} ms")

        report(f"trend queries over {dec_rows:,} decisions (median of {args.runs}):")

        ids = [
            f"dec_{int(i):012d}" for i in rng.choice(args.rows, size=max(1, args.rows // 100), replace=False)
        ]
        t = time.perf_counter()
        update_decisions(index, ids, {"legal_hold": True, "hold_reason": "bench"})
        print(f"\nupdate_decisions on {len(ids):,} decisions: {(time.perf_counter() - t) * 1000:.0f} ms")
        report(f"after {len(ids):,} unmerged second versions:")
        held = index.query("SELECT count() AS n FROM decisions FINAL WHERE legal_hold")
        assert held[0]["n"] == len(ids), held
    finally:
        index.close()
        if args.path is None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()

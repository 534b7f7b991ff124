"""Shared pieces of the index tests: the example capture, a synthetic fleet with a failure cluster, and
the ground truth of every trend computed in plain Python from the capture JSON (never from rows.py)."""

from __future__ import annotations

import copy
import json
import random
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "schemas" / "examples" / "capture.unsealed.json"
DAY0 = datetime(2026, 7, 1, tzinfo=UTC)
AGENTS = ("agt_a", "agt_b", "agt_c")
PROMPTS = ("v4.5", "v4.6", "v4.7")
MODELS = ("2026-03-01", "2026-06-01")
STOPS = ("end_turn", "tool_use", "max_tokens")
TOOLS = ("get_balance", "issue_refund", "search_kb", "send_email")


def example_capture() -> dict[str, Any]:
    return json.loads(EXAMPLE.read_text(encoding="utf-8"))


def iso(ts: datetime) -> str:
    return ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"


@dataclass
class Fleet:
    """Synthetic captures plus the extra facts the index learns from other tables."""

    captures: list[dict[str, Any]]
    quarantined: set[str] = field(default_factory=set)
    failure_flags: set[str] = field(default_factory=set)  # failure flags (some arrive before the capture)
    other_flags: set[str] = field(default_factory=set)  # consequential-only flags: never a failure
    pact_results: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # id -> [(rule, kind)]


def make_fleet(n: int = 300, *, seed: int = 11) -> Fleet:
    """n captures over 10 days, 3 agents, 3 prompt versions x 2 model versions, with a failure cluster:
    prompt v4.7 on model 2026-06-01 from day 5 on fails ~70% of the time, and big working sets fail more."""
    rng = random.Random(seed)
    base = example_capture()
    fleet = Fleet(captures=[])
    for i in range(n):
        c = copy.deepcopy(base)
        day = i % 10
        captured = DAY0 + timedelta(days=day, seconds=rng.randrange(86_400), milliseconds=rng.randrange(1000))
        prompt = PROMPTS[rng.randrange(3)]
        model = MODELS[rng.randrange(2)]
        c["decisionId"] = f"dec_{i:05d}"
        c["agentId"] = AGENTS[i % 3]
        c["capturedAt"] = iso(captured)
        level = rng.choice(("full", "structured-only", "structured-only", "sampled"))
        c["captureLevel"] = level
        c["consequential"] = {"flagged": rng.random() < 0.2, "reason": None}
        c["agentConfiguration"]["systemPromptVersion"] = prompt
        c["agentConfiguration"]["modelVersion"] = model
        c["executionTrace"]["stopReason"] = rng.choice(STOPS)
        c["executionTrace"]["totalLatencyMs"] = None if rng.random() < 0.05 else rng.randrange(100, 9000)
        n_entries = rng.choice((0, 1, 2, 4, 7, 12, 25))
        entries = []
        for pos in range(n_entries):
            entry = copy.deepcopy(base["memoryState"]["workingSetEntries"][pos % 2])
            entry["entryId"] = f"mem_{i}_{pos}"
            entry["contextPosition"] = pos
            entry["renderedContent"] = "x" * rng.choice((10, 300, 2000, 9000, 40000))
            entries.append(entry)
        if level == "structured-only" and entries and rng.random() < 0.5:
            for entry in entries:  # content absent: working-set bytes are unknown
                entry["renderedContent"] = None
                entry["renderedContentHash"] = "sha256:" + "0" * 64
        c["memoryState"]["workingSetEntries"] = entries
        calls = []
        for seq in range(rng.randrange(0, 4)):
            tool = TOOLS[rng.randrange(4)]
            err = rng.random() < (0.3 if tool == "send_email" else 0.05)
            calls.append(
                {
                    "sequence": seq + 1,
                    "toolName": tool,
                    "input": {"q": seq},
                    "inputHash": None,
                    "output": {"ok": not err},
                    "outputHash": None,
                    "latencyMs": rng.randrange(5, 500),
                    "errorRef": "err:upstream" if err else None,
                }
            )
        c["executionTrace"]["toolCalls"] = calls
        ws_bytes = sum(len((e["renderedContent"] or "").encode()) for e in entries)
        p_fail = 0.05
        if prompt == "v4.7" and model == "2026-06-01" and day >= 5:
            p_fail = 0.7
        elif ws_bytes > 60_000:
            p_fail = 0.25
        status = "failure" if rng.random() < p_fail else rng.choice(("success", "success", "unknown"))
        c["outcome"] = {"status": status, "reason": "refund wrong" if status == "failure" else None}
        if rng.random() < 0.04:
            fleet.quarantined.add(c["decisionId"])
        r = rng.random()
        if r < 0.05:
            fleet.failure_flags.add(c["decisionId"])
        elif r < 0.08:
            fleet.other_flags.add(c["decisionId"])
        fleet.captures.append(c)
    pacts = random.Random(seed + 1)  # its own generator: the fleet above stays what it was
    for c in fleet.captures:
        results = [(rule, kind) for rule, kind in PACT_ROWS if pacts.random() < 0.2]
        if results:
            fleet.pact_results[c["decisionId"]] = results
    return fleet


PACT_ROWS = (("refund_cap", "violation"), ("refund_cap", "error"), ("email_ok", "violation"))


# --- ground truth -------------------------------------------------------------------------------------
def _ts(c: Mapping[str, Any]) -> datetime:
    return datetime.fromisoformat(c["capturedAt"]).astimezone(UTC)


def trusted(fleet: Fleet, since: datetime, until: datetime, agent: str | None = None) -> list[dict[str, Any]]:
    return [
        c
        for c in fleet.captures
        if c["decisionId"] not in fleet.quarantined
        and since <= _ts(c) < until
        and (agent is None or c["agentId"] == agent)
    ]


def failed(fleet: Fleet, c: Mapping[str, Any]) -> bool:
    return c["outcome"]["status"] == "failure" or c["decisionId"] in fleet.failure_flags


def ws_bytes(c: Mapping[str, Any]) -> int | None:
    entries = c["memoryState"]["workingSetEntries"]
    if any(e["renderedContent"] is None for e in entries):
        return None
    return sum(len(e["renderedContent"].encode()) for e in entries)


def bytes_bucket(b: int | None) -> str:
    if b is None:
        return "unknown"
    for limit, label in (
        (1024, "<1KiB"),
        (4096, "1-4KiB"),
        (16384, "4-16KiB"),
        (65536, "16-64KiB"),
        (262144, "64-256KiB"),
    ):
        if b < limit:
            return label
    return ">=256KiB"


def entries_bucket(n: int) -> str:
    if n == 0:
        return "0"
    for limit, label in ((2, "1-2"), (5, "3-5"), (10, "6-10"), (20, "11-20")):
        if n <= limit:
            return label
    return ">20"


_BYTES_ORDER = ["<1KiB", "1-4KiB", "4-16KiB", "16-64KiB", "64-256KiB", ">=256KiB", "unknown"]
_ENTRIES_ORDER = ["0", "1-2", "3-5", "6-10", "11-20", ">20"]


def quantile_exact(values: list[int], q: float) -> int:
    ordered = sorted(values)
    return ordered[min(int(q * len(ordered)), len(ordered) - 1)]


def truth(
    fleet: Fleet, name: str, since: datetime, until: datetime, agent: str | None = None
) -> list[dict[str, Any]]:
    """Expected rows of a trend (rates unrounded: compare with a tolerance of 5e-5)."""
    rows = trusted(fleet, since, until, agent)
    out: list[dict[str, Any]] = []
    if name == "failure_rate":
        groups: dict[tuple[date, str, str], list[bool]] = defaultdict(list)
        for c in rows:
            cfg = c["agentConfiguration"]
            groups[(_ts(c).date(), cfg["systemPromptVersion"], cfg["modelVersion"])].append(failed(fleet, c))
        for (day, pv, mv), fs in sorted(groups.items()):
            out.append(
                {
                    "day": day,
                    "prompt_version": pv,
                    "model_version": mv,
                    "decisions": len(fs),
                    "failures": sum(fs),
                    "failure_rate": sum(fs) / len(fs),
                }
            )
    elif name == "latency":
        by_day: dict[date, list[dict[str, Any]]] = defaultdict(list)
        for c in rows:
            by_day[_ts(c).date()].append(c)
        for day, cs in sorted(by_day.items()):
            lat = [
                c["executionTrace"]["totalLatencyMs"]
                for c in cs
                if c["executionTrace"]["totalLatencyMs"] is not None
            ]
            out.append(
                {
                    "day": day,
                    "decisions": len(cs),
                    "measured": len(lat),
                    "p50_ms": quantile_exact(lat, 0.5),
                    "p90_ms": quantile_exact(lat, 0.9),
                    "p99_ms": quantile_exact(lat, 0.99),
                }
            )
    elif name == "tool_errors":
        calls: Counter[str] = Counter()
        errors: Counter[str] = Counter()
        for c in rows:
            for call in c["executionTrace"]["toolCalls"]:
                calls[call["toolName"]] += 1
                errors[call["toolName"]] += bool(call["errorRef"])
        for tool in sorted(calls):
            out.append(
                {
                    "tool_name": tool,
                    "calls": calls[tool],
                    "errors": errors[tool],
                    "error_rate": errors[tool] / calls[tool],
                }
            )
    elif name == "working_set_vs_failure":
        buckets: dict[tuple[str, str], list[bool]] = defaultdict(list)
        for c in rows:
            key = (bytes_bucket(ws_bytes(c)), entries_bucket(len(c["memoryState"]["workingSetEntries"])))
            buckets[key].append(failed(fleet, c))
        for (bb, eb), fs in sorted(
            buckets.items(), key=lambda kv: (_BYTES_ORDER.index(kv[0][0]), _ENTRIES_ORDER.index(kv[0][1]))
        ):
            out.append(
                {
                    "bytes_bucket": bb,
                    "entries_bucket": eb,
                    "decisions": len(fs),
                    "failures": sum(fs),
                    "failure_rate": sum(fs) / len(fs),
                }
            )
    elif name == "stop_reasons":
        stops: dict[str, list[bool]] = defaultdict(list)
        for c in rows:
            stops[c["executionTrace"]["stopReason"]].append(failed(fleet, c))
        total = len(rows)
        for stop, fs in sorted(stops.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            out.append(
                {"stop_reason": stop, "decisions": len(fs), "failures": sum(fs), "share": len(fs) / total}
            )
    elif name == "pact_violations":
        per_day = Counter(_ts(c).date() for c in rows)
        cells: dict[tuple[date, str], Counter[str]] = defaultdict(Counter)
        for c in rows:
            for rule, kind in fleet.pact_results.get(c["decisionId"], ()):
                cells[(_ts(c).date(), rule)][kind] += 1
        for (day, rule), kinds in sorted(cells.items()):
            out.append(
                {
                    "day": day,
                    "rule": rule,
                    "decisions": per_day[day],
                    "violations": kinds["violation"],
                    "errors": kinds["error"],
                    "incidence": kinds["violation"] / per_day[day],
                }
            )
    elif name == "agent_record":
        from consumers.pacts.record import wilson_lower  # the record's own score, written down once

        per_agent: dict[tuple[date, str], list[tuple[bool, bool]]] = defaultdict(list)
        for c in rows:
            violated = any(k == "violation" for _, k in fleet.pact_results.get(c["decisionId"], ()))
            per_agent[(_ts(c).date(), c["agentId"])].append((failed(fleet, c), violated))
        for (day, agent_id), marks in sorted(per_agent.items()):
            clean = sum(1 for f, v in marks if not f and not v)
            out.append(
                {
                    "day": day,
                    "agent_id": agent_id,
                    "decisions": len(marks),
                    "failures": sum(1 for f, _ in marks if f),
                    "violating": sum(1 for _, v in marks if v),
                    "clean": clean,
                    "score": wilson_lower(clean, len(marks)),
                }
            )
    elif name == "volume":
        vol: dict[tuple[date, str, str, str], list[int]] = defaultdict(list)
        for c in rows:
            level = c["captureLevel"]
            cls = (
                "consequential"
                if c["consequential"]["flagged"]
                else ("structured" if level == "structured-only" else "routine")
            )
            state = "structured-only" if level == "structured-only" else "full"
            vol[(_ts(c).date(), level, cls, state)].append(capture_bytes(c))
        for (day, level, cls, state), sizes in sorted(vol.items()):
            out.append(
                {
                    "day": day,
                    "capture_level": level,
                    "retention_class": cls,
                    "content_state": state,
                    "captures": len(sizes),
                    "total_bytes": sum(sizes),
                }
            )
    else:
        raise KeyError(name)
    return out


def capture_bytes(c: Mapping[str, Any]) -> int:
    """A stand-in for the encoded size (ingest passes the Avro length)."""
    return len(json.dumps(c, sort_keys=True).encode())


RATE_KEYS = ("failure_rate", "error_rate", "share", "incidence", "score")


def assert_rows_match(got: Iterable[Mapping[str, Any]], want: Iterable[Mapping[str, Any]]) -> None:
    got, want = list(got), list(want)
    assert [list(r) for r in got[:1]] == [list(r) for r in want[:1]], "column order"
    assert len(got) == len(want), (len(got), len(want))
    for g, w in zip(got, want, strict=True):
        for key, value in w.items():
            if key in RATE_KEYS:
                assert abs(g[key] - value) <= 5e-5 + 1e-12, (key, g, w)
            else:
                assert g[key] == value, (key, g, w)

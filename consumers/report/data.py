"""Gather the report's data from the index through the trend catalog (so the page and
``blackbox trends`` can never disagree)."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from typing import Any

from consumers.index import Index, run_trend
from consumers.report.store import recent_replays


def _rate_by(rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    totals: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for row in rows:
        cell = totals[(str(row["day"]), str(row[key]))]
        cell[0] += int(row["decisions"])
        cell[1] += int(row["failures"])
    return [
        {"day": day, key: value, "rate": round(f / n, 4) if n else 0.0}
        for (day, value), (n, f) in sorted(totals.items())
    ]


def report_data(index: Index, *, since: datetime, until: datetime) -> dict[str, Any]:
    """Keyword arguments for :func:`consumers.report.render_report` (all but the header)."""
    failures = run_trend(index, "failure_rate", since=since, until=until)
    latency = [
        {"day": r["day"], "p50": r["p50_ms"], "p90": r["p90_ms"], "p99": r["p99_ms"]}
        for r in run_trend(index, "latency", since=since, until=until)
        if r["p50_ms"] is not None
    ]
    tiers: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for row in run_trend(index, "volume", since=since, until=until):
        tier = f"{row['retention_class']} / {row['content_state']}"
        tiers[tier][0] += int(row["captures"])
        tiers[tier][1] += int(row["total_bytes"] or 0)
    replays = recent_replays(index, limit=20)
    return {
        "failure_by_prompt": _rate_by(failures, "prompt_version"),
        "failure_by_model": _rate_by(failures, "model_version"),
        "latency": latency,
        "tool_errors": run_trend(index, "tool_errors", since=since, until=until),
        "volume": [{"tier": t, "captures": c, "bytes": b} for t, (c, b) in sorted(tiers.items())],
        "replays": replays,
    }

"""Gather the report's data from the index through the trend catalog (so the page and
``blackbox trends`` can never disagree)."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime
from typing import Any

from consumers.index import Index, run_trend
from consumers.report.store import latest_probe, recent_gates, recent_replays


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
        "probe": probe_chart(latest_probe(index)),
        "gates": recent_gates(index),
        "failure_by_prompt": _rate_by(failures, "prompt_version"),
        "failure_by_model": _rate_by(failures, "model_version"),
        "latency": latency,
        "tool_errors": run_trend(index, "tool_errors", since=since, until=until),
        "volume": [{"tier": t, "captures": c, "bytes": b} for t, (c, b) in sorted(tiers.items())],
        "replays": replays,
    }


def probe_chart(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The newest probe as a chart: per series (the second sweep's value), the share of failing runs
    at each point, x being the measured value (working-set bytes, the swept number) or the step."""
    if not rows:
        return {}
    cells: dict[tuple[str, int], dict[str, Any]] = {}
    for row in rows:
        try:
            point = json.loads(row["probe_point"] or "{}")
        except ValueError:
            continue
        cell = cells.setdefault(
            (str(point.get("series") or ""), int(point.get("step") or 0)),
            {"x": point.get("measure"), "label": str(point.get("x") or ""), "runs": 0, "fails": 0},
        )
        cell["runs"] += 1
        cell["fails"] += row["verdict"] in ("fails", "changes")
    numeric = all(c["x"] is not None for c in cells.values())
    series: dict[str, list[list[Any]]] = defaultdict(list)
    for (name, step), cell in sorted(cells.items(), key=lambda item: (item[0][0], item[0][1])):
        x = cell["x"] if numeric else step
        series[name or "all"].append([x, round(cell["fails"] / cell["runs"], 4), cell["label"]])
    first = rows[0]
    variable = str(json.loads(first["probe_point"] or "{}").get("variable") or first["variable"])
    return {
        "decision": first["decision_id"],
        "run": first["run_id"],
        "variable": variable,
        "bytes": numeric and variable.startswith("memory."),
        "numeric": numeric,
        "series": dict(series),
    }

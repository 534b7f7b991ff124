"""The report renders its charts in a real headless browser (Debian's chromium)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from headless_browser import dump_dom

from consumers.report import render_report


def sample_report(**extra: Any) -> str:
    days = [f"2026-11-{d:02d}" for d in range(1, 8)]
    return render_report(
        **extra,
        failure_by_prompt=[
            {"day": d, "prompt_version": v, "rate": (0.3 if v == "v4.7" else 0.01)}
            for d in days
            for v in ("v4.6", "v4.7")
        ],
        failure_by_model=[{"day": d, "model_version": "m1", "rate": 0.05} for d in days],
        latency=[{"day": d, "p50": 800, "p90": 1400, "p99": 2100} for d in days],
        tool_errors=[
            {"tool_name": "issue_refund", "error_rate": 0.02},
            {"tool_name": "get_balance", "error_rate": 0.0},
        ],
        volume=[{"tier": "consequential", "captures": 1200, "bytes": 24_000_000}],
        replays=[
            {
                "at": "2026-11-08",
                "decision_id": "dec_1<",
                "kind": "variation",
                "variable": "system_prompt",
                "verdict": "outcome changed → this variable is implicated",
                "outcome_changed": True,
            }
        ],
        generated_at=datetime(2026, 11, 30, tzinfo=UTC),
        window="last 7 days",
    )


def test_report_is_self_contained() -> None:
    page = sample_report()
    assert not re.search(r"""(src|href)=["']https?://""", page), "the report must not load anything remote"
    assert "dec_1&lt;" in page  # values are escaped


def test_charts_render_in_headless_chromium(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text(sample_report(), encoding="utf-8")
    dom = dump_dom(page)
    assert 'data-rendered="6"' in dom, "six charts should have been drawn by the page script"
    assert dom.count('class="series"') == 2 + 1 + 3  # prompt lines + model line + latency percentiles
    assert dom.count('class="bar"') == 2 + 1 + 1
    assert "v4.7" in dom


def test_the_probe_chart_and_the_gates_render(tmp_path: Path) -> None:
    from consumers.report.data import probe_chart

    rows = [
        {
            "run_id": "run1",
            "at": "2026-11-08",
            "decision_id": "dec_9",
            "variable": "memory.truncate+system_prompt",
            "verdict": "fails" if (series == "v4.7" and size > 8192) else "passes",
            "probe_point": json.dumps(
                {"step": n, "x": f"{size}", "variable": "memory.truncate", "measure": size, "series": series}
            ),
        }
        for series in ("v4.6", "v4.7")
        for n, size in enumerate(range(0, 16384, 2048))
    ]
    chart = probe_chart(rows)
    assert chart["bytes"] and chart["series"]["v4.7"][-1] == [14336, 1.0, "14336"]
    page = tmp_path / "report.html"
    base = sample_report()
    assert "no probe yet" in base and "no regression runs yet" in base
    gates = [
        {
            "at": "2026-11-09",
            "suite": "wrong-refund",
            "configuration": "system_prompt=v4.6",
            "decisions": 5,
            "fixed": 5,
            "regressed": 0,
            "failing": 0,
            "not_replayed": 0,
            "passed": True,
        }
    ]
    page.write_text(sample_report(probe=chart, gates=gates), encoding="utf-8")
    dom = dump_dom(page)
    assert 'data-rendered="7"' in dom
    assert dom.count('class="point"') == 16 and "wrong-refund" in dom and "PASS" in dom


HOSTILE_TOOL = "t<!--<script>x</script><script>document.title='owned'</script>&amp;"


def test_data_cannot_leave_the_data_block(tmp_path: Path) -> None:
    """``<!--`` and ``<script`` inside the data would make the HTML parser run the block past its end
    (the report escaped ``</`` only): every ``<``, ``>`` and ``&`` of the data is a JSON escape."""
    hostile = render_report(
        failure_by_prompt=[],
        failure_by_model=[],
        latency=[],
        tool_errors=[{"tool_name": HOSTILE_TOOL, "error_rate": 0.5}],
        volume=[],
        replays=[],
        generated_at=datetime(2026, 11, 30, tzinfo=UTC),
        window="w",
    )
    block = hostile.split('<script type="application/json" id="blackbox-data">', 1)[1].split("</script>", 1)[
        0
    ]
    assert "<" not in block and ">" not in block and "&" not in block
    assert json.loads(block)["tool_errors"] == [{"tool_name": HOSTILE_TOOL, "error_rate": 0.5}]
    file = tmp_path / "report.html"
    file.write_text(hostile, encoding="utf-8")
    dom = dump_dom(file)
    assert "data-rendered=" in dom and "owned" not in dom.split("<body", 1)[0]

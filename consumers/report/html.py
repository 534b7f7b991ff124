"""Render the report page: data embedded as JSON, charts drawn as inline SVG by a small script.

The page has no external resources (no CDN, no fonts), so it opens from a mail attachment or an
incident ticket. Charts are drawn in the browser so that a headless browser test can prove they
rendered, not just that the HTML contains placeholders.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

_SCRIPT = r"""
const DATA = JSON.parse(document.getElementById('blackbox-data').textContent);
const NS = 'http://www.w3.org/2000/svg';
const COLORS = ['#2563eb','#dc2626','#16a34a','#d97706','#7c3aed','#0891b2','#db2777','#4b5563'];
function el(tag, attrs, parent) {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (parent) parent.appendChild(e);
  return e;
}
function frame(id, W, H) {
  const host = document.getElementById(id);
  const svg = el('svg', {viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: 'chart', role: 'img'});
  host.appendChild(svg);
  return svg;
}
function empty(id) {
  document.getElementById(id).insertAdjacentHTML('beforeend', '<p class="empty">no data in this window</p>');
}
function lines(id, series, yfmt) {
  const names = Object.keys(series);
  if (!names.length) return empty(id);
  const W = 720, H = 260, L = 56, R = 150, T = 12, B = 36;
  const xs = [...new Set(names.flatMap(n => series[n].map(p => p[0])))].sort();
  const ymax = Math.max(1e-9, ...names.flatMap(n => series[n].map(p => p[1])));
  const X = x => L + (xs.length < 2 ? 0 : xs.indexOf(x) * (W - L - R) / (xs.length - 1));
  const Y = y => T + (H - T - B) * (1 - y / ymax);
  const svg = frame(id, W, H);
  el('line', {x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: '#999'}, svg);
  el('line', {x1: L, y1: T, x2: L, y2: H - B, stroke: '#999'}, svg);
  for (const f of [0, 0.5, 1]) {
    el('text', {x: L - 6, y: Y(ymax * f) + 4, 'text-anchor': 'end', class: 'tick'}, svg).textContent = yfmt(ymax * f);
  }
  const step = Math.max(1, Math.ceil(xs.length / 7));
  xs.forEach((x, i) => { if (i % step === 0)
    el('text', {x: X(x), y: H - B + 16, 'text-anchor': 'middle', class: 'tick'}, svg).textContent = String(x).slice(5, 10); });
  names.forEach((n, i) => {
    const pts = series[n].slice().sort((a, b) => a[0] < b[0] ? -1 : 1);
    el('path', {d: pts.map((p, j) => `${j ? 'L' : 'M'}${X(p[0]).toFixed(1)},${Y(p[1]).toFixed(1)}`).join(' '),
                fill: 'none', stroke: COLORS[i % COLORS.length], 'stroke-width': 2, class: 'series'}, svg);
    el('rect', {x: W - R + 12, y: T + i * 18, width: 10, height: 10, fill: COLORS[i % COLORS.length]}, svg);
    el('text', {x: W - R + 28, y: T + i * 18 + 9, class: 'legend'}, svg).textContent = n;
  });
}
function bars(id, rows, label, value, fmt) {
  if (!rows.length) return empty(id);
  const W = 720, rowH = 24, L = 200, H = rows.length * rowH + 10;
  const vmax = Math.max(1e-9, ...rows.map(value));
  const svg = frame(id, W, H);
  rows.forEach((r, i) => {
    const w = (W - L - 90) * value(r) / vmax;
    el('text', {x: L - 8, y: i * rowH + 17, 'text-anchor': 'end', class: 'legend'}, svg).textContent = label(r);
    el('rect', {x: L, y: i * rowH + 5, width: Math.max(1, w), height: rowH - 8, fill: COLORS[i % COLORS.length], class: 'bar'}, svg);
    el('text', {x: L + w + 6, y: i * rowH + 17, class: 'tick'}, svg).textContent = fmt(value(r));
  });
}
function probe(id, p) {
  if (!p || !p.series) return;  // the caption says there is no probe yet
  const names = Object.keys(p.series);
  const W = 720, H = 260, L = 56, R = 150, T = 12, B = 36;
  const pts = names.flatMap(n => p.series[n]);
  const xmin = Math.min(...pts.map(q => q[0])), xmax = Math.max(...pts.map(q => q[0]));
  const X = x => L + (xmax === xmin ? 0 : (x - xmin) * (W - L - R) / (xmax - xmin));
  const Y = y => T + (H - T - B) * (1 - y);
  const labels = new Map(pts.map(q => [q[0], q[2]]));
  const xfmt = p.bytes ? (x => (x / 1024).toFixed(1) + ' KB') : (p.numeric ? (x => String(x)) : (x => labels.get(x)));
  const svg = frame(id, W, H);
  el('line', {x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: '#999'}, svg);
  el('line', {x1: L, y1: T, x2: L, y2: H - B, stroke: '#999'}, svg);
  for (const f of [0, 0.5, 1]) el('text', {x: L - 6, y: Y(f) + 4, 'text-anchor': 'end', class: 'tick'}, svg).textContent = pct(f);
  const xs = [...new Set(pts.map(q => q[0]))].sort((a, b) => a - b);
  const step = Math.max(1, Math.ceil(xs.length / 8));
  xs.forEach((x, i) => { if (i % step === 0)
    el('text', {x: X(x), y: H - B + 16, 'text-anchor': 'middle', class: 'tick'}, svg).textContent = xfmt(x); });
  names.forEach((n, i) => {
    const color = COLORS[i % COLORS.length];
    const line = p.series[n].slice().sort((a, b) => a[0] - b[0]);
    el('path', {d: line.map((q, j) => `${j ? 'L' : 'M'}${X(q[0]).toFixed(1)},${Y(q[1]).toFixed(1)}`).join(' '),
                fill: 'none', stroke: color, 'stroke-width': 2, class: 'series probe'}, svg);
    line.forEach(q => el('circle', {cx: X(q[0]), cy: Y(q[1]), r: 3, fill: color, class: 'point'}, svg));
    el('rect', {x: W - R + 12, y: T + i * 18, width: 10, height: 10, fill: color}, svg);
    el('text', {x: W - R + 28, y: T + i * 18 + 9, class: 'legend'}, svg).textContent = n;
  });
}
const pct = v => (100 * v).toFixed(1) + '%';
const ms = v => Math.round(v) + ' ms';
lines('failure-by-prompt', DATA.failure_by_prompt, pct);
lines('failure-by-model', DATA.failure_by_model, pct);
lines('latency', DATA.latency, ms);
bars('tool-errors', DATA.tool_errors, r => r.tool_name, r => r.error_rate, pct);
bars('volume', DATA.volume, r => r.tier, r => r.captures, v => v.toLocaleString() + ' captures');
bars('bytes', DATA.volume, r => r.tier, r => r.bytes, v => (v / 1048576).toFixed(1) + ' MiB');
probe('probe', DATA.probe);
document.body.dataset.rendered = document.querySelectorAll('svg.chart').length;
"""

_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 960px; color: #111; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 16px; margin-top: 28px; }
.meta { color: #555; } .tick { font-size: 11px; fill: #555; } .legend { font-size: 12px; fill: #111; }
.empty { color: #888; font-style: italic; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { border-bottom: 1px solid #ddd; padding: 4px 6px; text-align: left; }
.changed { color: #b91c1c; font-weight: 600; } .cleared { color: #15803d; }
"""


_SCRIPT_SAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


def _series(rows: list[dict[str, Any]], key: str, x: str, y: str) -> dict[str, list[list[Any]]]:
    out: dict[str, list[list[Any]]] = {}
    for row in rows:
        out.setdefault(str(row[key]), []).append([str(row[x]), float(row[y])])
    return out


def _replay_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return '<p class="empty">no replays recorded yet: run <code>blackbox replay</code> or <code>regress</code></p>'
    head = "".join(f"<th>{h}</th>" for h in ("when", "decision", "kind", "variable", "verdict"))
    body = []
    for r in rows:
        cls = "changed" if r.get("outcome_changed") else "cleared"
        cells = (r.get("at"), r.get("decision_id"), r.get("kind"), r.get("variable") or "—", r.get("verdict"))
        body.append(
            "<tr>" + "".join(f'<td class="{cls}">{html.escape(str(c))}</td>' for c in cells) + "</tr>"
        )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _gates_table(rows: Sequence[Mapping[str, Any]]) -> str:
    if not rows:
        return '<p class="empty">no regression runs yet: <code>blackbox regress --suite NAME --vary ...</code></p>'
    heads = (
        "when",
        "suite",
        "configuration",
        "decisions",
        "fixed",
        "regressed",
        "failing",
        "not replayed",
        "gate",
    )
    body = []
    for r in rows:
        cls = "cleared" if r.get("passed") else "changed"
        cells = (
            r.get("at"),
            r.get("suite") or "(sample)",
            r.get("configuration") or "as captured",
            r.get("decisions"),
            r.get("fixed"),
            r.get("regressed"),
            r.get("failing"),
            r.get("not_replayed"),
            "PASS" if r.get("passed") else "FAIL",
        )
        body.append(
            "<tr>" + "".join(f'<td class="{cls}">{html.escape(str(c))}</td>' for c in cells) + "</tr>"
        )
    head = "".join(f"<th>{h}</th>" for h in heads)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _probe_caption(probe: Mapping[str, Any] | None) -> str:
    if not probe:
        return (
            '<p class="meta">no probe yet: <code>blackbox probe DECISION_ID --sweep VARIABLE=SPEC</code></p>'
        )
    return (
        f'<p class="meta">share of failing runs per point: decision {html.escape(str(probe.get("decision")))}, '
        f"sweep {html.escape(str(probe.get('variable')))}, one line per value of the second sweep "
        f"(replay_runs run {html.escape(str(probe.get('run')))})</p>"
    )


def render_report(
    *,
    failure_by_prompt: list[dict[str, Any]],
    failure_by_model: list[dict[str, Any]],
    latency: list[dict[str, Any]],
    tool_errors: list[dict[str, Any]],
    volume: list[dict[str, Any]],
    replays: list[dict[str, Any]],
    generated_at: datetime,
    window: str,
    probe: Mapping[str, Any] | None = None,
    gates: Sequence[Mapping[str, Any]] = (),
) -> str:
    """The whole page as one string.

    Rows come from the trend catalog: ``failure_by_*`` have ``day``, the dimension and ``rate``;
    ``latency`` has ``day``, ``p50``, ``p90``, ``p99``; ``tool_errors`` has ``tool_name`` and
    ``error_rate``; ``volume`` has ``tier``, ``captures``, ``bytes``; ``replays`` are replay_runs rows.
    ``probe`` is the newest probe as chart data (:func:`consumers.report.data.probe_chart`), ``gates``
    the newest regress runs (:func:`consumers.report.store.recent_gates`).
    """
    latency_series: dict[str, list[list[Any]]] = {}
    for q in ("p50", "p90", "p99"):
        latency_series[q] = [[str(r["day"]), float(r[q])] for r in latency]
    data = {
        "failure_by_prompt": _series(failure_by_prompt, "prompt_version", "day", "rate"),
        "failure_by_model": _series(failure_by_model, "model_version", "day", "rate"),
        "latency": latency_series if latency else {},
        "tool_errors": tool_errors,
        "volume": volume,
        "probe": dict(probe or {}),
    }
    # Inside <script>, "</script" ends the block and "<!--" switches the HTML parser into a state where
    # the next "<script" swallows the real end: no "<", ">" or "&" may appear raw. JSON emits them only
    # inside strings, where \u escapes read back as the same text.
    payload = json.dumps(data, default=str).translate(_SCRIPT_SAFE)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>blackbox report</title><style>{_STYLE}</style></head>
<body>
<h1>blackbox report</h1>
<p class="meta">Window: {html.escape(window)} · generated {generated_at.isoformat(timespec="seconds")}</p>
<h2>Failure rate by day × prompt version</h2><div id="failure-by-prompt"></div>
<h2>Failure rate by day × model version</h2><div id="failure-by-model"></div>
<h2>Latency percentiles by day</h2><div id="latency"></div>
<h2>Tool error rates</h2><div id="tool-errors"></div>
<h2>Capture volume by tier</h2><div id="volume"></div>
<h2>Capture bytes by tier</h2><div id="bytes"></div>
<h2>Failure boundary (latest probe)</h2>{_probe_caption(probe)}<div id="probe"></div>
<h2>Regression gates</h2>{_gates_table(gates)}
<h2>Latest replays and regressions</h2>{_replay_table(replays)}
<script type="application/json" id="blackbox-data">{payload}</script>
<script>{_SCRIPT}</script>
</body></html>
"""

"""The probe's boundary chart, drawn on the server as SVG: a column per value of the first sweep, a row
per value of the second, each cell coloured by how its point was judged (fails, passes, mixed,
undecided) or left open while the probe runs. The job's page shows it as an image, so it carries no
script and no style of its own (colours are attributes: the CSP forbids inline style), and reloads it
as points finish; every label is escaped by the template (series names are fleet data)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from consumers.console.search_jobs import ProbeChart

__all__ = ["ChartCell", "ChartLayout", "chart_layout"]

FILL = {
    "hit": "#d1242f",
    "miss": "#1a7f37",
    "mixed": "#bf8700",
    "undecided": "#8c959f",
    "pending": "#ffffff",
}
TOP, ROW, WIDTH = 8, 22, 760
CHAR = 7  # px per character of a 12 px system-ui label, rounded up: the row labels' column is sized by it
MAX_LABELS = 9
_NAMED = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*=")


@dataclass(frozen=True, slots=True)
class ChartCell:
    x: int
    y: int
    width: int
    state: str
    fill: str


@dataclass(frozen=True, slots=True)
class ChartLabel:
    x: int
    y: int
    text: str


@dataclass(frozen=True, slots=True)
class ChartLayout:
    width: int
    height: int
    cells: tuple[ChartCell, ...]
    rows: tuple[ChartLabel, ...]
    columns: tuple[ChartLabel, ...]
    legend: tuple[tuple[ChartLabel, str], ...]
    done: int
    planned: int
    summary: str


def _short(described: str, limit: int = 18) -> str:
    """``memory.truncate=8KB`` → ``8KB``: the value, which is what differs along an axis."""
    named = _NAMED.match(described)
    value = described[named.end() :] if named else described
    return value if len(value) <= limit else value[: limit - 1] + "…"


def chart_layout(chart: ProbeChart) -> ChartLayout:
    """Where each cell and label goes; cells not judged yet are drawn open (state ``pending``)."""
    columns = max(1, len(chart.xs))
    labels = [_short(s) if s else _short(chart.variable) for s in chart.series]
    # the row labels end at the cells: as wide as the longest one (at most 18 characters, see _short)
    left = 16 + CHAR * max((len(text) for text in labels), default=4)
    cell = max(4, (WIDTH - left - 10) // columns)
    judged = {(p.column, p.row): p.state for p in chart.points}
    cells = []
    for r in range(len(chart.series)):
        for c in range(columns):
            state = judged.get((c, r), "pending")
            cells.append(
                ChartCell(
                    x=left + c * cell,
                    y=TOP + r * ROW,
                    width=cell - 1,
                    state=state,
                    fill=FILL.get(state, FILL["undecided"]),
                )
            )
    bottom = TOP + len(chart.series) * ROW
    every = max(1, -(-columns // MAX_LABELS))
    shown = sorted({*range(0, columns, every), columns - 1}) if chart.xs else []
    legend_y = bottom + 40
    return ChartLayout(
        width=max(WIDTH, left + columns * cell + 10),  # wider than the page only past ~150 columns
        height=legend_y + 12,
        cells=tuple(cells),
        rows=tuple(ChartLabel(x=left - 6, y=TOP + r * ROW + 15, text=text) for r, text in enumerate(labels)),
        columns=tuple(
            ChartLabel(x=left + c * cell + cell // 2, y=bottom + 16, text=_short(chart.xs[c])) for c in shown
        ),
        legend=tuple(
            (ChartLabel(x=left + i * 110, y=legend_y, text=text), FILL[state])
            for i, (state, text) in enumerate(
                (
                    ("hit", chart.hit),
                    ("miss", chart.miss),
                    ("mixed", "mixed"),
                    ("undecided", "undecided"),
                    ("pending", "not yet"),
                )
            )
        ),
        done=len(chart.points),
        planned=chart.planned,
        summary=chart.summary,
    )

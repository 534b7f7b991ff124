"""``replay_runs``: one row per replay result (as-captured, variation, bisect step, regression).

Rows are written by whoever knows what the run was for (the report, bisect, regress), in one
insert per batch (:func:`consumers.replay.store.insert_runs`), through the same narrow table-writer
seam the access log uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Literal, Protocol

from consumers.access.log import TableWriter
from consumers.replay.store import insert_runs

RunKind = Literal["replay", "variation", "bisect", "regress", "variance", "probe"]


@dataclass(frozen=True, slots=True)
class ReplayRunRow:
    """One row of ``replay_runs`` (columns of the same names). ``suite`` names the finding whose
    suite a regress run replayed; ``probe_point`` is a probe row's place in its sweep, as JSON
    (``{"step", "x", "measure", "series"}``: :mod:`consumers.replay.probe`)."""

    run_id: str
    at: datetime
    decision_id: str
    agent_id: str
    kind: str
    variable: str
    variation_value: str
    attempt: int
    model_used: str
    substitute_model: str
    final_output_equal: bool
    tool_sequence_equal: bool
    first_divergent_step: int | None
    stop_reason: str
    verdict: str
    outcome_changed: bool
    detail: str
    suite: str = ""
    probe_point: str = ""


class ReplayRunLog(Protocol):
    def append(self, rows: Sequence[ReplayRunRow]) -> None: ...


class IndexReplayRunLog:
    """Rows in the index's ``replay_runs`` table."""

    def __init__(self, index: TableWriter) -> None:
        self._index = index

    def append(self, rows: Sequence[ReplayRunRow]) -> None:
        insert_runs(self._index, [asdict(row) for row in rows])


class ListReplayRunLog:
    """Rows kept in memory (library use without an index; tests of callers)."""

    def __init__(self) -> None:
        self.rows: list[ReplayRunRow] = []

    def append(self, rows: Sequence[ReplayRunRow]) -> None:
        self.rows.extend(rows)

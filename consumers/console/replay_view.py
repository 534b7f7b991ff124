"""What the replay result page shows, built from a :class:`~consumers.replay.report.ReplayReport`:
each configuration's verdict, its final output as a word-level diff against the capture (or, for a
variation, against the as-captured replay, its control), the tool calls side by side and the first
divergent step. Values only: the template escapes every text (capture content is hostile input).
"""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from consumers.console.wire_diff import RequestDiff
from consumers.replay.outcome import Outcome
from consumers.replay.report import ReplayReport, ReportRow

__all__ = ["DiffPart", "ReplayView", "RowView", "ToolPair", "replay_view", "word_diff"]

Op = Literal["same", "removed", "added"]


@dataclass(frozen=True, slots=True)
class DiffPart:
    op: Op
    text: str


@dataclass(frozen=True, slots=True)
class ToolPair:
    step: int
    reference: str
    replayed: str
    differs: bool


@dataclass(frozen=True, slots=True)
class Bucket:
    runs: int
    reproduces: bool
    output: str


@dataclass(frozen=True, slots=True)
class RowView:
    label: str
    variable: str
    """The one variable this run changed ('' for the as-captured replay)."""
    verdict: str
    changed: bool
    reference_label: str
    diff: tuple[DiffPart, ...]
    tools: tuple[ToolPair, ...]
    first_divergent_step: int | None
    stop_reason: str
    model: str
    runs: int
    distribution: tuple[Bucket, ...]
    requests: tuple[RequestDiff, ...] = ()
    """A wire capture's requests as its first run sent them, each against the recorded bytes."""


@dataclass(frozen=True, slots=True)
class ReplayView:
    decision_id: str
    reproduces: bool
    fidelity: str
    fidelity_note: str
    verified: bool
    caveats: tuple[str, ...]
    rows: tuple[RowView, ...]
    run_id: str = ""
    """The ``replay_runs`` run these rows are (a finding can be recorded from it)."""
    kind: str = "replay"


def word_diff(before: str, after: str) -> tuple[DiffPart, ...]:
    """Words (whitespace kept with the word before it) removed, added or the same, in order."""
    a, b = _words(before), _words(after)
    parts: list[DiffPart] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            parts.append(DiffPart("same", "".join(a[i1:i2])))
            continue
        if i2 > i1:
            parts.append(DiffPart("removed", "".join(a[i1:i2])))
        if j2 > j1:
            parts.append(DiffPart("added", "".join(b[j1:j2])))
    return tuple(parts)


def _words(text: str) -> list[str]:
    if not text:
        return []
    words: list[str] = []
    for word in text.split(" "):
        words.append(word + " ")
    if words:
        words[-1] = words[-1][:-1]
    return words


def _tools(reference: Outcome, replayed: Outcome) -> tuple[ToolPair, ...]:
    pairs = itertools.zip_longest(reference.tool_calls, replayed.tool_calls)
    return tuple(
        ToolPair(
            step=i + 1,
            reference=_call(a),
            replayed=_call(b),
            differs=a != b,
        )
        for i, (a, b) in enumerate(pairs)
    )


def _call(call: tuple[str, str] | None) -> str:
    if call is None:
        return "—"
    name, input_hash = call
    return f"{name} (input {input_hash[:12]})"


def _row(report: ReplayReport, row: ReportRow, requests: tuple[RequestDiff, ...]) -> RowView:
    control = row.variation is None
    reference = report.original if control else report.as_captured.result.outcome
    replayed = row.result.outcome
    buckets: tuple[Bucket, ...] = ()
    if row.variance is not None:
        buckets = tuple(
            Bucket(runs=b.count, reproduces=b.matches_original, output=b.outcome.final_output or "")
            for b in row.variance.buckets
        )
    return RowView(
        label=row.label,
        variable=row.variation.name if row.variation is not None else "",
        verdict=row.verdict,
        changed=row.outcome_changed,
        reference_label="the capture" if control else "the as-captured replay",
        diff=word_diff(reference.final_output or "", replayed.final_output or ""),
        tools=_tools(reference, replayed),
        first_divergent_step=row.comparison.first_divergent_step if row.comparison else None,
        stop_reason=row.result.stop_reason,
        model=row.result.model,
        runs=len(row.attempts) or 1,
        distribution=buckets,
        requests=requests,
    )


def replay_view(
    report: ReplayReport, *, run_id: str = "", requests: Sequence[tuple[RequestDiff, ...]] = ()
) -> ReplayView:
    """The page's values; ``requests[i]`` is what row ``i`` sent (as captured first, then each variation)."""
    control = report.as_captured
    return ReplayView(
        decision_id=report.decision_id,
        reproduces=control.comparison is not None and not control.comparison.changed,
        fidelity=report.fidelity,
        fidelity_note=report.fidelity_note,
        verified=report.verified,
        caveats=report.caveats,
        rows=tuple(
            _row(report, row, requests[i] if i < len(requests) else ()) for i, row in enumerate(report.rows)
        ),
        run_id=run_id,
    )

"""Probing: sweep one variable over generated values (a second one as a grid) and map where it fails.

``--sweep VARIABLE=SPEC`` generates the values:

=====================================  =============================================================
``memory.truncate=0..16KB/1KB``        working-set sizes from 0 to 16 KB by 1 KB (whole entries kept,
                                       :mod:`consumers.replay.memory_variation`); KB = 1024 bytes
``memory.drop=each``                   each working-set entry dropped in turn
``memory.tier=each``                   each tier kept alone
``system_prompt=versions``             each prompt version the fleet's full captures hold (also
                                       ``tool_schema=versions``)
``external_state.KEY=0..1000/50``      numbers from 0 to 1000 by 50 (also ``sampling.FIELD=A..B/S``;
                                       ``external_state.KEY.MEMBER`` sweeps one member of the value)
``request=@paraphrases.txt``           one value per non-empty line, each read as a ``--vary`` value
=====================================  =============================================================

Every point is replayed in the sandbox ``runs`` times (points whose request and world come out
identical are replayed once and shared) and judged: with pacts, a point *fails* when a pact is
violated on the replayed output; without them, on a decision that failed, a point fails when the
replay reproduces the captured outcome; on any other decision the probe maps where the outcome
*changes*. The boundary is stated per value of the second sweep: "fails when the working set
exceeds 7.9 KB with v4.7; never with v4.5, v4.6". Every run is a ``replay_runs`` row (kind
``probe``) carrying its point, which ``blackbox report`` charts.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from consumers.replay.checks import Check, replayed_capture, run_checks
from consumers.replay.memory_variation import format_size, working_set_bytes
from consumers.replay.outcome import compare
from consumers.replay.replayer import PreparedCapture, Replayer, ReplayResult, inputs_key, vary_inputs
from consumers.replay.report import result_row
from consumers.replay.runlog import ReplayRunRow
from consumers.replay.sweep import Axis, InvalidSweep, parse_sweep, short_label
from consumers.replay.variation import ReplayInputs, Variation
from schemas.errors import ModelClientError

__all__ = [
    "MAX_REPLAYS",
    "Axis",
    "InvalidSweep",
    "Judge",
    "ProbePoint",
    "ProbeResult",
    "parse_sweep",
    "probe",
    "short_label",
]

MAX_REPLAYS = 500
"""Replays one probe may make (distinct points × runs): a mistyped step should not run all night."""

_LISTED = 6  # values a boundary sentence names before it counts the rest


@dataclass(frozen=True, slots=True)
class Judge:
    """What a point's replay is judged by: ``checks`` (pacts), or reproducing a known failure, or
    (neither) whether the outcome changes."""

    checks: tuple[Check, ...] = ()
    failed: bool | None = None

    @property
    def verb(self) -> str:
        return "fails" if self.checks or self.failed else "changes the outcome"

    def describe(self) -> str:
        if self.checks:
            return (
                "fails = a pact is violated on the replayed output ("
                + ", ".join(c.name for c in self.checks)
                + ")"
            )
        if self.failed:
            return "fails = the replay reproduces the captured (failed) outcome"
        return "the decision did not fail: the probe maps where the outcome changes"

    def hit(self, prepared: PreparedCapture, result: ReplayResult) -> bool | None:
        """True: fails (or changes); False: does not; None: not decided (not run, or a rule errored)."""
        if not result.reached_model or (result.replay_failure is not None and result.divergence is None):
            return None
        if self.checks:
            after = run_checks(self.checks, replayed_capture(prepared, result))
            if any(c.verdict == "fails" for c in after):
                return True
            return None if any(c.verdict == "error" for c in after) else False
        changed = result.divergence is not None or compare(prepared.original, result.outcome).changed
        return not changed if self.failed else changed


@dataclass(frozen=True, slots=True)
class ProbePoint:
    """One configuration of the sweep and how its runs were judged."""

    step: int
    x: Variation
    series: Variation | None
    measure: float | None
    runs: int
    hits: int
    undecided: int
    first_result: ReplayResult

    @property
    def state(self) -> str:
        decided = self.runs - self.undecided
        if decided == 0:
            return "undecided"
        if self.hits == decided and not self.undecided:
            return "hit"
        return "miss" if self.hits == 0 and not self.undecided else "mixed"

    def to_json(self) -> dict[str, Any]:
        failure = self.first_result.replay_failure
        return {
            "step": self.step,
            "x": self.x.describe(),
            "measure": self.measure,
            "series": self.series.describe() if self.series else None,
            "runs": self.runs,
            "hits": self.hits,
            "undecided": self.undecided,
            "state": self.state,
            "divergedAt": None if self.first_result.divergence is None else self.first_result.divergence.step,
            "error": None
            if failure is None or self.first_result.divergence
            else f"{type(failure).__name__}: {failure}",
        }


@dataclass(frozen=True, slots=True)
class Boundary:
    series: str | None
    kind: str  # above | below | always | never | mixed | categorical | undecided
    text: str
    detail: str = ""  # the evidence: the points on either side, the range tried
    passes_up_to: float | None = None
    fails_from: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "series": self.series,
            "kind": self.kind,
            "text": self.text,
            "detail": self.detail,
            "passesUpTo": self.passes_up_to,
            "failsFrom": self.fails_from,
        }


@dataclass(frozen=True, slots=True)
class ProbeResult:
    run_id: str
    decision_id: str
    axes: tuple[Axis, ...]
    judge: Judge
    points: tuple[ProbePoint, ...]
    replays: int
    caveats: tuple[str, ...] = ()
    boundaries: tuple[Boundary, ...] = field(default=())

    @property
    def summary(self) -> str:
        """The boundary in one sentence: where it fails first, series with the same answer grouped."""
        grouped: dict[tuple[str, str], list[str]] = {}
        for b in sorted(self.boundaries, key=lambda b: b.kind in ("never", "undecided")):
            grouped.setdefault((b.text, b.detail), []).append(b.series or "")
        parts = []
        for (text, detail), series in grouped.items():
            named = [s for s in series if s]
            parts.append(
                (f"{text} with {', '.join(named)}" if named else text) + (f" ({detail})" if detail else "")
            )
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "runId": self.run_id,
            "decisionId": self.decision_id,
            "sweeps": [{"variable": a.name, "spec": a.spec, "values": len(a.values)} for a in self.axes],
            "judge": self.judge.describe(),
            "summary": self.summary,
            "boundaries": [b.to_json() for b in self.boundaries],
            "points": [p.to_json() for p in self.points],
            "replays": self.replays,
            "caveats": list(self.caveats),
        }


def probe(
    replayer: Replayer,
    prepared: PreparedCapture,
    axes: Sequence[Axis],
    *,
    judge: Judge,
    runs: int = 1,
    on_rows: Callable[[list[ReplayRunRow]], None] | None = None,  # every run's row, once at the end
    on_point: Callable[[ProbePoint], None] | None = None,  # each point as it is judged (a live chart)
    clock: Callable[[], datetime],
) -> ProbeResult:
    """Replay every point of the sweep (a grid for two axes) ``runs`` times and map the boundary."""
    if not 1 <= len(axes) <= 2:
        raise InvalidSweep("give one --sweep, or two for a grid", path="--sweep")
    if len(axes) == 2 and axes[0].name.split(".")[0] == axes[1].name.split(".")[0] == "memory":
        raise InvalidSweep(
            "two sweeps of the working set do not compose; sweep another variable second", path="--sweep"
        )
    if runs < 1:
        raise ValueError("runs must be at least 1")
    series_values: Sequence[Variation | None] = axes[1].values if len(axes) == 2 else (None,)
    planned: list[tuple[int, Variation, Variation | None, str, float | None]] = []
    for series in series_values:
        for step, x in enumerate(axes[0].values):
            config = (x,) if series is None else (x, series)
            inputs = vary_inputs(prepared, config)  # every point is checked before anything runs
            planned.append((step, x, series, inputs_key(inputs), _measure(axes[0], x, inputs)))
    distinct = len({key for *_, key, _ in planned})
    if distinct * runs > MAX_REPLAYS:
        raise InvalidSweep(
            f"the probe needs {distinct * runs} replays ({distinct} distinct points × {runs} runs); at most "
            f"{MAX_REPLAYS}: widen the step or lower --runs",
            path="--sweep",
        )
    run_id = uuid.uuid4().hex
    control = replayer.run(prepared)
    if isinstance(control.replay_failure, ModelClientError):
        raise control.replay_failure
    caveats = []
    if control.divergence is not None or compare(prepared.original, control.outcome).changed:
        caveats.append(
            "the as-captured replay does not reproduce the capture: the map is of this model as it is now"
        )
    caveats.extend(_unread(axes, control))
    done: dict[str, list[ReplayResult]] = {}
    points: list[ProbePoint] = []
    rows: list[ReplayRunRow] = []
    replays = 1
    for step, x, series, key, measure in planned:
        config = (x,) if series is None else (x, series)
        if key not in done:
            done[key] = [replayer.run(prepared, configuration=config) for _ in range(runs)]
            replays += runs
        # A shared run is recorded under each point it stands for (its own configuration, its own row).
        results = [r if r.variations == config else replace(r, variations=config) for r in done[key]]
        verdicts = [judge.hit(prepared, r) for r in results]
        point = ProbePoint(
            step=step,
            x=x,
            series=series,
            measure=measure,
            runs=len(results),
            hits=sum(v is True for v in verdicts),
            undecided=sum(v is None for v in verdicts),
            first_result=results[0],
        )
        points.append(point)
        if on_point is not None:
            on_point(point)
        rows.extend(_rows(point, results, verdicts, judge=judge, run_id=run_id, at=clock()))
    if on_rows is not None:
        on_rows(rows)
    boundaries = tuple(
        _boundary(axes[0], judge, [p for p in points if p.series == s], s) for s in series_values
    )
    return ProbeResult(
        run_id=run_id,
        decision_id=prepared.decision_id,
        axes=tuple(axes),
        judge=judge,
        points=tuple(points),
        replays=replays,
        caveats=tuple(caveats),
        boundaries=boundaries,
    )


def _measure(axis: Axis, x: Variation, inputs: Any) -> float | None:
    if axis.name.startswith("memory.") and isinstance(inputs, ReplayInputs):
        return float(working_set_bytes(inputs.memory))
    if axis.numeric and isinstance(x.value, int | float):
        return float(x.value)
    return None


# -- the boundary -------------------------------------------------------------------------------------
def _boundary(axis: Axis, judge: Judge, points: list[ProbePoint], series: Variation | None) -> Boundary:
    label = None if series is None else short_label(series)
    verb = judge.verb
    decided = [p for p in points if p.state != "undecided"]
    if not decided:
        return Boundary(label, "undecided", "undecided at every point", _undecided_reason(points))
    if axis.numeric or axis.name.startswith("memory.truncate"):
        ordered = sorted(decided, key=lambda p: (p.measure if p.measure is not None else p.step, p.step))
        states = [p.state for p in ordered]
        show = (lambda v: format_size(v)) if axis.name.startswith("memory.") else (lambda v: f"{v:g}")
        lo, hi = show(_at(ordered[0])), show(_at(ordered[-1]))
        if all(s == "hit" for s in states):
            return Boundary(label, "always", f"{verb} at every point tried", f"{lo} … {hi}")
        if all(s == "miss" for s in states):
            never = "never fails" if verb == "fails" else "never changes the outcome"
            return Boundary(label, "never", never, f"{lo} … {hi}")
        first_hit = states.index("hit") if "hit" in states else None
        if (
            first_hit is not None
            and all(s == "miss" for s in states[:first_hit])
            and all(s == "hit" for s in states[first_hit:])
        ):
            below, above = _at(ordered[first_hit - 1]), _at(ordered[first_hit])
            return Boundary(
                label,
                "above",
                f"{verb} when {axis.quantity} exceeds {show(below)}",
                f"not at {show(below)}, {verb} from {show(above)}",
                passes_up_to=below,
                fails_from=above,
            )
        first_miss = states.index("miss") if "miss" in states else None
        if (
            first_miss is not None
            and all(s == "hit" for s in states[:first_miss])
            and all(s == "miss" for s in states[first_miss:])
        ):
            hit, miss = _at(ordered[first_miss - 1]), _at(ordered[first_miss])
            return Boundary(
                label,
                "below",
                f"{verb} when {axis.quantity} is at most {show(hit)}",
                f"not from {show(miss)}",
                passes_up_to=None,
                fails_from=hit,
            )
        hits = [show(_at(p)) for p in ordered if p.state == "hit"]
        return Boundary(label, "mixed", f"{verb} at {', '.join(hits) or 'no point'}", "not monotone")
    hits = [short_label(p.x) for p in decided if p.state == "hit"]
    misses = [short_label(p.x) for p in decided if p.state == "miss"]
    mixed = [short_label(p.x) for p in decided if p.state == "mixed"]
    tried = f"{len(decided)} values"
    if not hits and not mixed:
        never = "never fails" if verb == "fails" else "never changes the outcome"
        return Boundary(label, "never", never, tried)
    if not misses and not mixed:
        return Boundary(label, "always", f"{verb} with every value of {axis.name} tried", tried)
    if len(hits) > _LISTED:
        text = f"{verb} with {len(hits)} of {len(decided)} values of {axis.name}"
    else:
        text = f"{verb} with {axis.name}={', '.join(hits)}" if hits else f"{verb} sometimes"
    if mixed:
        text += f"; sometimes with {_listed(mixed)}"
    if misses:
        text += f"; not with {_listed(misses)}"
    return Boundary(label, "categorical", text, tried)


def _listed(values: Sequence[str]) -> str:
    shown = ", ".join(values[:_LISTED])
    return shown + (f" and {len(values) - _LISTED} more" if len(values) > _LISTED else "")


def _unread(axes: Sequence[Axis], control: ReplayResult) -> list[str]:
    """An external value the replay never reads cannot change it: say so beside the map."""
    out = []
    for axis in axes:
        key = axis.name.partition(".")[2]
        if axis.name.startswith("external_state.") and not any(
            key == read or key.startswith(read + ".") for read in control.external_reads
        ):
            out.append(f"the replay never read {axis.name}: sweeping it cannot change what the agent saw")
    return out


def _at(point: ProbePoint) -> float:
    return point.measure if point.measure is not None else float(point.step)


def _undecided_reason(points: Sequence[ProbePoint]) -> str:
    failure = points[0].first_result.replay_failure if points else None
    return "no run" if failure is None else f"{type(failure).__name__}: {failure}"


def _rows(
    point: ProbePoint,
    results: Sequence[ReplayResult],
    verdicts: Sequence[bool | None],
    *,
    judge: Judge,
    run_id: str,
    at: datetime,
) -> list[ReplayRunRow]:
    coordinates = json.dumps(
        {
            "step": point.step,
            "x": short_label(point.x),
            "variable": point.x.name,
            "measure": point.measure,
            "series": short_label(point.series) if point.series else "",
        }
    )
    yes = "fails" if judge.verb == "fails" else "changes"
    no = "passes" if judge.verb == "fails" else "same"
    rows = []
    for attempt, (result, verdict) in enumerate(zip(results, verdicts, strict=True)):
        word = "undecided" if verdict is None else (yes if verdict else no)
        comparison = (
            compare(result.original, result.outcome) if result.original and result.reached_model else None
        )
        row = result_row(
            result, comparison, run_id=run_id, at=at, kind="probe", verdict=word, attempt=attempt
        )
        rows.append(_with_point(row, coordinates))
    return rows


def _with_point(row: ReplayRunRow, coordinates: str) -> ReplayRunRow:
    return replace(row, probe_point=coordinates)

"""Search a decision's configurations from the browser: bisect over the fleet's prompt versions (each
step shown) and probe a sweep (``memory.truncate`` ranges, versions as a second sweep) to its stated
boundary. Both run as jobs (:mod:`consumers.console.jobs`) through the replay layer the CLI uses
(:func:`~consumers.replay.bisect.bisect_candidates`, :func:`~consumers.replay.probe.probe`): the same
gate and verifier, every run a ``replay_runs`` row (kinds ``bisect`` and ``probe``).

Routes: ``POST /decisions/{id}/bisect``, ``POST /decisions/{id}/probe``; the result is on the job's page.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from consumers.console.core import Console, Who, safe_id
from consumers.console.jobs import JobControl, ReplayJobs
from consumers.console.web import secured
from schemas.errors import ContractError

if TYPE_CHECKING:
    from consumers.console.model_choice import ModelChoice
    from consumers.replay.replayer import Replayer, ReplayResult

__all__ = ["BisectView", "ProbeChart", "ProbeView", "add_search_routes"]

MAX_SWEEP = 200


@dataclass(frozen=True, slots=True)
class BisectStepView:
    candidate: str
    hit: bool
    tools: str
    final_output: str


@dataclass(frozen=True, slots=True)
class BisectView:
    decision_id: str
    first: str | None
    verdict: str
    candidates: tuple[str, ...]
    steps: tuple[BisectStepView, ...]
    skipped: tuple[str, ...] = ()
    """Versions left out: no text held, or several texts under one name."""
    kind: str = "bisect"


@dataclass(frozen=True, slots=True)
class PointView:
    x: str
    series: str
    measure: str
    runs: int
    state: str
    column: int = 0
    """Its place in the first sweep (the chart's column) and in the second (the chart's row)."""
    row: int = 0


@dataclass(frozen=True, slots=True)
class ProbeChart:
    """The boundary chart's data: a column per value of the first sweep, a row per value of the second
    (or one row), and the points judged so far; published as each point finishes, final with the result."""

    xs: tuple[str, ...]
    series: tuple[str, ...]
    points: tuple[PointView, ...] = ()
    variable: str = ""
    """The first sweep's variable (the row's name when there is no second sweep)."""
    hit: str = "fails"
    """What a hit and a miss mean under the probe's judge (fails / passes, or changes / unchanged)."""
    miss: str = "passes"
    summary: str = ""
    """The stated boundary, once the probe has ended."""

    @property
    def planned(self) -> int:
        return len(self.xs) * len(self.series)


@dataclass(frozen=True, slots=True)
class ProbeView:
    decision_id: str
    sweeps: str
    judge: str
    summary: str
    replays: int
    points: tuple[PointView, ...]
    caveats: tuple[str, ...]
    chart: ProbeChart | None = None
    kind: str = "probe"


class _OwnVersionFirst:
    """The fleet's versions, except that the decision's own prompt version is the text it ran with
    (from its verified capture), even when the fleet ran several texts under that name."""

    def __init__(self, inner: Any, capture: Mapping[str, Any]) -> None:
        config = capture.get("agentConfiguration") or {}
        self._inner = inner
        self._own = (str(config.get("systemPromptVersion") or ""), config.get("systemPromptText"))

    def known(self, variable: str) -> Any:
        return self._inner.known(variable)

    def value(self, variable: str, version: str) -> Any:
        if variable == "system_prompt" and version == self._own[0] and isinstance(self._own[1], str):
            return self._own[1]
        return self._inner.value(variable, version)


class _Stepping:
    """The replayer, reporting each replay to the job (progress) and stopping it if cancelled."""

    def __init__(self, replayer: Replayer, control: JobControl) -> None:
        self._replayer, self._control = replayer, control

    def run(self, *args: Any, **kwargs: Any) -> ReplayResult:
        self._control.check()
        result = self._replayer.run(*args, **kwargs)
        self._control.step()
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._replayer, name)


def _session(console: Console, who: Who, choice: ModelChoice, control: JobControl, reason: str) -> Any:
    client, close = choice.build()
    replayer = console.rt.replayer(client=client, caller=who.session.as_caller(), reason=reason)
    return replayer, cast("Replayer", _Stepping(replayer, control)), close


def _bisect_work(
    console: Console, who: Who, *, decision_id: str, choice: ModelChoice
) -> Callable[[JobControl], Any]:
    from consumers.replay.bisect import bisect_candidates
    from consumers.replay.report import result_row
    from consumers.replay.runlog import IndexReplayRunLog
    from consumers.replay.variation import parse_variation
    from consumers.replay.versions import IndexVersionCatalog

    def work(control: JobControl) -> BisectView:
        replayer, stepping, close = _session(console, who, choice, control, "console: bisect")
        try:
            prepared = replayer.prepare(decision_id)
            catalog = IndexVersionCatalog(console.rt.index, read=replayer.read)
            own = prepared.capture.get("agentConfiguration") or {}
            candidates, skipped = [], []
            for known in catalog.known("system_prompt"):
                if known.version == own.get("systemPromptVersion") and own.get("systemPromptText"):
                    # the decision's own version: the text it ran with, from its verified capture
                    text = str(own["systemPromptText"])
                    candidates.append(
                        replace(
                            parse_variation(f"system_prompt=text:{text}"),
                            label=f"system_prompt={known.version}",
                        )
                    )
                elif known.held and known.contents == 1:
                    candidates.append(parse_variation(f"system_prompt={known.version}", versions=catalog))
                else:  # no text, or several texts under one name: which one ran is unknowable
                    skipped.append(
                        f"{known.version} ({'no text held' if not known.held else f'{known.contents} texts'})"
                    )
            if not candidates:
                raise ContractError("no full capture holds a prompt version's text", path="system_prompt")
            control.plan(max(1, len(candidates).bit_length()))
            outcome = bisect_candidates(stepping, prepared, candidates, target="reproduces")
            at, run_id = datetime.now(UTC), uuid.uuid4().hex
            IndexReplayRunLog(console.rt.index).append(
                [
                    result_row(
                        s.result,
                        s.result.compared_to_original(),
                        run_id=run_id,
                        at=at,
                        kind="bisect",
                        verdict="hit" if s.hit else "miss",
                    )
                    for s in outcome.steps
                ]
            )
            return BisectView(
                decision_id=decision_id,
                first=outcome.first_label,
                verdict=outcome.verdict,
                candidates=outcome.labels,
                skipped=tuple(skipped),
                steps=tuple(
                    BisectStepView(
                        candidate=s.label,
                        hit=s.hit,
                        tools=", ".join(c.tool_name for c in s.result.tool_calls),
                        final_output=s.result.final_output or "",
                    )
                    for s in outcome.steps
                ),
            )
        finally:
            close()

    return work


def _probe_work(
    console: Console, who: Who, *, decision_id: str, choice: ModelChoice, sweeps: list[str], runs: int
) -> Callable[[JobControl], Any]:
    from consumers.replay.checks import checks_of
    from consumers.replay.memory_variation import format_size
    from consumers.replay.probe import Judge, ProbePoint, parse_sweep, probe
    from consumers.replay.runlog import IndexReplayRunLog
    from consumers.replay.store import decision_failed
    from consumers.replay.versions import IndexVersionCatalog

    def work(control: JobControl) -> ProbeView:
        replayer, stepping, close = _session(console, who, choice, control, "console: probe")
        try:
            prepared = replayer.prepare(decision_id)
            catalog = _OwnVersionFirst(
                IndexVersionCatalog(console.rt.index, read=replayer.read), prepared.capture
            )
            axes = [parse_sweep(spec, prepared=prepared, versions=catalog) for spec in sweeps]
            points = 1
            for axis in axes:
                points *= len(axis.values)
            if points > MAX_SWEEP:
                raise ContractError(f"{points} points; at most {MAX_SWEEP} from the console", path="sweep")
            control.plan(points * runs + 1)  # and the as-captured control
            memory = axes[0].name.startswith("memory.")
            series = tuple(v.describe() for v in axes[1].values) if len(axes) == 2 else ("",)
            failed = decision_failed(console.rt.index, decision_id)
            if failed is None:
                failed = (prepared.capture.get("outcome") or {}).get("status") == "failure"
            judge = Judge(checks=checks_of(console.rt.pacts), failed=failed)
            chart = ProbeChart(
                xs=tuple(v.describe() for v in axes[0].values),
                series=series,
                variable=axes[0].name,
                hit="fails" if judge.verb == "fails" else "changes",
                miss="passes" if judge.verb == "fails" else "unchanged",
            )
            control.publish(chart)

            def view(p: ProbePoint) -> PointView:
                label = p.series.describe() if p.series else ""
                return PointView(
                    x=p.x.describe(),
                    series=label,
                    measure=""
                    if p.measure is None
                    else (format_size(p.measure) if memory else f"{p.measure:g}"),
                    runs=p.runs,
                    state=p.state,
                    column=p.step,
                    row=series.index(label) if label in series else 0,
                )

            def judged(p: ProbePoint) -> None:
                nonlocal chart
                chart = replace(chart, points=(*chart.points, view(p)))
                control.publish(chart)

            result = probe(
                stepping,
                prepared,
                axes,
                judge=judge,
                runs=runs,
                on_rows=IndexReplayRunLog(console.rt.index).append,
                on_point=judged,
                clock=lambda: datetime.now(UTC),
            )
            final = tuple(view(p) for p in result.points)
            return ProbeView(
                decision_id=decision_id,
                sweeps=" × ".join(f"{a.name}={a.spec}" for a in result.axes),
                judge=result.judge.describe(),
                summary=result.summary,
                replays=result.replays,
                points=final,
                caveats=result.caveats,
                chart=replace(chart, points=final, summary=result.summary),
            )
        finally:
            close()

    return work


def add_search_routes(
    router: APIRouter,
    console: Console,
    jobs: ReplayJobs,
    *,
    guard: Any,
    form: Any,
    choose: Callable[[dict[str, str]], ModelChoice],
) -> None:
    """Bisect and probe routes; ``choose`` picks the named model as the replay form does."""

    def _submit(who: Who, did: str, label: str, work: Callable[[JobControl], Any]) -> Response:
        job_id = jobs.submit(owner=who.session.caller, decision_id=did, label=label, total=1, work=work)
        console.record(
            who, action="replay", outcome="allowed", detail=f"console job {job_id}: {label}", decision_id=did
        )
        return secured(RedirectResponse(console.url(f"/jobs/{job_id}"), status_code=303))

    @router.post("/decisions/{decision_id}/bisect")
    @guard
    def bisect(request: Request, decision_id: str, fields: dict[str, str] = form) -> Response:
        who = console.need(request, operator=True)
        console.check_csrf(who, fields)
        did, choice = safe_id(decision_id), choose(fields)
        work = _bisect_work(console, who, decision_id=did, choice=choice)
        return _submit(
            who, did, "bisect over the fleet's system prompt versions (first that reproduces)", work
        )

    @router.post("/decisions/{decision_id}/probe")
    @guard
    def probe_route(request: Request, decision_id: str, fields: dict[str, str] = form) -> Response:
        who = console.need(request, operator=True)
        console.check_csrf(who, fields)
        did, choice = safe_id(decision_id), choose(fields)
        sweeps = [s.strip()[:500] for s in (fields.get("sweep", ""), fields.get("sweep2", "")) if s.strip()]
        if not sweeps:
            raise ContractError("give a sweep, e.g. memory.truncate=0..16KB/1KB", path="sweep")
        work = _probe_work(console, who, decision_id=did, choice=choice, sweeps=sweeps, runs=1)
        return _submit(who, did, f"probe {' × '.join(sweeps)}", work)

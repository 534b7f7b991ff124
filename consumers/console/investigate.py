"""Investigate a decision in the browser: replay it as captured, or with exactly one variable changed,
as a job of the serve process (:mod:`consumers.console.jobs`), through the replay service layer the
CLI uses (:mod:`consumers.replay`): the same gate (every read in ``access_log``), the same verifier,
the same report, every run in ``replay_runs``.

Routes (under the console's prefix)::

    GET  /decisions/{id}/investigate     the form: model endpoint by name, runs, the one variable
    POST /decisions/{id}/replay          start a job; 303 to its page
    GET  /jobs/{job}                     queue position / progress (refreshes itself), then the result
    GET  /jobs/{job}/status.json         state and progress, for the page's script to poll
    GET  /jobs/{job}/chart.svg           a probe's boundary chart, as far as its points have finished
    POST /jobs/{job}/cancel
    GET  /decisions/{id}/runs            the decision's run history (``replay_runs``)

The model is chosen by name among what the operator configured (the allow-list, with keys read on
the server from the environment variables it names) or the demo's in-process model: no URL or key
is typed into or shown in the browser. Live replay (real tools) is not offered here. Only operators
start jobs (they spend the operator's model); the gate still decides, per capture, what they may replay.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from importlib import resources
from typing import TYPE_CHECKING, Any, cast

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from consumers.console.core import Console, Who, safe_id
from consumers.console.finding_pages import add_finding_routes
from consumers.console.jobs import JobControl, JobView, ReplayJobs
from consumers.console.model_choice import ModelChoice, model_choices
from consumers.console.replay_view import replay_view
from consumers.console.search_jobs import ProbeChart, add_search_routes
from consumers.console.web import SECURITY_HEADERS, json_response, secured, svg
from consumers.console.wire_diff import WireTap
from schemas.errors import ContractError

if TYPE_CHECKING:
    from consumers.replay.clients import ModelClient

__all__ = ["MAX_RUNS", "ModelChoice", "add_investigate_routes", "model_choices"]

MAX_RUNS = 20
POLL_MS = 500  # the page's script asks for the job's status this often
FIRST_WAIT_SECONDS = 0.8  # a job page waits this long for the job before rendering (then refreshes)


def _replay_work(
    console: Console, who: Who, *, decision_id: str, choice: ModelChoice, vary: str, runs: int
) -> Callable[[JobControl], Any]:
    """The job: replay as captured ``runs`` times, then under the one variation; log every run."""
    from consumers.replay.replayer import require_variation
    from consumers.replay.report import build_report, run_rows
    from consumers.replay.runlog import IndexReplayRunLog
    from consumers.replay.variation import parse_variation
    from consumers.replay.versions import IndexVersionCatalog

    rt = console.rt

    def work(control: JobControl) -> Any:
        client, close = choice.build()
        tap = WireTap(client)  # a wire capture's requests as sent, shown against the recording
        try:
            replayer = rt.replayer(
                client=cast("ModelClient", tap.client),
                caller=who.session.as_caller(),
                reason="console: replay",
            )
            prepared = replayer.prepare(decision_id)
            variations = []
            if vary:
                variation = parse_variation(vary, versions=IndexVersionCatalog(rt.index, read=replayer.read))
                require_variation(prepared, variation)
                variations.append(variation)
            requests = []
            as_captured = []
            for i in range(runs):
                as_captured.append(replayer.run(prepared))
                sent = tap.take(prepared.capture)
                if i == 0:
                    requests.append(sent)
                control.step()
            attempts = []
            for variation in variations:
                done = []
                for i in range(runs):
                    done.append(replayer.run(prepared, variation=variation))
                    sent = tap.take(prepared.capture)
                    if i == 0:
                        requests.append(sent)
                    control.step()
                attempts.append((variation, done))
            report = build_report(prepared, as_captured, attempts, variance=runs > 1)
            rows = run_rows(report, at=datetime.now(UTC))
            IndexReplayRunLog(rt.index).append(rows)
            return replay_view(report, run_id=rows[0].run_id if rows else "", requests=requests)
        finally:
            close()

    return work


def add_investigate_routes(router: APIRouter, console: Console, *, guard: Any, form: Any) -> None:
    """Add the investigation routes to the console's router (same guard, same CSRF form)."""
    jobs = ReplayJobs(workers=2)  # a job left at shutdown: the pool's threads finish it, then exit

    def _choose(fields: dict[str, str]) -> ModelChoice:
        choices = model_choices(console)
        choice = choices.get(fields.get("model", ""))
        if choice is None:
            raise ContractError(f"choose one of: {', '.join(sorted(choices))}", path="model")
        return choice

    add_search_routes(router, console, jobs, guard=guard, form=form, choose=_choose)
    add_finding_routes(router, console, jobs, guard=guard, form=form, choose=_choose)

    @router.get("/investigate.css")
    def stylesheet() -> Response:  # beside the console's fixed static set, which this module leaves alone
        data = resources.files("consumers.console").joinpath("static", "investigate.css").read_bytes()
        headers = {**SECURITY_HEADERS, "Cache-Control": "max-age=300"}
        return Response(data, media_type="text/css; charset=utf-8", headers=headers)

    @router.get("/decisions/{decision_id}/investigate")
    @guard
    def investigate(request: Request, decision_id: str) -> Response:
        who = console.need(request, operator=True)
        capture = _gate_show(console, who, safe_id(decision_id))
        return console.page(
            who,
            "investigate.html",
            decision_id=decision_id,
            models=model_choices(console).values(),
            variables=_variables(console, capture),
            wire=capture.get("fidelity") == "wire",
            max_runs=MAX_RUNS,
        )

    @router.post("/decisions/{decision_id}/replay")
    @guard
    def start(request: Request, decision_id: str, fields: dict[str, str] = form) -> Response:
        who = console.need(request, operator=True)
        console.check_csrf(who, fields)
        did = safe_id(decision_id)
        choice = _choose(fields)
        runs_text = fields.get("runs", "1").strip() or "1"
        if not runs_text.isdigit() or not 1 <= int(runs_text) <= MAX_RUNS:
            raise ContractError(f"a whole number from 1 to {MAX_RUNS}", path="runs")
        runs = int(runs_text)
        vary = (fields.get("vary_text", "").strip() or fields.get("vary", "")).strip()
        if vary and "=" not in vary:
            raise ContractError(f"expected NAME=VALUE, got {vary[:80]!r}", path="vary")
        label = "replay as captured" + (f", then with {vary[:120]}" if vary else "") + f" ({runs} run(s))"
        job_id = jobs.submit(
            owner=who.session.caller,
            decision_id=did,
            label=label,
            total=runs * (2 if vary else 1),
            work=_replay_work(console, who, decision_id=did, choice=choice, vary=vary, runs=runs),
        )
        console.record(
            who, action="replay", outcome="allowed", detail=f"console job {job_id}: {label}", decision_id=did
        )
        return secured(RedirectResponse(console.url(f"/jobs/{job_id}"), status_code=303))

    @router.get("/jobs/{job_id}")
    @guard
    def job(request: Request, job_id: str) -> Response:
        who = console.need(request)
        jid = safe_id(job_id, what="job id")
        jobs.wait(jid, owner=who.session.caller, seconds=FIRST_WAIT_SECONDS)
        view = jobs.view(jid, owner=who.session.caller)
        if view is None:
            return console.page(
                who, "error.html", status=404, title="Not found", reason="no such job of yours"
            )
        # with script, console.js polls status.json and reloads once the job ends; without, the page's
        # <noscript> refresh reloads it each second
        return console.page(
            who, "replay_job.html", job=view, result=view.result, chart=_chart(view), poll_ms=POLL_MS
        )

    @router.get("/jobs/{job_id}/status.json")
    @guard
    def status(request: Request, job_id: str) -> Response:
        who = console.need(request)
        view = jobs.view(safe_id(job_id, what="job id"), owner=who.session.caller)
        if view is None:
            return json_response({"error": "no such job of yours"}, status=404)
        chart = _chart(view)
        return json_response(
            {
                "state": view.state,
                "finished": view.finished,
                "done": view.done,
                "total": view.total,
                "position": view.position,
                "points": None if chart is None else len(chart.points),
                "planned": None if chart is None else chart.planned,
            }
        )

    @router.get("/jobs/{job_id}/chart.svg")
    @guard
    def chart(request: Request, job_id: str) -> Response:
        from consumers.console.probe_chart import chart_layout

        who = console.need(request)
        view = jobs.view(safe_id(job_id, what="job id"), owner=who.session.caller)
        drawn = None if view is None else _chart(view)
        if drawn is None:
            return secured(Response("no chart", status_code=404, media_type="text/plain"))
        return svg("probe_chart.svg", c=chart_layout(drawn))

    @router.post("/jobs/{job_id}/cancel")
    @guard
    def cancel(request: Request, job_id: str, fields: dict[str, str] = form) -> Response:
        who = console.need(request)
        console.check_csrf(who, fields)
        jid = safe_id(job_id, what="job id")
        jobs.cancel(jid, owner=who.session.caller)
        return secured(RedirectResponse(console.url(f"/jobs/{jid}"), status_code=303))

    @router.get("/decisions/{decision_id}/runs")
    @guard
    def runs(request: Request, decision_id: str) -> Response:
        from consumers.audit.store import replay_runs

        who = console.need(request)
        did = safe_id(decision_id)
        _gate_show(console, who, did)
        return console.page(who, "replay_runs.html", decision_id=did, runs=replay_runs(console.rt.index, did))


def _chart(view: JobView) -> ProbeChart | None:
    """A probe's chart: the result's once it ends, else the points published so far."""
    for value in (view.result, view.partial):
        chart = getattr(value, "chart", value)
        if isinstance(chart, ProbeChart):
            return chart
    return None


def _gate_show(console: Console, who: Who, decision_id: str) -> Mapping[str, Any]:
    """The decision read through the gate as ``show`` (logged); refused if the caller may not see it."""
    from consumers.storage.reader import load_capture

    shown = load_capture(
        decision_id,
        index=console.rt.index,
        store=console.rt.blob_store,
        gate=console.rt.gate,
        caller=who.session.as_caller(),
        action="show",
        ids=console.ids,
    )
    return shown.capture


def _variables(console: Console, capture: Mapping[str, Any]) -> list[tuple[str, str]]:
    """One-variable changes to point at: each prompt version the fleet ran (its text held in a full
    capture), each memory entry of this decision (drop it), working-set cuts, its model and sampling;
    the free-text field takes any other ``NAME=VALUE``."""
    from consumers.replay.versions import IndexVersionCatalog

    def unread(decision_id: str) -> Mapping[str, Any]:  # known() lists versions; it reads no capture
        raise ContractError("a version's text is read by the replay job", path="versions")

    config = capture.get("agentConfiguration") or {}
    current = str(config.get("systemPromptVersion") or "")
    known = IndexVersionCatalog(console.rt.index, read=unread).known("system_prompt")
    options = [
        (f"system_prompt={v.version}", f"system prompt → {v.version}")
        for v in known
        if v.held and v.version != current
    ]
    if capture.get("fidelity") != "wire":  # recorded bytes: a memory span is replaced, never dropped or cut
        entries = (capture.get("memoryState") or {}).get("workingSetEntries") or []
        for entry in entries:
            if isinstance(entry, dict) and entry.get("entryId"):
                size = len(str(entry.get("renderedContent") or "").encode("utf-8"))
                options.append(
                    (f"memory.drop={entry['entryId']}", f"memory: drop {entry['entryId']} ({size:,} bytes)")
                )
        options += [
            ("memory.truncate=8KB", "memory: truncate the working set at 8 KB"),
            ("memory.truncate=4KB", "memory: truncate the working set at 4 KB"),
        ]
    options.append(("sampling.temperature=0.7", "sampling: temperature → 0.7"))
    model = str(config.get("modelIdentifier") or "")
    if model:
        options.append((f"model={model}-next", f"model → {model}-next (a model id the endpoint must serve)"))
    return options

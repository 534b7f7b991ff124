"""Findings and gates in the browser: record a finding from a replay run (its CEL rule checked by the
same :func:`~consumers.findings.add_finding` as ``blackbox finding add``: a rule that does not compile
is shown with the compiler's error, the form kept), then run ``regress --suite`` against one change as
a job (:func:`~consumers.replay.regress.regress`, rows in ``replay_runs``) and show fixed / regressed /
unchanged / diverged per decision, the gate's verdict and the CLI command that reproduces it in CI.

Routes::

    GET  /findings/new?from_replay=RUN&decision=ID   the form
    POST /findings/check                             the rule's compile error, or the decisions it matches (JSON,
                                                     for the form's script: checked as the operator types)
    POST /findings                                   record it; 303 to its page, or the form with the error
    GET  /findings/{name}                            its rule, pinned decisions, the regress form
    POST /findings/{name}/regress                    start ``regress --suite`` as a job
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from consumers.console.core import Console, Who, safe_id
from consumers.console.jobs import JobControl, ReplayJobs
from consumers.console.web import json_response, secured
from schemas.errors import BlackboxError, ContractError

if TYPE_CHECKING:
    from consumers.console.model_choice import ModelChoice

__all__ = ["GateView", "add_finding_routes", "rule_preview"]

PREVIEW_WINDOW = timedelta(hours=24)
PREVIEW_MAX = 50
"""The preview evaluates the rule on the newest decisions of the last day, at most this many (each a
gated read of a stored capture): enough to see what the rule catches, bounded while one types."""


@dataclass(frozen=True, slots=True)
class SuiteRow:
    decision_id: str
    status: str
    detail: str


@dataclass(frozen=True, slots=True)
class GateView:
    suite: str
    change: str
    passed: bool
    counts: tuple[tuple[str, int], ...]
    rows: tuple[SuiteRow, ...]
    command: str
    kind: str = "regress"


def _regress_work(
    console: Console, who: Who, *, name: str, choice: ModelChoice, vary: str
) -> Callable[[JobControl], Any]:
    from consumers.replay.regress import regress
    from consumers.replay.runlog import IndexReplayRunLog
    from consumers.replay.variation import parse_variation
    from consumers.replay.versions import IndexVersionCatalog

    rt = console.rt

    def work(control: JobControl) -> GateView:
        client, close = choice.build()
        try:
            replayer = rt.replayer(
                client=client, caller=who.session.as_caller(), reason=f"regress --suite {name}"
            )
            ids, checks = _suite(console, name)
            control.plan(len(ids))
            configuration = (
                [parse_variation(vary, versions=IndexVersionCatalog(rt.index, read=replayer.read))]
                if vary
                else []
            )
            control.check()
            result = regress(
                replayer,
                ids,
                configuration=configuration,
                checks=checks,
                suite=name,
                workers=2,
                run_log=IndexReplayRunLog(rt.index),
                progress=False,
            )
            for _ in ids:
                control.step()
            command = ["blackbox", "regress", "--suite", name]
            if vary:
                command += ["--vary", vary]
            if choice.name == "demo-scripted":
                command += ["--model-callable", "consumers.demo.model:ScriptedSupportModel"]
            return GateView(
                suite=name,
                change=vary or "none (the suite as captured)",
                passed=result.passed,
                counts=tuple(result.counts.items()),
                rows=tuple(
                    SuiteRow(
                        decision_id=did,
                        status=v.status,
                        detail=v.reason
                        or ", ".join(f"{c.check}: {c.verdict}" for c in v.after)
                        or ("outcome changed" if v.outcome_changed else ""),
                    )
                    for did, v in result.verdicts.items()
                ),
                command=shlex.join(command),
            )
        finally:
            close()

    return work


def _suite(console: Console, name: str) -> tuple[list[str], tuple[Any, ...]]:
    """The finding's pinned decisions and its checks (the pacts and its rule), as ``regress --suite``."""
    from consumers.findings import FindingError, get_finding, pinned_decisions
    from consumers.pacts import Rule
    from consumers.replay.checks import checks_of

    finding = get_finding(console.rt.index, name)
    if finding is None:
        raise FindingError(f"no finding {name!r}")
    ids = [str(row["decision_id"]) for row in pinned_decisions(console.rt.index, name)]
    if not ids:
        raise FindingError(f"finding {name!r} pins no decision")
    rule = Rule(name=name, source=str(finding["rule"]), description=str(finding.get("description") or ""))
    return ids, checks_of(console.rt.pacts, finding=rule)


def rule_preview(console: Console, who: Who, *, rule: str, candidates: Sequence[str]) -> dict[str, Any]:
    """What the finding form shows as the rule is typed: the compiler's error (nothing read), or which
    of the candidates it matches (would be pinned) and how many of the window's newest decisions it
    matches. Every capture is read through the gate (action ``evaluate``, in the access log)."""
    from consumers.findings.captures import evaluate_stored
    from consumers.findings.store import decision_rows_by_id, window_rows
    from producers.pacts.expression import Rule, check_rule

    compiled = Rule(name="preview", source=rule.strip())
    try:
        check_rule(compiled, what="rule")
    except BlackboxError as exc:
        return {"ok": False, "error": str(exc)}
    caller = who.session.as_caller()
    rt = console.rt

    def matched(rows: Sequence[Any]) -> list[str]:
        outcomes = evaluate_stored(
            compiled, rows, blobs=rt.blob_store, gate=rt.gate, caller=caller, ids=console.ids
        )
        return [str(o.row["decision_id"]) for o in outcomes if o.matched]

    found = decision_rows_by_id(rt.index, list(candidates)) if candidates else {}
    trusted = [row for row in found.values() if row.get("trust") == "verified"]
    now = console.clock()
    window = window_rows(rt.index, since=now - PREVIEW_WINDOW, until=now, agent=None, by=None)[-PREVIEW_MAX:]
    in_window = matched(window)
    return {
        "ok": True,
        "error": "",
        "candidates": len(candidates),
        "pinned": matched(trusted),
        "window": {
            "hours": int(PREVIEW_WINDOW.total_seconds() // 3600),
            "decisions": len(window),
            "matched": len(in_window),
        },
        "examples": in_window[:10],
    }


def add_finding_routes(
    router: APIRouter,
    console: Console,
    jobs: ReplayJobs,
    *,
    guard: Any,
    form: Any,
    choose: Callable[[dict[str, str]], ModelChoice],
) -> None:
    """The finding and gate routes; operators only (a finding is shared state of the fleet)."""
    from consumers.findings import add_finding, get_finding, pinned_decisions
    from consumers.findings.store import replay_run_decisions

    def _form_page(who: Who, values: dict[str, str], *, problem: str = "", status: int = 200) -> Response:
        return console.page(who, "finding_form.html", status=status, values=values, problem=problem)

    @router.get("/findings/new")
    @guard
    def new(request: Request) -> Response:
        who = console.need(request, operator=True)
        values = {k: request.query_params.get(k, "")[:200] for k in ("from_replay", "decision")}
        return _form_page(who, values)

    @router.post("/findings/check")
    @guard
    def check(request: Request, fields: dict[str, str] = form) -> Response:
        who = console.need(request, operator=True)
        console.check_csrf(who, fields)
        candidates = []
        if fields.get("decision", "").strip():
            candidates.append(safe_id(fields["decision"].strip()))
        run = fields.get("from_replay", "").strip()
        if run:
            candidates += [
                d for d in replay_run_decisions(console.rt.index, run[:200]) if d not in candidates
            ]
        return json_response(
            rule_preview(console, who, rule=fields.get("rule", "")[:4000], candidates=candidates)
        )

    @router.post("/findings")
    @guard
    def create(request: Request, fields: dict[str, str] = form) -> Response:
        who = console.need(request, operator=True)
        console.check_csrf(who, fields)
        values = {k: fields.get(k, "") for k in ("name", "rule", "description", "from_replay", "decision")}
        try:
            record = add_finding(
                console.rt.index,
                name=values["name"].strip(),
                rule=values["rule"],
                description=values["description"].strip(),
                decisions=[safe_id(values["decision"])] if values["decision"].strip() else (),
                from_replay=values["from_replay"].strip() or None,
                blobs=console.rt.blob_store,
                gate=console.rt.gate,
                caller=who.session.as_caller(),
                now=console.clock(),
                ids=console.ids,
            )
        except BlackboxError as exc:  # the rule's compile error, a taken name, nothing matched: shown
            return _form_page(who, values, problem=str(exc), status=422)
        return secured(RedirectResponse(console.url(f"/findings/{record.name}"), status_code=303))

    @router.get("/findings/{name}")
    @guard
    def show(request: Request, name: str) -> Response:
        who = console.need(request, operator=True)
        finding = get_finding(console.rt.index, safe_id(name, what="finding"))
        if finding is None:
            raise ContractError(f"no finding {name!r}", path="finding")
        from consumers.console.model_choice import model_choices
        from consumers.replay.versions import IndexVersionCatalog

        def unread(decision_id: str) -> Any:
            raise ContractError("a version's text is read by the regress job", path="versions")

        versions = [
            v.version
            for v in IndexVersionCatalog(console.rt.index, read=unread).known("system_prompt")
            if v.held
        ]
        return console.page(
            who,
            "finding.html",
            finding=finding,
            pinned=pinned_decisions(console.rt.index, finding["name"]),
            models=model_choices(console).values(),
            versions=versions,
        )

    @router.post("/findings/{name}/regress")
    @guard
    def gate(request: Request, name: str, fields: dict[str, str] = form) -> Response:
        who = console.need(request, operator=True)
        console.check_csrf(who, fields)
        suite, choice = safe_id(name, what="finding"), choose(fields)
        vary = (fields.get("vary_text", "").strip() or fields.get("vary", "")).strip()[:2000]
        label = f"regress --suite {suite}" + (f" --vary {vary}" if vary else "")
        job_id = jobs.submit(
            owner=who.session.caller,
            decision_id="",
            label=label,
            total=1,
            work=_regress_work(console, who, name=suite, choice=choice, vary=vary),
        )
        console.record(who, action="replay", outcome="allowed", detail=f"console job {job_id}: {label}")
        return secured(RedirectResponse(console.url(f"/jobs/{job_id}"), status_code=303))

"""The console's trends and access pages.

``/trends``: every catalog trend (:data:`consumers.index.TRENDS`) over a window, as a table and a
server-built SVG chart; each row links to the decision list filtered to it. ``/access``: for an
operator, access requests (approve or refuse with a reason), tokens (create — shown once — list,
revoke), console sessions (list, revoke) and the access log with its hash-chain status; anyone else
sees only their own requests.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from consumers.access.chain import verify_chain
from consumers.access.files import parse_duration
from consumers.access.log import read_access_log
from consumers.access.requests import new_request
from consumers.console.core import Console, Who
from consumers.console.web import secured
from consumers.findings.store import list_findings
from consumers.index import TRENDS, run_trend
from consumers.report.store import recent_gates, recent_replays
from schemas.errors import ContractError

__all__ = ["add_admin_routes", "bars"]

# trend column -> the decision-list filter it narrows to
_LINKS = {"prompt_version": "prompt_version", "model_version": "model_version", "agent_id": "agent",
          "capture_level": "capture_level", "fidelity": "fidelity", "outcome_status": "outcome",
          "rule": "pact"}  # fmt: skip
_BY = ("", "prompt_version", "model_version", "day", "agent_id", "capture_level", "fidelity")


def bars(rows: list[dict[str, Any]], *, label: str, value: str, width: int = 480) -> list[dict[str, Any]]:
    """Horizontal bars for an inline SVG: each row's label, value and bar length (server-side numbers only)."""
    numbers = [r.get(value) for r in rows]
    top = max((float(n) for n in numbers if isinstance(n, int | float)), default=0.0) or 1.0
    out = []
    for i, row in enumerate(rows[:40]):
        n = row.get(value)
        size = float(n) / top * width if isinstance(n, int | float) else 0.0
        out.append({"y": i * 22, "label": str(row.get(label, ""))[:40], "value": n, "w": round(size, 1)})
    return out


def _link_for(row: dict[str, Any], since: str, until: str) -> str:
    query = {_LINKS[k]: str(v) for k, v in row.items() if k in _LINKS and v not in (None, "")}
    if isinstance(row.get("day"), date):
        query["since"] = row["day"].isoformat()
        query["until"] = (row["day"] + timedelta(days=1)).isoformat()  # until is exclusive
    else:
        query.update({"since": since, "until": until})
    if "failure_rate" in row or "failures" in row:
        query["failed"] = "yes"
    return "?" + urlencode(query)


def _when(text: str, *, now: datetime, what: str) -> datetime:
    """``now``, a duration back from now (``7d``), or an ISO-8601 time (UTC when naive)."""
    text = text.strip()
    if text == "now":
        return now
    if text[-1:] in ("s", "m", "h", "d", "w") and text[:-1].isdigit():
        return now - parse_duration(text, what=what)
    try:
        at = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ContractError("now, a duration (7d, 24h) or an ISO-8601 time", path=what) from exc
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def add_admin_routes(router: APIRouter, console: Console, *, guard: Callable[[Any], Any], form: Any) -> None:
    rt = console.rt

    @router.get("/trends")
    @guard
    def trends(request: Request) -> Response:
        who = console.need(request)
        now = console.clock()
        name = request.query_params.get("name", "failure_rate")
        by = request.query_params.get("by", "")
        if name not in TRENDS:
            raise ContractError(f"unknown trend; one of {', '.join(TRENDS)}", path="name")
        trend = TRENDS[name]
        if by and by not in trend.allowed_by:
            raise ContractError(
                f"{name} groups by {', '.join(trend.allowed_by) or 'nothing more'}", path="by"
            )
        since_text = request.query_params.get("since", "30d")
        until_text = request.query_params.get("until", "now")
        since, until = _when(since_text, now=now, what="since"), _when(until_text, now=now, what="until")
        rows = run_trend(rt.index, name, since=since, until=until, agent=None, by=by or None)
        console.record(
            who,
            action="trends",
            outcome="allowed",
            detail=f"trend {name} by={by or '-'} {since_text}..{until_text}",
        )
        numeric = [
            c
            for c in (rows[0] if rows else {})
            if isinstance(rows[0][c], int | float) and not isinstance(rows[0][c], bool)
        ]
        value = numeric[-1] if numeric else ""
        label = next((c for c in (rows[0] if rows else {}) if c not in numeric), "")
        iso = {"since": since.isoformat(timespec="seconds").replace("+00:00", ""),
               "until": until.isoformat(timespec="seconds").replace("+00:00", "")}  # fmt: skip
        links = [_link_for(r, iso["since"], iso["until"]) for r in rows]
        findings = list_findings(rt.index)  # each links to the decisions it pins
        # replay runs, read-only here (operators: they name decisions and verdicts)
        replays = recent_replays(rt.index, limit=20) if who.operator else []
        gates = recent_gates(rt.index, limit=10) if who.operator else []
        return console.page(
            who, "trends.html", trends=TRENDS, trend=trend, rows=rows, links=links, by=by, bys=trend.allowed_by,
            since=since_text, until=until_text, chart=bars(rows, label=label, value=value) if value else [],
            value=value, label=label, findings=findings, replays=replays, gates=gates,
        )  # fmt: skip

    # -- access --------------------------------------------------------------------------------------
    def _access(who: Who, *, shown_token: str = "", problem: str = "", status: int = 200) -> Response:
        requests = rt.access_desk.visible(who.session.as_caller())
        values: dict[str, Any] = {"requests": [r.to_json() for r in requests], "shown_token": shown_token}
        if who.operator:
            rows = read_access_log(rt.index)
            chain = verify_chain(rows)
            rows.sort(key=lambda r: (int(r.get("seq") or 0), str(r.get("at"))), reverse=True)
            values.update(
                tokens=rt.tokens.list(),
                sessions=console.sessions.list(),
                log=rows[:200],
                chain=chain,
                now=console.clock(),
            )
        return console.page(who, "access.html", status=status, problem=problem, **values)

    @router.get("/access")
    @guard
    def access(request: Request) -> Response:
        who = console.need(request)
        console.record(who, action="requests", outcome="allowed", detail="console access page")
        return _access(who)

    def _back() -> Response:
        return secured(RedirectResponse(console.url("/access"), status_code=303))

    @router.post("/access/requests/{request_id}/{verb}")
    @guard
    def decide(request: Request, request_id: str, verb: str, data: dict[str, str] = form) -> Response:
        who = console.need(request, operator=True)
        console.check_csrf(who, data)
        if verb not in ("approve", "refuse"):
            raise ContractError("approve or refuse", path="verb")
        reason = data.get("reason", "").strip()
        if not reason:
            return _access(who, problem="a decision needs a reason", status=422)
        expires = parse_duration(data.get("expires") or "30d", what="expires")
        rt.access_desk.decide(
            who.session.as_caller(),
            request_id[:200],
            approve=verb == "approve",
            reason=reason[:500],
            expires_in=expires,
        )
        return _back()

    @router.post("/access/requests")
    @guard
    def file_request(request: Request, data: dict[str, str] = form) -> Response:
        who = console.need(request)
        console.check_csrf(who, data)
        caller = who.session.as_caller()
        now = console.clock()
        since, until = data.get("since", "").strip(), data.get("until", "").strip()
        made = new_request(
            caller=caller.identity,
            scope=caller.scope,
            legal_basis=data.get("legal_basis", "").strip(),
            reference=data.get("reference", "").strip(),
            purpose=data.get("purpose", "").strip(),
            now=now,
            decisions=tuple(d.strip() for d in data.get("decisions", "").split(",") if d.strip()),
            agent=data.get("agent", "").strip(),
            since=_when(since, now=now, what="since") if since else None,
            until=_when(until, now=now, what="until") if until else None,
        )
        rt.access_desk.file(caller, made)
        return _back()

    @router.post("/access/tokens")
    @guard
    def create_token(request: Request, data: dict[str, str] = form) -> Response:
        who = console.need(request, operator=True)
        console.check_csrf(who, data)
        now = console.clock()
        expires = data.get("expires", "").strip()
        subjects = tuple(s.strip() for s in data.get("subjects", "").split(",") if s.strip())
        token, record = rt.tokens.create(
            caller=data.get("caller", "").strip(),
            scope=data.get("scope", "").strip(),
            now=now,
            subjects=subjects,
            expires_at=now + parse_duration(expires) if expires else None,
            created_by=who.session.caller,
        )
        console.record(
            who,
            action="token-create",
            outcome="allowed",
            detail=f"token {record.token_id} for {record.caller} ({record.scope})",
        )
        return _access(who, shown_token=token)

    @router.post("/access/tokens/{token_id}/revoke")
    @guard
    def revoke_token(request: Request, token_id: str, data: dict[str, str] = form) -> Response:
        who = console.need(request, operator=True)
        console.check_csrf(who, data)
        record = rt.tokens.revoke(token_id[:64], now=console.clock())
        console.record(
            who, action="token-revoke", outcome="allowed", detail=f"token {record.token_id} revoked"
        )
        return _back()

    @router.post("/access/sessions/{session_id}/revoke")
    @guard
    def revoke_session(request: Request, session_id: str, data: dict[str, str] = form) -> Response:
        who = console.need(request, operator=True)
        console.check_csrf(who, data)
        record = console.sessions.revoke(session_id[:64], now=console.clock())
        console.record(
            who,
            action="session-revoke",
            outcome="allowed",
            detail=f"console session {record.session_id} revoked",
        )
        return _back()

"""The console's pages (DESIGN decision 22): server-rendered HTML over the services the CLI and the
audit API use — the access gate, the index, the stored-capture reader, verify, the evidence bundle.

Routes (under the prefix, ``/console`` by default)::

    GET  /signin, POST /signin              paste a blackbox token once: a server-side session
    GET  /signin/link?code=, POST same      a one-time sign-in link (``blackbox demo`` prints one)
    GET  /signin/oidc, /signin/oidc/callback   an OIDC issuer, when configured (consumers.console.oidc_routes)
    POST /signout
    GET  /decisions                         the list: filters in the URL, keyset pages, counts (logged: ``list``)
    GET  /decisions/{id}                    one decision (through the gate: ``show``)
    GET  /decisions/{id}/capture.json       the stored capture (``export``)
    GET  /decisions/{id}/bundle.json        the evidence bundle (``export``)
    GET  /decisions/{id}/model-calls/{n}/{request|response}   a wire capture's exact bytes (``export``)
    GET  /trends, /access (+ POSTs)         see :mod:`consumers.console.admin`
    GET  /static/console.css, /static/console.js   the fixed static set (the script: consumers/console/static)

Every page works without script; the CSP forbids inline script and every POST carries a CSRF token.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Depends, Request
from starlette.responses import RedirectResponse, Response

from consumers.console.admin import add_admin_routes
from consumers.console.core import COOKIE, PRE_COOKIE, Console, Who, guarded, safe_id
from consumers.console.decision import body_bytes, decision_view, inclusion
from consumers.console.investigate import add_investigate_routes
from consumers.console.oidc_routes import add_oidc_routes
from consumers.console.web import SECURITY_HEADERS, pre_csrf, same, secured, static_file
from consumers.index.listing import Order, decision_access, filter_from, list_decisions, manifests_of
from consumers.privacy.manifest import gate_manifest
from schemas.errors import ContractError, VerificationError

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import datetime

    from consumers.app.runtime import Runtime
    from consumers.console.sessions import ConsoleSessions
    from consumers.verify.bundle import Prover

__all__ = ["console_router"]

FILTERS = (
    "since", "until", "agent", "outcome", "failed", "consequential", "capture_level", "fidelity",
    "prompt_version", "model_version", "pact", "finding", "legal_hold", "erased", "origin_user", "id_prefix",
)  # fmt: skip


def _download(data: bytes, *, name: str, media: str) -> Response:
    headers = {**SECURITY_HEADERS, "Content-Disposition": f'attachment; filename="{name}"'}
    return Response(data, media_type=media, headers=headers)


def _filename(decision_id: str, suffix: str) -> str:
    return "".join(c if c.isalnum() or c in "_.-" else "_" for c in decision_id) + suffix


def console_router(
    rt: Runtime,
    *,
    prefix: str = "/console",
    clock: Callable[[], datetime] | None = None,
    prover: Prover | None = None,
    sessions: ConsoleSessions | None = None,
) -> APIRouter:
    """The console's routes over ``rt``, to include in the one application (``include_router``)."""
    console = Console(
        rt,
        prefix=prefix,
        clock=clock,
        prover=prover if prover is not None else rt.bundle_prover(),
        sessions=sessions,
    )
    router = APIRouter(prefix=prefix, include_in_schema=False)
    guard = guarded(console)
    Form = Depends(console.form)

    @router.get("/static/{name}")
    def static(name: str) -> Response:
        found = static_file(name)
        if found is None:
            return secured(Response("not found", status_code=404, media_type="text/plain"))
        data, media = found
        return Response(data, media_type=media, headers={**SECURITY_HEADERS, "Cache-Control": "max-age=300"})

    # -- sign-in ------------------------------------------------------------------------------------
    def _signin_page(request: Request, template: str, *, status: int = 200, **values: Any) -> Response:
        token = pre_csrf()
        issuer = console.oidc.issuer if console.oidc else None
        response = console.page(None, template, status=status, csrf=token, oidc_issuer=issuer, **values)
        response.set_cookie(
            PRE_COOKIE,
            token,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path=prefix,
        )
        return response

    def _pre_ok(request: Request, form: dict[str, str]) -> bool:
        return same(form.get("csrf", ""), request.cookies.get(PRE_COOKIE, ""))

    @router.get("")
    @router.get("/")
    @guard
    def home(request: Request) -> Response:
        target = "/decisions" if console.who(request) else "/signin"
        return secured(RedirectResponse(console.url(target), status_code=303))

    @router.get("/signin")
    @guard
    def signin_form(request: Request) -> Response:
        return _signin_page(request, "signin.html")

    @router.post("/signin")
    @guard
    def signin(request: Request, form: dict[str, str] = Form) -> Response:
        if not _pre_ok(request, form):
            return _signin_page(request, "signin.html", status=403, problem="the form expired; try again")
        now = console.clock()
        record, why = rt.tokens.resolve(form.get("token", "").strip(), now=now)
        if record is None:
            console.record(None, action="signin", outcome="denied", detail=f"console sign-in refused: {why}")
            return _signin_page(request, "signin.html", status=401, problem=f"not signed in: {why}")
        cookie, session = console.sessions.open(
            record.caller_for(), credential=f"token:{record.token_id}", now=now
        )
        who = Who(session, cookie)
        console.record(
            who, action="signin", outcome="allowed", detail=f"console sign-in with token:{record.token_id}"
        )
        return console.set_session(
            RedirectResponse(console.url("/decisions"), status_code=303), request, cookie
        )

    @router.get("/signin/link")
    @guard
    def link_form(request: Request, code: str = "") -> Response:
        return _signin_page(request, "link.html", code=code[:200])

    @router.post("/signin/link")
    @guard
    def link_signin(request: Request, form: dict[str, str] = Form) -> Response:
        if not _pre_ok(request, form):
            return _signin_page(
                request,
                "link.html",
                status=403,
                code=form.get("code", "")[:200],
                problem="the form expired; try again",
            )
        redeemed = console.sessions.redeem_link(form.get("code", "")[:200], now=console.clock())
        if redeemed is None:
            console.record(
                None,
                action="signin",
                outcome="denied",
                detail="console sign-in link unknown, used or expired",
            )
            return _signin_page(
                request, "link.html", status=401, code="", problem="this link is unknown, used or expired"
            )
        caller, credential = redeemed
        cookie, session = console.sessions.open(caller, credential=credential, now=console.clock())
        console.record(
            Who(session, cookie),
            action="signin",
            outcome="allowed",
            detail=f"console sign-in with {credential}",
        )
        return console.set_session(
            RedirectResponse(console.url("/decisions"), status_code=303), request, cookie
        )

    @router.post("/signout")
    @guard
    def signout(request: Request, form: dict[str, str] = Form) -> Response:
        who = console.need(request)
        console.check_csrf(who, form)
        console.sessions.revoke(who.session.session_id, now=console.clock())
        console.record(who, action="signout", outcome="allowed", detail="signed out")
        response = secured(RedirectResponse(console.url("/signin"), status_code=303))
        response.delete_cookie(COOKIE, path=prefix, httponly=True, samesite="strict")
        return response

    # -- the decision list --------------------------------------------------------------------------
    @router.get("/decisions")
    @guard
    def decisions(request: Request) -> Response:
        who = console.need(request)
        query = {k: request.query_params.get(k, "") for k in FILTERS}
        order: Order = "asc" if request.query_params.get("order") == "asc" else "desc"
        after = request.query_params.get("after", "")
        try:
            flt = filter_from(query, lookup=console.ids.lookup)
        except ContractError as exc:
            return console.page(
                who, "decisions.html", status=422, query=query, order=order, problem=str(exc), page=None
            )
        caller = who.session.as_caller()
        if caller.scope == "counterparty":  # only decisions about its own subjects, matched on the keyed hash
            mine = tuple(h for s in caller.counterparty_subjects() for h in console.ids.lookup(s))
            wanted = set(flt.origin_user)
            flt = dataclasses.replace(
                flt, origin_user=tuple(h for h in mine if not wanted or h in wanted) or ("-",)
            )
        page = list_decisions(rt.index, flt, order=order, after=after, limit=50)
        hidden = 0
        if caller.scope != "operator":
            manifests = manifests_of(rt.index, [r["decision_id"] for r in page.rows])
            subjects = [
                gate_manifest(manifests.get(r["decision_id"], ""), console.ids)
                or {"decisionId": r["decision_id"], "agentId": r["agent_id"]}
                for r in page.rows
            ]
            judged = rt.gate.judge_many(caller, subjects, action="show")
            allowed = {j.decision_id for j in judged if j.outcome == "allowed"}
            hidden = len(page.rows) - len(allowed)
            page = dataclasses.replace(page, rows=[r for r in page.rows if r["decision_id"] in allowed])
        console.record(
            who,
            action="list",
            outcome="allowed",
            detail=f"filter: {flt.described()} order={order}{' after=' + after if after else ''}; "
            f"{len(page.rows)} shown, {hidden} outside the scope",
        )
        shared = {k: v for k, v in query.items() if v}
        return console.page(
            who,
            "decisions.html",
            query=query,
            shared=shared,
            order=order,
            page=page,
            hidden=hidden,
            after=after,
        )

    # -- one decision -------------------------------------------------------------------------------
    def _load(who: Who, decision_id: str, action: str) -> Any:
        from consumers.storage.reader import load_capture

        return load_capture(
            safe_id(decision_id),
            index=rt.index,
            store=rt.blob_store,
            gate=rt.gate,
            caller=who.session.as_caller(),
            action=action,
            ids=console.ids,
        )

    @router.get("/decisions/{decision_id}")
    @guard
    def decision(request: Request, decision_id: str) -> Response:
        from consumers.privacy.view import privacy_view
        from consumers.verify.stored import judge_shown
        from consumers.verify.verdict import Verdict
        from producers.privacy.protect import vault_from_settings

        who = console.need(request)
        trust = console.trust()
        try:
            shown = _load(who, decision_id, "show")
        except VerificationError as exc:  # allowed and logged, but the stored bytes are not the recorded ones
            verdict = Verdict.failed(decision_id, exc, checked_at=console.clock())
            return console.page(who, "unreadable.html", status=409, decision_id=decision_id, verdict=verdict)
        verdict = judge_shown(shown, index=rt.index, trust=trust, at=console.clock(), ids=console.ids)
        # personal data: placeholders, unless asked and the grant includes personal data (logged `reveal`)
        privacy = privacy_view(
            shown.capture,
            vault=vault_from_settings(rt.settings, rt.blob_store),
            reveal_original=request.query_params.get("reveal") == "1",
            verified=verdict.verified,
            gate=rt.gate,
            caller=who.session.as_caller(),
        )
        log = (
            inclusion(shown.capture, console.prover, shown.decision_id)
            if shown.capture.get("signature")
            else None
        )
        view = decision_view(
            decision_id=shown.decision_id,
            capture=privacy.revealed or shown.capture,
            row=shown.row,
            content_state=shown.content_state,
            note=shown.to_json()["note"],
            verdict=verdict,
            trust=trust,
            log=log or inclusion({}, None, shown.decision_id),
            quarantine=list(shown.quarantine),
        )
        history = decision_access(rt.index, shown.decision_id) if who.operator else []
        return console.page(
            who, "decision.html", view=view, history=history, now=console.clock(), privacy=privacy.state
        )

    @router.get("/decisions/{decision_id}/capture.json")
    @guard
    def capture_json(request: Request, decision_id: str) -> Response:
        who = console.need(request)
        shown = _load(who, decision_id, "export")
        data = json.dumps(shown.capture, ensure_ascii=False, indent=2).encode("utf-8")
        return _download(data, name=_filename(shown.decision_id, ".capture.json"), media="application/json")

    @router.get("/decisions/{decision_id}/bundle.json")
    @guard
    def bundle_json(request: Request, decision_id: str) -> Response:
        from consumers.verify.bundle import export_bundle

        who = console.need(request)
        bundle = export_bundle(
            safe_id(decision_id),
            index=rt.index,
            store=rt.blob_store,
            trust=console.trust(),
            gate=rt.gate,
            caller=who.session.as_caller(),
            prover=console.prover,
            now=console.clock(),
            ids=console.ids,
        )
        data = json.dumps(bundle, ensure_ascii=False, indent=2).encode("utf-8")
        return _download(data, name=_filename(decision_id, ".bundle.json"), media="application/json")

    @router.get("/decisions/{decision_id}/model-calls/{number}/{which}")
    @guard
    def model_call_bytes(request: Request, decision_id: str, number: int, which: str) -> Response:
        who = console.need(request)
        if which not in ("request", "response"):
            raise ContractError("request or response", path="which")
        shown = _load(who, decision_id, "export")
        calls = [
            c
            for c in (shown.capture.get("executionTrace") or {}).get("modelCalls") or []
            if isinstance(c, dict)
        ]
        if not 0 <= number < len(calls):
            raise ContractError(f"the capture has {len(calls)} model call(s)", path="number")
        data = body_bytes(calls[number], which)
        if data is None:
            raise ContractError(f"the {which} body is absent from this capture", path=which)
        name = _filename(shown.decision_id, f".call{number}.{which}.bin")
        return _download(data, name=name, media="application/octet-stream")

    if console.oidc is not None:
        add_oidc_routes(router, console, console.oidc, guard=guard, signin_page=_signin_page)
    add_admin_routes(router, console, guard=guard, form=Form)
    add_investigate_routes(router, console, guard=guard, form=Form)
    return router

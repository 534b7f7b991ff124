"""The audit endpoint's application: every route authenticates, is rate limited, passes the one access
gate and is logged — allowed or refused — before anything is served (DESIGN decisions 12 and 14).

One router of the one HTTP application (:mod:`consumers.web`); ``/openapi.json`` documents it::

    GET  /v1/decisions/{id}                 the capture, as the caller's scope sees it (consumers.audit.views)
    GET  /v1/decisions/{id}/verification    the read-time verdict (blackbox verify ID)
    GET  /v1/decisions/{id}/replays         the replay runs recorded for it
    GET  /v1/decisions/{id}/bundle          the evidence bundle (producers.evidence.bundle)
    GET  /v1/agents/{id}/record             the agent's behavioural record, signed by the service
                                            (operators; others with a grant naming the agent)
    POST /v1/access-requests                a regulator or counterparty asks for access, with authority
    GET  /v1/access-requests                an operator sees every request; others their own
    POST /v1/access-requests/{id}/approve   operator: the request becomes a grant with an expiry
    POST /v1/access-requests/{id}/refuse    operator

Errors are ``{"error": reason, "status": code}`` (plus ``part`` for evidence that does not verify):
401 no or bad credential, 403 refused by the gate (or no such decision, for anyone but an operator:
the two look the same), 404 no such decision (operators), 413 body too large, 422 malformed body,
429 rate limited (``Retry-After``), 503 the access log cannot be written (nothing is served) or a
store is unreachable, 500 anything else — never a traceback. What is logged: :mod:`.errors`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Depends, FastAPI

from consumers.access.files import parse_duration
from consumers.access.log import AccessRecord
from consumers.access.requests import new_request
from consumers.audit.auth import Principal
from consumers.audit.context import MAX_ID, Audit
from consumers.audit.errors import ApiError
from consumers.audit.requests import AccessRequestBody, DecisionBody
from consumers.audit.routing import audit_route, mapped
from consumers.audit.store import replay_runs
from consumers.audit.views import capture_view, subject, verification_view
from consumers.privacy.ids import index_ids
from producers.evidence.trust import parse_time
from schemas.errors import ContractError, TransparencyLogError, VerificationError

if TYPE_CHECKING:
    from consumers.app.runtime import Runtime
    from consumers.verify.bundle import Prover

__all__ = ["ApiError", "audit_router", "create_app"]

ACTIONS = ("show", "verify", "replays", "export", "record", "request", "requests", "approve", "refuse")
RECORD_WINDOW = timedelta(days=30)  # the record's default window, as `blackbox record`


def _decision_id(value: str) -> str:
    if not value or len(value) > MAX_ID or any(ord(c) < 0x20 for c in value):
        raise ContractError(f"not an id (at most {MAX_ID} printable characters)", path="id")
    return value


def create_app(
    rt: Runtime,
    *,
    clock: Callable[[], datetime] | None = None,
    prover: Prover | None = None,
) -> FastAPI:
    """The audit endpoint alone, as the one application with just this surface (tests, benchmarks)."""
    from consumers.web.app import build_app

    return build_app(routers=[audit_router(rt, clock=clock, prover=prover)])


def audit_router(
    rt: Runtime, *, clock: Callable[[], datetime] | None = None, prover: Prover | None = None
) -> APIRouter:
    """The audit endpoint over ``rt`` (its index, blob store, grants, tokens and settings).

    ``clock``: the time the gate, tokens and grants are judged at (tests move it). ``prover``: the
    transparency log's inclusion proofs for bundles (default :meth:`consumers.app.runtime.Runtime.bundle_prover`).
    ``console``: also serve the console's pages under ``/console``.
    """

    audit = Audit(rt, clock=clock or (lambda: datetime.now(UTC)), prover=prover or rt.bundle_prover())
    ids = index_ids(rt.settings)  # unseals the origin ids of the index's manifests (the gate reads them)
    app = APIRouter(route_class=audit_route(audit), tags=["audit"])
    # each route's first dependency: the authenticated caller, for that route's action
    As = {action: Depends(audit.authenticated(action)) for action in ACTIONS}

    # -- reads ------------------------------------------------------------------------------------
    @app.get("/v1/decisions/{decision_id}", summary="The capture, as your scope sees it")
    def read_capture(decision_id: str, principal: Principal = As["show"]) -> dict[str, Any]:
        from consumers.storage.reader import load_capture
        from consumers.verify.stored import judge_shown
        from consumers.verify.verdict import Verdict

        with mapped(audit, principal, "show", decision_id[:MAX_ID]):
            decision_id = _decision_id(decision_id)
            try:
                shown = load_capture(
                    decision_id,
                    index=rt.index,
                    store=rt.blob_store,
                    gate=audit.gate,
                    caller=principal.caller,
                    ids=ids,
                )
            except (
                VerificationError
            ) as exc:  # allowed and logged, but the stored bytes are not the recorded ones
                failed = Verdict.failed(decision_id, exc, checked_at=audit.clock())
                scope = principal.caller.scope
                return {
                    "decisionId": decision_id,
                    "verification": verification_view(failed.to_json(), scope),
                    "capture": None,
                }
            verdict = judge_shown(
                shown, index=rt.index, trust=audit.trust.current(), at=audit.clock(), ids=ids
            )
            return capture_view(shown, verdict.to_json(), principal.caller.scope)

    @app.get("/v1/decisions/{decision_id}/verification", summary="Is the stored capture evidence?")
    def read_verification(decision_id: str, principal: Principal = As["verify"]) -> dict[str, Any]:
        from consumers.verify.stored import stored_verdict

        with mapped(audit, principal, "verify", decision_id[:MAX_ID]):
            decision_id = _decision_id(decision_id)
            audit.gate.authorize(principal.caller, subject(rt.index, decision_id, ids=ids), action="verify")
            verdict = stored_verdict(
                decision_id,
                index=rt.index,
                store=rt.blob_store,
                trust=audit.trust.current(),
                at=audit.clock(),
                ids=ids,
            )
            return {"decisionId": decision_id, **verification_view(verdict.to_json(), principal.caller.scope)}

    @app.get("/v1/decisions/{decision_id}/replays", summary="Replay runs of the decision")
    def read_replays(decision_id: str, principal: Principal = As["replays"]) -> dict[str, Any]:
        with mapped(audit, principal, "replays", decision_id[:MAX_ID]):
            decision_id = _decision_id(decision_id)
            audit.gate.authorize(principal.caller, subject(rt.index, decision_id, ids=ids), action="replays")
            return {"decisionId": decision_id, "runs": replay_runs(rt.index, decision_id)}

    @app.get(
        "/v1/decisions/{decision_id}/bundle", summary="The evidence bundle (verifies offline with the SDK)"
    )
    def read_bundle(decision_id: str, principal: Principal = As["export"]) -> dict[str, Any]:
        from consumers.verify.bundle import export_bundle

        with mapped(audit, principal, "export", decision_id[:MAX_ID]):
            decision_id = _decision_id(decision_id)
            return export_bundle(
                decision_id,
                index=rt.index,
                store=rt.blob_store,
                trust=audit.trust.current(),
                gate=audit.gate,
                caller=principal.caller,
                prover=audit.prover,
                now=audit.clock(),
                ids=ids,
            )

    @app.get(
        "/v1/agents/{agent_id}/record",
        summary="The agent's behavioural record, as a DSSE envelope signed by the service's log key",
    )
    def read_record(
        agent_id: str, since: str | None = None, principal: Principal = As["record"]
    ) -> dict[str, Any]:
        from consumers.pacts.attestation import sign_agent_record
        from consumers.pacts.record import agent_record
        from consumers.pacts.store import agent_known
        from consumers.tlog.checkpoints import load_log_signer

        with mapped(audit, principal, "record", agent_id[:MAX_ID]):
            agent_id = _decision_id(agent_id)
            try:
                start = parse_time(since) if since else audit.clock() - RECORD_WINDOW
            except ValueError as exc:
                raise ContractError(f"not an ISO-8601 time: {since!r}", path="since") from exc
            audit.gate.authorize_agent(principal.caller, agent_id, action="record")
            if not agent_known(rt.index, agent_id):
                audit.refuse(action="record", status=404, reason="no such agent", principal=principal)
                raise ApiError(404, f"no decisions of agent {agent_id} in the index")
            try:
                signer = load_log_signer(rt.settings.resolved_tlog_key, rt.settings.tlog_origin, create=False)
            except TransparencyLogError as exc:
                raise ApiError(503, f"the service has no signing key yet: {exc}") from exc
            return sign_agent_record(
                agent_record(rt.index, agent_id, since=start).to_json(), signer, issued_at=audit.clock()
            )

    # -- access requests ----------------------------------------------------------------------------
    @app.post(
        "/v1/access-requests", status_code=201, summary="Ask for access, naming your authority and purpose"
    )
    def file_request(body: AccessRequestBody, principal: Principal = As["request"]) -> dict[str, Any]:
        caller = principal.caller
        with mapped(audit, principal, "request", ""):
            if caller.scope == "operator":
                audit.refuse(
                    action="request",
                    status=403,
                    reason="operators are not granted access by request",
                    principal=principal,
                )
                raise ApiError(
                    403,
                    "operators read under the default grant; access requests are for regulators and counterparties",
                )
            try:
                made = new_request(
                    caller=caller.identity,
                    scope=caller.scope,
                    legal_basis=body.authority.legalBasis,
                    reference=body.authority.reference,
                    purpose=body.purpose,
                    now=audit.clock(),
                    decisions=tuple(body.decisions),
                    agent=body.agent or "",
                    since=body.since,
                    until=body.until,
                )
            except ContractError as exc:
                audit.refuse(action="request", status=422, reason=str(exc), principal=principal)
                raise ApiError(422, str(exc)) from exc
            return audit.desk.file(caller, made).to_json()

    @app.get("/v1/access-requests", summary="Access requests: all for an operator, your own otherwise")
    def list_requests(
        principal: Principal = As["requests"],
    ) -> dict[str, Any]:
        with mapped(audit, principal, "requests", ""):
            visible = audit.desk.visible(principal.caller)
            audit.gate.record(
                [
                    AccessRecord(
                        at=audit.clock(),
                        caller=principal.caller.identity,
                        scope=principal.caller.scope,
                        decision_id="",
                        agent_id="",
                        action="requests",
                        reason=principal.caller.reason,
                        outcome="allowed",
                        detail=f"{len(visible)} request(s) listed; {principal.credential}",
                    )
                ]
            )
            return {"requests": [r.to_json() for r in visible]}

    def _decide(
        request_id: str, body: DecisionBody, principal: Principal, *, approve: bool
    ) -> dict[str, Any]:
        action = "approve" if approve else "refuse"
        with mapped(audit, principal, action, ""):
            expires_in = parse_duration(body.expires, what="expires")
            try:
                audit.clock() + expires_in
            except OverflowError:  # past year 9999: a 422 naming the field, never a 500
                raise ContractError(f"{body.expires!r} ends after the year 9999", path="expires") from None
            return audit.desk.decide(
                principal.caller,
                _decision_id(request_id),
                approve=approve,
                reason=body.reason,
                expires_in=expires_in,
            ).to_json()

    @app.post(
        "/v1/access-requests/{request_id}/approve", summary="Operator: grant the request until it expires"
    )
    def approve(
        request_id: str,
        body: DecisionBody,
        principal: Principal = As["approve"],
    ) -> dict[str, Any]:
        return _decide(request_id, body, principal, approve=True)

    @app.post("/v1/access-requests/{request_id}/refuse", summary="Operator: refuse the request")
    def refuse(
        request_id: str,
        body: DecisionBody,
        principal: Principal = As["refuse"],
    ) -> dict[str, Any]:
        return _decide(request_id, body, principal, approve=False)

    return app

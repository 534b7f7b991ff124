"""The route class of every audit route, and the blackbox errors raised inside a route as the
endpoint's answers (what is logged: :mod:`.errors`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, MutableMapping
from typing import Any

from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from starlette.requests import Request

from consumers.access.gate import AccessLogUnavailable
from consumers.audit.auth import Principal
from consumers.audit.context import Audit
from consumers.audit.errors import ApiError, error_json
from consumers.web.bodies import BodyLimits, BodyRefused, ClientGone, read_body
from schemas.errors import (
    AccessDenied,
    BlackboxError,
    BlobStoreError,
    CaptureNotFound,
    ContractError,
    IndexError_,
    VerificationError,
)

__all__ = ["audit_route", "mapped"]


def audit_route(audit: Audit) -> type[APIRoute]:
    """The route class of every audit route: the body read under the endpoint's limit before
    anything else, then the route, its errors answered (and logged) as the module docstring says."""
    limits = BodyLimits(max_bytes=audit.max_body, idle_seconds=10.0, total_seconds=30.0)

    class AuditRoute(APIRoute):
        def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
            route = super().get_route_handler()

            async def handler(request: Request) -> Response:
                if request.method not in ("GET", "HEAD", "OPTIONS"):
                    try:
                        body = await read_body(request, limits)
                    except BodyRefused as exc:
                        return audit.anonymous_refusal(request, exc.status, exc.reason)
                    except ClientGone:
                        return Response(status_code=400)
                    request = Request(request.scope, _replay(body))
                try:
                    return await route(request)
                except ApiError as exc:
                    return error_json(exc.status, exc.reason, part=exc.part, headers=exc.headers)
                except AccessLogUnavailable as exc:
                    return error_json(503, str(exc))  # fail closed: nothing is served without its log row
                except RequestValidationError as exc:
                    return _invalid(audit, request, exc)

            return handler

    return AuditRoute


def _replay(body: bytes) -> Callable[[], Awaitable[MutableMapping[str, Any]]]:
    sent = False

    async def receive() -> MutableMapping[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return receive


def _invalid(audit: Audit, request: Request, exc: RequestValidationError) -> JSONResponse:
    """422. After authentication the caller learns where its body is wrong and the log keeps the
    error's kind only (a member name is the sender's choice); before it (a body that is not JSON is
    refused before anyone is known) nothing is logged and the refusal is limited per address."""
    errors = exc.errors()
    principal: Principal | None = getattr(request.state, "principal", None)
    if principal is None:
        kinds = ", ".join(sorted({str(e.get("type", "invalid")) for e in errors})[:3]) or "invalid"
        return audit.anonymous_refusal(request, 422, f"invalid request ({kinds})")
    first = errors[0] if errors else {}
    where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
    reason = f"invalid request: {where}: {first.get('msg', 'malformed')}" if where else "invalid request"
    kinds = ", ".join(sorted({str(e.get("type", "invalid")) for e in errors})[:3]) or "invalid"
    try:
        audit.refuse(
            action=getattr(request.state, "action", "request"),
            status=422,
            reason=f"invalid request body ({kinds})",
            principal=principal,
        )
    except AccessLogUnavailable as log_error:
        return error_json(503, str(log_error))
    return error_json(422, reason)


class mapped:  # used as a ``with`` block, named like contextlib's
    """Blackbox errors raised inside a route, as the endpoint's JSON errors (logging what the gate did not).

    ``CaptureNotFound`` is 404 for an operator only: anyone else gets the same 403 whether the
    decision exists or not, so an id's existence is not an oracle.
    """

    def __init__(self, audit: Audit, principal: Principal, action: str, decision_id: str) -> None:
        self._audit, self._principal, self._action, self._decision_id = audit, principal, action, decision_id

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, _tb: object) -> None:
        if exc is None or isinstance(exc, ApiError) or not isinstance(exc, BlackboxError):
            return
        if isinstance(exc, AccessLogUnavailable):
            raise ApiError(503, str(exc)) from exc
        if isinstance(exc, AccessDenied):  # the gate logged it
            raise ApiError(
                403, self._audit.denial_text(self._principal, str(exc), self._action, self._decision_id)
            ) from exc
        if isinstance(exc, CaptureNotFound):
            if self._principal.caller.scope != "operator":
                self._log(403, "no such decision")
                raise ApiError(
                    403, self._audit.not_granted(self._principal, self._action, self._decision_id)
                ) from exc
            self._log(404, str(exc))
            raise ApiError(404, str(exc)) from exc
        if isinstance(exc, VerificationError):
            self._log(409, str(exc))
            raise ApiError(409, f"not evidence: {exc}", part=exc.part) from exc
        if isinstance(exc, ContractError):
            self._log(422, str(exc))
            raise ApiError(422, str(exc)) from exc
        if isinstance(exc, IndexError_ | BlobStoreError):
            raise ApiError(503, f"a store is unavailable: {type(exc).__name__}") from exc
        raise ApiError(500, f"{type(exc).__name__}: {exc}") from exc

    def _log(self, status: int, reason: str) -> None:
        try:
            self._audit.refuse(
                action=self._action,
                status=status,
                reason=reason,
                principal=self._principal,
                decision_id=self._decision_id,
            )
        except AccessLogUnavailable as exc:
            raise ApiError(503, str(exc)) from exc

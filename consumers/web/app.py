"""The one HTTP application (DESIGN decision 21): one FastAPI app, one router per surface.

What every surface shares is set here, once:

- every response carries ``Cache-Control: no-store`` and ``X-Content-Type-Options: nosniff``
  (capture content must not sit in a shared cache, nor be sniffed into HTML);
- ``/docs`` and ``/redoc`` are off (they load Swagger UI from a CDN); ``/openapi.json`` documents the
  routes;
- a request no route answers (404, 405), or a body that is not JSON (422 before any route ran), is
  answered cheaply as ``{"error", "status"}``, written to no log, and limited per client address
  (429 with ``Retry-After``): a flood costs a token bucket lookup, never a log row;
- anything unexpected is a 500 naming its kind, never a traceback.

Which routers are included is :mod:`consumers.web.surfaces`' business.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from consumers.web.limits import RateLimiter

__all__ = ["SECURITY_HEADERS", "build_app", "error_response"]

log = logging.getLogger("blackbox.http")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"cache-control", b"no-store"),
    (b"x-content-type-options", b"nosniff"),
)
STRAY_RATE, STRAY_BURST = 5.0, 20  # per client address, for requests no route answers


def error_response(status: int, reason: str, *, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": reason, "status": status}, status_code=status, headers=headers)


def client_address(request: Request) -> str:
    return request.client.host if request.client else "-"


def build_app(*, routers: Sequence[APIRouter], title: str = "blackbox") -> FastAPI:
    """The application serving ``routers`` (see the module docstring for what they share)."""
    app = FastAPI(
        title=title,
        version="1",
        description="Authenticated, logged access to agent captures; the OTLP/HTTP receiver; metrics and health.",
        docs_url=None,
        redoc_url=None,
    )
    strays = RateLimiter(rate=STRAY_RATE, burst=STRAY_BURST)

    def stray(
        request: Request, status: int, reason: str, headers: dict[str, str] | None = None
    ) -> JSONResponse:
        wait = strays.take(f"addr:{client_address(request)}")
        if wait > 0:
            return error_response(429, "rate limited", headers={"Retry-After": str(max(1, round(wait)))})
        return error_response(status, reason, headers=headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        reason = "no such route" if exc.status_code == 404 else str(exc.detail)
        return stray(request, exc.status_code, reason, headers=dict(exc.headers or {}))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        # The reason is the error's kind only: a member name chosen by the sender is never echoed.
        kinds = sorted({str(e.get("type", "invalid")) for e in exc.errors()}) or ["invalid"]
        return stray(request, 422, f"invalid request ({', '.join(kinds[:3])})")

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.error("unexpected %s: %s", type(exc).__name__, exc, exc_info=exc)
        return error_response(500, f"internal error ({type(exc).__name__})")

    for router in routers:
        app.include_router(router)
    app.add_middleware(SecurityHeaders)
    return app


class SecurityHeaders:
    """ASGI middleware: :data:`SECURITY_HEADERS` on every response, whatever produced it."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                names = {name for name, _ in SECURITY_HEADERS}
                headers = [(k, v) for k, v in message.get("headers") or [] if k.lower() not in names]
                message["headers"] = headers + list(SECURITY_HEADERS)
            await send(message)

        await self.app(scope, receive, with_headers)

"""The console's routes for signing in at an OIDC issuer (:mod:`consumers.console.oidc`)::

    GET  /signin/oidc             the sign-in page's "Sign in with <issuer>": off to the issuer
    GET  /signin/oidc/callback    where the issuer sends the browser back (?code=&state= or ?error=)

Starting is a link, not a form: the CSP's ``form-action 'self'`` also holds for a form's redirect, so
a form could not send the browser on to the issuer; starting changes nothing but a pending flow of
this browser's own. The flow cookie is HttpOnly and ``SameSite=Lax``: the issuer's redirect back is a
cross-site navigation, which a Strict cookie would not come with. For the same reason the callback
answers with a page that moves on to the decisions itself (a redirect would still count as
cross-site, and the Strict session cookie would not be sent with it). Every refusal is a sign-in page naming why, a ``signin`` row denied
in ``access_log`` and a warning in the service's log.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from consumers.console.core import Console, Who
from consumers.console.oidc import OidcSignIn, OidcSignInError
from consumers.console.web import secured

__all__ = ["FLOW_COOKIE", "add_oidc_routes"]

log = logging.getLogger("blackbox.console")
FLOW_COOKIE = "bbx_console_oidc"


def add_oidc_routes(
    router: APIRouter,
    console: Console,
    oidc: OidcSignIn,
    *,
    guard: Callable[..., Any],
    signin_page: Callable[..., Response],
) -> None:
    flow_path = console.url("/signin/oidc")

    def refused(request: Request, why: str, status: int) -> Response:
        log.warning("console OIDC sign-in at %s refused: %s", oidc.issuer, why)
        console.record(None, action="signin", outcome="denied", detail=f"console OIDC sign-in refused: {why}")
        response = signin_page(request, "signin.html", status=status, problem=f"not signed in: {why}")
        response.delete_cookie(FLOW_COOKIE, path=flow_path, httponly=True, samesite="lax")
        return response

    @router.get("/signin/oidc")
    @guard
    def oidc_begin(request: Request) -> Response:
        fallback = f"{str(request.base_url).rstrip('/')}{console.url('/signin/oidc/callback')}"
        try:
            target, cookie = oidc.begin(redirect_url=oidc.redirect_url(fallback), now=console.clock())
        except OidcSignInError as exc:
            return refused(request, str(exc), exc.status)
        response = secured(RedirectResponse(target, status_code=303))
        response.set_cookie(
            FLOW_COOKIE,
            cookie,
            httponly=True,
            samesite="lax",
            secure=request.url.scheme == "https",
            path=flow_path,
            max_age=600,
        )
        return response

    @router.get("/signin/oidc/callback")
    @guard
    def oidc_callback(request: Request) -> Response:
        params = {k: v[:4096] for k, v in request.query_params.items()}
        try:
            caller = oidc.finish(params, cookie=request.cookies.get(FLOW_COOKIE, ""), now=console.clock())
        except OidcSignInError as exc:
            return refused(request, str(exc), exc.status)
        credential = f"oidc:{oidc.issuer}"
        cookie, session = console.sessions.open(caller, credential=credential, now=console.clock())
        who = Who(session, cookie)
        console.record(who, action="signin", outcome="allowed", detail=f"console sign-in with {credential}")
        page = console.page(who, "signed_in.html", target=console.url("/decisions"))
        response = console.set_session(page, request, cookie)
        response.delete_cookie(FLOW_COOKIE, path=flow_path, httponly=True, samesite="lax")
        return response

"""What every console route shares: the runtime's services, who is signed in, CSRF, and how errors
become pages.

Identity comes from the session cookie only, and a session comes only from a blackbox token (pasted
once), a one-time sign-in link or an OIDC issuer's ID token (:mod:`consumers.console.oidc`); a session
made from a token ends when the token is revoked.
Every error is a page with a reason, never a traceback.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec
from urllib.parse import parse_qs

from fastapi import Request
from starlette.responses import RedirectResponse, Response

from consumers.access.gate import AccessLogUnavailable
from consumers.access.log import AccessRecord
from consumers.console.oidc import OidcSignIn, oidc_signin_from_settings
from consumers.console.sessions import ConsoleSession, ConsoleSessions, console_file
from consumers.console.web import csrf_token, html, same, secured
from consumers.privacy.ids import IndexIds, index_ids
from producers.evidence import TrustStore
from schemas.errors import (
    AccessDenied,
    BlackboxError,
    BlobStoreError,
    CaptureNotFound,
    ContractError,
    IndexError_,
)

if TYPE_CHECKING:
    from consumers.app.runtime import Runtime
    from consumers.verify.bundle import Prover

__all__ = ["COOKIE", "PRE_COOKIE", "Console", "Stop", "guarded", "safe_id"]

log = logging.getLogger("blackbox.console")
COOKIE = "bbx_console"
PRE_COOKIE = "bbx_console_pre"
MAX_FORM = 65_536
_ID = re.compile(r"^[A-Za-z0-9_:.-]{1,200}$")


class Stop(Exception):
    """Leave the route with this response (a redirect to sign in, a refusal page)."""

    def __init__(self, response: Response) -> None:
        super().__init__("stop")
        self.response = response


def safe_id(value: str, *, what: str = "decision id") -> str:
    if not _ID.match(value):
        raise ContractError("letters, digits and _ : . - only, at most 200", path=what)
    return value


@dataclass(frozen=True, slots=True)
class Who:
    session: ConsoleSession
    cookie: str

    @property
    def csrf(self) -> str:
        return csrf_token(self.cookie)

    @property
    def operator(self) -> bool:
        return self.session.scope == "operator"


class Console:
    """The services the pages read through: the runtime's index, blob store, gate, desk and tokens."""

    def __init__(
        self,
        rt: Runtime,
        *,
        prefix: str,
        clock: Callable[[], datetime] | None = None,
        prover: Prover | None = None,
        sessions: ConsoleSessions | None = None,
        oidc: OidcSignIn | None = None,
    ) -> None:
        self.rt = rt
        self.prefix = prefix
        self.clock = clock or (lambda: datetime.now(UTC))
        self.prover = prover
        self.sessions = sessions or ConsoleSessions(console_file(rt.settings.data_dir))
        self.oidc = oidc or oidc_signin_from_settings(rt.settings)  # None: tokens and links only
        self._ids: IndexIds | None = None

    @property
    def ids(self) -> IndexIds:
        if self._ids is None:
            self._ids = index_ids(self.rt.settings)
        return self._ids

    def trust(self) -> TrustStore:
        path: Path = self.rt.settings.resolved_trust_store
        return TrustStore.load(path, missing_ok=True)

    def url(self, path: str = "") -> str:
        return f"{self.prefix}{path}"

    # -- who is signed in --------------------------------------------------------------------------
    def who(self, request: Request) -> Who | None:
        cookie = request.cookies.get(COOKIE, "")
        if not cookie or len(cookie) > 200:
            return None
        now = self.clock()
        session = self.sessions.resolve(cookie, now=now)
        if session is None:
            return None
        if session.credential.startswith("token:"):
            token_id = session.credential.removeprefix("token:")
            record = next((t for t in self.rt.tokens.list() if t.token_id == token_id), None)
            if record is None or record.state(now) != "active":
                return None
        return Who(session, cookie)

    def need(self, request: Request, *, operator: bool = False) -> Who:
        who = self.who(request)
        if who is None:
            raise Stop(secured(RedirectResponse(self.url("/signin"), status_code=303)))
        if operator and not who.operator:
            self.record(who, action="console", outcome="denied", detail=f"{request.url.path}: operators only")
            raise Stop(self.page(who, "error.html", status=403, title="Refused", reason="operators only"))
        return who

    def record(
        self, who: Who | None, *, action: str, outcome: str, detail: str, decision_id: str = ""
    ) -> None:
        session = who.session if who else None
        self.rt.gate.record(
            [
                AccessRecord(
                    at=self.clock(),
                    caller=session.caller if session else "-",
                    scope=session.scope if session else "-",
                    decision_id=decision_id,
                    agent_id="",
                    action=action,
                    reason="",
                    outcome="allowed" if outcome == "allowed" else "denied",
                    detail=f"{detail}; console session {session.session_id}" if session else detail,
                )
            ]
        )

    # -- forms -------------------------------------------------------------------------------------
    async def form(self, request: Request) -> dict[str, str]:
        body = await request.body()
        if len(body) > MAX_FORM:
            raise ContractError(f"the form is larger than {MAX_FORM} bytes", path="form")
        try:
            fields = parse_qs(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
        except UnicodeDecodeError as exc:
            raise ContractError("the form is not UTF-8", path="form") from exc
        return {k: v[0] for k, v in fields.items()}

    def check_csrf(self, who: Who, form: dict[str, str]) -> None:
        if not same(form.get("csrf", ""), who.csrf):
            self.record(who, action="console", outcome="denied", detail="a form without its CSRF token")
            raise Stop(
                self.page(
                    who, "error.html", status=403, title="Refused", reason="CSRF token missing or wrong"
                )
            )

    # -- pages -------------------------------------------------------------------------------------
    def page(self, who: Who | None, template: str, *, status: int = 200, **values: Any) -> Response:
        return html(template, status=status, who=who, base=self.prefix, **values)

    def set_session(self, response: Response, request: Request, cookie: str) -> Response:
        response.set_cookie(
            COOKIE,
            cookie,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path=self.prefix,
            max_age=int(self.sessions.lifetime.total_seconds()),
        )
        response.delete_cookie(PRE_COOKIE, path=self.prefix, httponly=True, samesite="strict")
        return response


P = ParamSpec("P")


def guarded(console: Console) -> Callable[[Callable[P, Response]], Callable[P, Response]]:
    """Run a route, turning blackbox errors into pages (the gate logged its own refusals)."""

    def wrap(route: Callable[P, Response]) -> Callable[P, Response]:
        @functools.wraps(route)
        def run(*args: P.args, **kwargs: P.kwargs) -> Response:
            try:
                return route(*args, **kwargs)
            except Stop as stop:
                return stop.response
            except Exception as exc:  # every failure is a page with a reason
                return _error_page(console, exc)

        return run

    return wrap


def _error_page(console: Console, exc: Exception) -> Response:
    if isinstance(exc, AccessLogUnavailable):
        status, title = 503, "The access log cannot be written: nothing is served"
    elif isinstance(exc, AccessDenied):
        status, title = 403, "Refused"
    elif isinstance(exc, CaptureNotFound):
        status, title = 404, "Not found"
    elif isinstance(exc, ContractError):
        status, title = 422, "Not understood"
    elif isinstance(exc, IndexError_ | BlobStoreError):
        status, title = 503, "A store is unavailable"
    elif isinstance(exc, BlackboxError):
        status, title = 500, type(exc).__name__
    else:
        log.error("console: unexpected %s", type(exc).__name__, exc_info=exc)
        return console.page(None, "error.html", status=500, title="Internal error", reason=type(exc).__name__)
    return console.page(None, "error.html", status=status, title=title, reason=str(exc))

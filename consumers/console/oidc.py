"""The console's sign-in at an OIDC issuer: the authorization-code flow with PKCE (S256).

Configured by ``BLACKBOX_OIDC_ISSUER`` and ``BLACKBOX_OIDC_CLIENT_ID`` (a client secret, the redirect
URL and the scopes asked for are optional). The issuer's endpoints come from its discovery document
(``<issuer>/.well-known/openid-configuration``, whose ``issuer`` must be the configured one), https
only (http on loopback, for tests), and never from a request.

:meth:`OidcSignIn.begin` makes a random ``state``, ``nonce`` and PKCE verifier and keeps them
server-side (:class:`PendingSignIns`) beside the sha256 of a random flow secret that the browser holds
in an HttpOnly cookie; the browser goes to the authorization endpoint with the state, the nonce and
the S256 challenge. :meth:`OidcSignIn.finish` takes the flow the cookie names (once: used or refused,
it is gone; ten minutes at most), checks the returned ``state`` against it, exchanges the code
server-to-server at the discovered token endpoint with the verifier, and verifies the ID token with
the audit endpoint's :class:`~consumers.audit.oidc.OidcVerifier` (signature by the issuer's JWKS,
``iss``, ``aud`` = the client id, ``exp``) and then its ``nonce`` and ``azp``. The caller is ``sub``,
its scope the claim ``BLACKBOX_OIDC_SCOPE_CLAIM``; a counterparty is tied to decisions whose
``originUserId`` is its ``sub``, as at the audit endpoint.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import httpx

from consumers.access.files import JsonFile
from consumers.access.scopes import Caller
from consumers.audit.errors import Unauthenticated
from consumers.audit.oidc import OidcVerifier
from consumers.replay.endpoints import is_loopback
from producers.evidence.trust import format_time, parse_time
from schemas.errors import BlackboxError, ContractError

__all__ = [
    "FLOW_LIFETIME",
    "OidcSignIn",
    "OidcSignInError",
    "PendingFlow",
    "PendingSignIns",
    "oidc_file",
    "oidc_signin_from_settings",
    "pkce_challenge",
]

FLOW_LIFETIME = timedelta(minutes=10)
DISCOVERY_TTL_S = 300.0
HTTP_TIMEOUT_S = 10.0
_MAX_KEPT = 2000
_OAUTH_ERROR = re.compile(r"^[a-z_]{1,60}$")


class OidcSignInError(BlackboxError):
    """A sign-in at the issuer that did not end in a session; ``status`` is the page's HTTP status."""

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


def oidc_file(data_dir: Path) -> Path:
    return data_dir / "access" / "console-oidc.json"


def pkce_challenge(verifier: str) -> str:
    """RFC 7636 S256: base64url(sha256(verifier)) without padding."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class PendingFlow:
    """One sign-in sent to the issuer and not yet back: what the callback is checked against."""

    flow_id: str
    state: str
    nonce: str
    verifier: str
    redirect_url: str
    expires_at: datetime


class PendingSignIns:
    """The flows begun and not yet finished, in ``path`` (server-side: the browser holds only a random
    secret whose sha256 is kept here)."""

    def __init__(self, path: Path) -> None:
        self._file = JsonFile(path)

    def begin(self, *, redirect_url: str, now: datetime) -> tuple[str, PendingFlow]:
        """A new flow; returns the browser's cookie value (shown once) and the flow."""
        flow = PendingFlow(
            flow_id=secrets.token_hex(6),
            state=secrets.token_urlsafe(24),
            nonce=secrets.token_urlsafe(24),
            verifier=secrets.token_urlsafe(48),  # 64 characters of the unreserved set (RFC 7636: 43-128)
            redirect_url=redirect_url,
            expires_at=now + FLOW_LIFETIME,
        )
        cookie = f"{flow.flow_id}.{secrets.token_urlsafe(32)}"

        def change(doc: dict[str, Any]) -> None:
            kept = [f for f in doc.get("flows", []) if parse_time(f["expires_at"]) > now]
            kept.append(
                {
                    "flow_id": flow.flow_id,
                    "sha256": _digest(cookie),
                    "state": flow.state,
                    "nonce": flow.nonce,
                    "verifier": flow.verifier,
                    "redirect_url": flow.redirect_url,
                    "expires_at": format_time(flow.expires_at),
                }
            )
            doc["flows"] = kept[-_MAX_KEPT:]

        self._file.update(change)
        return cookie, flow

    def take(self, cookie: str, *, now: datetime) -> PendingFlow | None:
        """The unexpired flow ``cookie`` names, removed so it is used at most once; else None."""
        flow_id, sep, _ = cookie.partition(".")
        if not sep or not flow_id:
            return None
        digest = _digest(cookie)

        def change(doc: dict[str, Any]) -> PendingFlow | None:
            flows = doc.get("flows", [])
            for number, entry in enumerate(flows):
                if entry.get("flow_id") != flow_id or not hmac.compare_digest(
                    str(entry.get("sha256")), digest
                ):
                    continue
                del flows[number]
                expires = parse_time(entry["expires_at"])
                if expires <= now:
                    return None
                return PendingFlow(
                    flow_id=flow_id,
                    state=str(entry["state"]),
                    nonce=str(entry["nonce"]),
                    verifier=str(entry["verifier"]),
                    redirect_url=str(entry["redirect_url"]),
                    expires_at=expires,
                )
            return None

        result: PendingFlow | None = self._file.update(change)
        return result


@dataclass(frozen=True, slots=True)
class Discovery:
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str


def _safe_url(url: str, *, what: str) -> str:
    """An absolute https URL, or http on loopback (a local issuer in tests)."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise ContractError(f"{what} is not a URL", path=what) from exc
    if parsed.scheme == "https" and parsed.host:
        return url
    if parsed.scheme == "http" and parsed.host and is_loopback(url):
        return url
    raise ContractError(f"{what} must be an https:// URL (http:// only on loopback)", path=what)


class OidcSignIn:
    """The flow at one issuer for one client; ``http`` is the client that talks to the issuer."""

    def __init__(
        self,
        *,
        issuer: str,
        client_id: str,
        pending: PendingSignIns,
        client_secret: str | None = None,
        redirect_url: str | None = None,
        scopes: str = "openid",
        scope_claim: str = "blackbox_scope",
        jwks_url: str | None = None,
        http: httpx.Client | None = None,
    ) -> None:
        self.issuer = _safe_url(issuer, what="oidc_issuer")
        self.client_id = client_id
        self.pending = pending
        self._secret = client_secret
        self._redirect_url = (
            None if redirect_url is None else _safe_url(redirect_url, what="oidc_redirect_url")
        )
        asked = scopes.split()
        self._scopes = " ".join(["openid", *(s for s in asked if s != "openid")])
        self._scope_claim = scope_claim
        self._jwks_url = None if jwks_url is None else _safe_url(jwks_url, what="oidc_jwks_url")
        self._http = http or httpx.Client(timeout=HTTP_TIMEOUT_S, follow_redirects=False)
        self._lock = threading.Lock()
        self._discovery: tuple[float, Discovery] | None = None
        self._verifiers: dict[str, OidcVerifier] = {}

    # -- the issuer's metadata -------------------------------------------------------------------
    def discovery(self) -> Discovery:
        """The issuer's endpoints, fetched at most every five minutes."""
        with self._lock:
            if self._discovery is not None and time.monotonic() - self._discovery[0] < DISCOVERY_TTL_S:
                return self._discovery[1]
        url = f"{self.issuer.rstrip('/')}/.well-known/openid-configuration"
        try:
            response = self._http.get(url, headers={"Accept": "application/json"})
            response.raise_for_status()
            document = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise OidcSignInError(
                f"the identity provider's discovery document could not be read ({type(exc).__name__})",
                status=502,
            ) from exc
        if not isinstance(document, dict) or document.get("issuer") != self.issuer:
            raise OidcSignInError(
                "the identity provider's discovery document names another issuer", status=502
            )
        try:
            found = Discovery(
                authorization_endpoint=_safe_url(
                    str(document.get("authorization_endpoint") or ""), what="authorization_endpoint"
                ),
                token_endpoint=_safe_url(str(document.get("token_endpoint") or ""), what="token_endpoint"),
                jwks_uri=self._jwks_url or _safe_url(str(document.get("jwks_uri") or ""), what="jwks_uri"),
            )
        except ContractError as exc:
            raise OidcSignInError(f"the identity provider's discovery document: {exc}", status=502) from exc
        with self._lock:
            self._discovery = (time.monotonic(), found)
        return found

    def _verifier(self, jwks_uri: str) -> OidcVerifier:
        with self._lock:
            verifier = self._verifiers.get(jwks_uri)
            if verifier is None:
                verifier = OidcVerifier(
                    issuer=self.issuer,
                    audience=self.client_id,
                    jwks_url=jwks_uri,
                    scope_claim=self._scope_claim,
                    what="the ID token",
                )
                self._verifiers[jwks_uri] = verifier
            return verifier

    # -- the flow -----------------------------------------------------------------------------------
    def redirect_url(self, fallback: str) -> str:
        """The configured callback, else ``fallback`` (the console's own, from the request)."""
        return self._redirect_url or fallback

    def begin(self, *, redirect_url: str, now: datetime) -> tuple[str, str]:
        """``(authorization URL, flow cookie)`` for a new sign-in."""
        endpoints = self.discovery()
        cookie, flow = self.pending.begin(redirect_url=redirect_url, now=now)
        query = urlencode(
            {
                "response_type": "code",
                "client_id": self.client_id,
                "redirect_uri": flow.redirect_url,
                "scope": self._scopes,
                "state": flow.state,
                "nonce": flow.nonce,
                "code_challenge": pkce_challenge(flow.verifier),
                "code_challenge_method": "S256",
            }
        )
        separator = "&" if "?" in endpoints.authorization_endpoint else "?"
        return f"{endpoints.authorization_endpoint}{separator}{query}", cookie

    def finish(self, params: Mapping[str, str], *, cookie: str, now: datetime) -> Caller:
        """The caller the issuer's answer to the callback proves; :class:`OidcSignInError` otherwise."""
        flow = self.pending.take(cookie, now=now) if cookie and len(cookie) <= 200 else None
        error = params.get("error")
        if error is not None:  # the issuer refused (the user denied, or the request was wrong)
            named = error if _OAUTH_ERROR.match(error) else "an unnamed error"
            raise OidcSignInError(f"the identity provider refused the sign-in ({named})", status=401)
        if flow is None:
            raise OidcSignInError(
                "this sign-in expired or was not started in this browser; start again", status=400
            )
        state = params.get("state", "")
        if not hmac.compare_digest(state.encode("utf-8"), flow.state.encode("utf-8")):
            raise OidcSignInError(
                "the answer does not match the sign-in this browser started (state); start again",
                status=400,
            )
        code = params.get("code", "")
        if not code or len(code) > 2048:
            raise OidcSignInError("the identity provider's answer carries no code", status=400)
        id_token = self._exchange(code, flow)
        return self.verify_id_token(id_token, nonce=flow.nonce, now=now)

    def _exchange(self, code: str, flow: PendingFlow) -> str:
        """The ID token for ``code``, from the discovered token endpoint (server-to-server)."""
        endpoints = self.discovery()
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": flow.redirect_url,
            "code_verifier": flow.verifier,
        }
        auth: Any = httpx.USE_CLIENT_DEFAULT  # the client has none
        if self._secret is not None:  # client_secret_basic: both form-encoded first (RFC 6749 2.3.1)
            auth = httpx.BasicAuth(quote(self.client_id, safe=""), quote(self._secret, safe=""))
        else:
            form["client_id"] = self.client_id
        try:
            response = self._http.post(
                endpoints.token_endpoint, data=form, auth=auth, headers={"Accept": "application/json"}
            )
        except httpx.HTTPError as exc:
            raise OidcSignInError(
                f"the identity provider's token endpoint could not be reached ({type(exc).__name__})",
                status=502,
            ) from exc
        try:
            answer = response.json()
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise OidcSignInError(
                f"the identity provider's token endpoint answered {response.status_code} without JSON",
                status=502,
            )
        if response.status_code != 200 or "error" in answer:
            error = str(answer.get("error") or "")
            named = error if _OAUTH_ERROR.match(error) else "an unnamed error"
            raise OidcSignInError(f"the identity provider did not exchange the code ({named})", status=502)
        id_token = answer.get("id_token")
        if not isinstance(id_token, str) or not id_token:
            raise OidcSignInError("the identity provider returned no ID token", status=502)
        return id_token

    def verify_id_token(self, id_token: str, *, nonce: str, now: datetime) -> Caller:
        """The caller of a valid ID token for this client carrying ``nonce``; :class:`OidcSignInError`
        naming the check that failed otherwise."""
        verifier = self._verifier(self.discovery().jwks_uri)
        try:
            claims = verifier.claims(id_token, now=now)
            got = claims.get("nonce")
            if not isinstance(got, str) or not hmac.compare_digest(
                got.encode("utf-8"), nonce.encode("utf-8")
            ):
                raise Unauthenticated("the ID token is not valid (its nonce is not this sign-in's)")
            audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
            azp = claims.get("azp")
            if (azp is not None or len(audiences) > 1) and azp != self.client_id:
                raise Unauthenticated("the ID token is not valid (azp is not this console's client)")
            identity, scope = verifier.caller_of(claims)
        except Unauthenticated as exc:
            raise OidcSignInError(str(exc), status=401) from exc
        try:
            return Caller(identity=identity, scope=scope)
        except ContractError as exc:
            raise OidcSignInError(f"the ID token's sub is not usable ({exc})", status=401) from exc


def oidc_signin_from_settings(settings: Any) -> OidcSignIn | None:
    """The console's sign-in the settings configure (an issuer and a client id), or None."""
    if not settings.oidc_client_id:
        return None
    if not settings.oidc_issuer:
        raise ContractError("BLACKBOX_OIDC_CLIENT_ID needs BLACKBOX_OIDC_ISSUER", path="oidc_client_id")
    secret = settings.oidc_client_secret
    return OidcSignIn(
        issuer=settings.oidc_issuer,
        client_id=settings.oidc_client_id,
        pending=PendingSignIns(oidc_file(settings.data_dir)),
        client_secret=None if secret is None else secret.get_secret_value(),
        redirect_url=settings.oidc_redirect_url,
        scopes=settings.oidc_scopes,
        scope_claim=settings.oidc_scope_claim,
        jwks_url=settings.oidc_jwks_url,
    )

"""Who is calling the audit endpoint: identity from a credential, never from the request's own claims.

A request carries ``Authorization: Bearer <credential>``. A credential starting ``bbx_`` is a blackbox
token (:class:`~consumers.access.tokens.TokenStore`: caller, scope and counterparty subjects as the
operator issued them); anything else is tried as an OIDC JWT when an issuer is configured
(:mod:`consumers.audit.oidc`). ``BLACKBOX_CALLER`` / ``BLACKBOX_SCOPE`` and any header naming a
caller or scope are ignored. Failure says why in general terms (no credential, unknown, expired,
revoked, bad signature) and never which byte was wrong.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from consumers.access.scopes import Caller
from consumers.access.tokens import SENDER, TOKEN_PREFIX, TokenStore
from consumers.audit.errors import Unauthenticated
from consumers.audit.oidc import OidcVerifier


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller, and which credential proved it (``token:<id>`` or ``oidc:<issuer>``)."""

    caller: Caller
    credential: str


class Authenticator:
    def __init__(
        self, *, tokens: TokenStore, oidc: OidcVerifier | None, clock: Callable[[], datetime]
    ) -> None:
        self._tokens = tokens
        self._oidc = oidc
        self._clock = clock

    def authenticate(self, authorization: str | None, *, reason: str = "") -> Principal:
        if not authorization:
            raise Unauthenticated("no bearer credential (Authorization: Bearer <token>)")
        scheme, _, credential = authorization.partition(" ")
        credential = credential.strip()
        if scheme.lower() != "bearer" or not credential:
            raise Unauthenticated("the Authorization header is not 'Bearer <token>'")
        if credential.startswith(TOKEN_PREFIX):
            record, why = self._tokens.resolve(credential, now=self._clock())
            if record is None:
                raise Unauthenticated(f"the bearer token is not valid ({why})")
            if record.scope == SENDER:
                raise Unauthenticated(
                    "the bearer token is not valid here (an OTLP sender token reads nothing)"
                )
            return Principal(record.caller_for(reason), f"token:{record.token_id}")
        if self._oidc is None:
            raise Unauthenticated("the bearer token is not valid (unknown token)")
        identity, scope = self._oidc.verify(credential, now=self._clock())
        return Principal(Caller(identity=identity, scope=scope, reason=reason), f"oidc:{self._oidc.issuer}")

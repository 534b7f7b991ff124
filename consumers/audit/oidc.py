"""OIDC JWTs for the audit endpoint, verified with PyJWT against the issuer's JWKS.

Checked: the signature (by a key from ``BLACKBOX_OIDC_JWKS_URL`` with the ``kid`` the token names, or its
only signing key when the token names none; RS256,
ES256 or EdDSA only — never ``none`` or HMAC), ``iss`` = ``BLACKBOX_OIDC_ISSUER``, ``aud`` contains
``BLACKBOX_OIDC_AUDIENCE``, ``exp`` in the future and ``nbf`` / ``iat`` not in it (at the endpoint's
clock, 30 s leeway). The caller is ``sub``; the scope is the claim ``BLACKBOX_OIDC_SCOPE_CLAIM`` and must
be one of the three scopes. A counterparty that signs in this way is tied to decisions whose
``originUserId`` is its ``sub``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from consumers.access.scopes import SCOPES, Scope, parse_scope
from schemas.errors import ContractError

ALGORITHMS = ["RS256", "ES256", "EdDSA"]
LEEWAY_S = 30


class OidcVerifier:
    def __init__(
        self, *, issuer: str, audience: str, jwks_url: str, scope_claim: str, what: str = "the bearer token"
    ) -> None:
        import jwt

        self.issuer = issuer
        self._what = what  # how refusals name the token ("the ID token" at the console's sign-in)
        self._audience = audience
        self._scope_claim = scope_claim
        try:
            self._jwks = jwt.PyJWKClient(jwks_url, cache_keys=True, lifespan=300)
        except jwt.PyJWTError as exc:
            raise ContractError(f"{exc}", path="oidc_jwks_url") from exc

    def verify(self, token: str, *, now: datetime) -> tuple[str, Scope]:
        """``(caller, scope)`` of a valid JWT; :class:`~consumers.audit.errors.Unauthenticated` otherwise."""
        return self.caller_of(self.claims(token, now=now))

    def claims(self, token: str, *, now: datetime) -> dict[str, Any]:
        """The claims of a JWT whose signature, ``iss``, ``aud`` and times hold;
        :class:`~consumers.audit.errors.Unauthenticated` naming which check failed otherwise."""
        import jwt

        from consumers.audit.errors import Unauthenticated

        try:
            key = self._signing_key(token)
            claims: dict[str, Any] = jwt.decode(
                token,
                key.key,
                algorithms=ALGORITHMS,
                audience=self._audience,
                issuer=self.issuer,
                leeway=LEEWAY_S,
                options={
                    "require": ["exp", "iss", "aud", "sub"],
                    "verify_exp": False,
                    "verify_nbf": False,
                    "verify_iat": False,
                },
            )
        except jwt.PyJWTError as exc:
            raise Unauthenticated(f"{self._what} is not valid ({type(exc).__name__})") from exc
        # time claims against the endpoint's clock (injectable), not the process's
        moment = now.timestamp()
        if float(claims["exp"]) <= moment - LEEWAY_S:
            raise Unauthenticated(f"{self._what} is not valid (expired)")
        for name in ("nbf", "iat"):
            if name in claims and float(claims[name]) > moment + LEEWAY_S:
                raise Unauthenticated(f"{self._what} is not valid ({name} in the future)")
        return claims

    def _signing_key(self, token: str) -> Any:
        """The JWKS key the token's ``kid`` names; a token without a ``kid`` only when the set holds one
        signing key (OIDC Core 10.1: a ``kid`` is required once there are several)."""
        import jwt

        if jwt.get_unverified_header(token).get("kid") is not None:
            return self._jwks.get_signing_key_from_jwt(token)
        keys = self._jwks.get_signing_keys()
        if len(keys) != 1:
            raise jwt.PyJWKClientError("the token names no kid and the JWKS holds several signing keys")
        return keys[0]

    def caller_of(self, claims: dict[str, Any]) -> tuple[str, Scope]:
        """``(sub, scope)``: the scope is the claim ``BLACKBOX_OIDC_SCOPE_CLAIM``, one of the three."""
        from consumers.audit.errors import Unauthenticated

        scope = claims.get(self._scope_claim)
        try:
            return str(claims["sub"]), parse_scope(str(scope))
        except ContractError as exc:
            raise Unauthenticated(
                f"{self._what}'s {self._scope_claim} claim is not one of {', '.join(SCOPES)}"
            ) from exc


def oidc_from_settings(settings: Any) -> OidcVerifier | None:
    """The verifier the settings configure, or None (tokens only); all three of issuer, audience and
    JWKS URL, or none. An issuer with only ``BLACKBOX_OIDC_CLIENT_ID`` beside it signs in to the console
    (:mod:`consumers.console.oidc`) and leaves the endpoint on tokens only."""
    values = (settings.oidc_issuer, settings.oidc_audience, settings.oidc_jwks_url)
    if not any(values):
        return None
    if settings.oidc_client_id and not settings.oidc_audience and not settings.oidc_jwks_url:
        return None
    if not all(values):
        raise ContractError(
            "OIDC needs BLACKBOX_OIDC_ISSUER, BLACKBOX_OIDC_AUDIENCE and BLACKBOX_OIDC_JWKS_URL together",
            path="oidc",
        )
    return OidcVerifier(
        issuer=settings.oidc_issuer,
        audience=settings.oidc_audience,
        jwks_url=settings.oidc_jwks_url,
        scope_claim=settings.oidc_scope_claim,
    )

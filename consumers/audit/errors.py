"""The audit endpoint's own refusal, shared by the token and OIDC authenticators below the app."""

from __future__ import annotations


class Unauthenticated(Exception):
    """No credential, or one that does not prove an identity; the endpoint answers 401."""

"""The audit endpoint (DESIGN decision 14): outsiders reach captures only here, through one router of
the one HTTP application (:mod:`consumers.web`, served by ``blackbox serve``).

- :mod:`~consumers.audit.auth` — who is calling: a bearer token issued by ``blackbox access token
  create`` (stored hashed) or an OIDC JWT (:mod:`~consumers.audit.oidc`); never what a request says
- :mod:`~consumers.audit.requests` — the request and response bodies (the OpenAPI document's models)
- :mod:`~consumers.audit.views` — what each scope sees of a capture and of a verdict
- :mod:`~consumers.audit.store` — the replay runs' SQL
- :mod:`~consumers.audit.errors` — refusals and how each is answered; :mod:`~consumers.audit.routing` — the
  route class and what is logged; :mod:`~consumers.audit.context` — what every route uses
- :mod:`~consumers.audit.app` — the router: every route through the one access gate
"""

from consumers.audit.app import audit_router, create_app

__all__ = ["audit_router", "create_app"]

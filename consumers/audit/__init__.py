"""The audit endpoint (``blackbox serve``, DESIGN decision 14): outsiders reach captures only here.

- :mod:`~consumers.audit.auth` — who is calling: a bearer token issued by ``blackbox access token
  create`` (stored hashed) or an OIDC JWT (:mod:`~consumers.audit.oidc`); never what a request says
- :mod:`~consumers.audit.limits` — request size and a per-caller token bucket
- :mod:`~consumers.audit.requests` — the request and response bodies (the OpenAPI document's models)
- :mod:`~consumers.audit.views` — what each scope sees of a capture
- :mod:`~consumers.audit.store` — the replay runs' SQL
- :mod:`~consumers.audit.app` — the FastAPI application: every route through the one access gate
- :mod:`~consumers.audit.server` — uvicorn on a loopback port, in the foreground or a thread
"""

from consumers.audit.app import create_app
from consumers.audit.server import AuditServer, serve

__all__ = ["AuditServer", "create_app", "serve"]

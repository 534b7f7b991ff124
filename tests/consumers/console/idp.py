"""A real OpenID provider for the console's tests: ``oidc-provider-mock`` (PyPI), a Flask application on
Authlib's authorization server, run in a thread on a loopback port. It signs ID tokens with its own RSA
key, publishes discovery and a JWKS, and authenticates whoever submits a ``sub`` on its form; the
claims of a user are set with ``PUT /users/<sub>``.

It does not enforce PKCE itself, so :class:`Idp` records what reached it: each authorization request's
``code_challenge`` and each token request's ``code_verifier``, and who sent the token request."""

from __future__ import annotations

import io
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, quote, urlencode, urlparse

import httpx

CLIENT_ID = "blackbox-console"
CLIENT_SECRET = "console-secret-for-tests"


@dataclass
class Idp:
    url: str  # the issuer, http://localhost:PORT
    authorizations: list[dict[str, str]] = field(default_factory=list)  # the query of each one
    token_requests: list[dict[str, str]] = field(default_factory=list)  # the form of each one
    lock: threading.Lock = field(default_factory=threading.Lock)

    def user(self, sub: str, **claims: Any) -> None:
        response = httpx.put(f"{self.url}/users/{quote(sub, safe='')}", json=claims, timeout=10)
        assert response.status_code == 204, response.text

    def authorize(self, url: str, sub: str) -> dict[str, str]:
        """Submit the provider's form for ``sub`` at the authorization ``url``; the query it redirects
        back with (``code`` and ``state``, or ``error``)."""
        response = httpx.post(url, data={"sub": sub}, timeout=10)
        assert response.status_code == 302, response.text[:500]
        return {k: v[0] for k, v in parse_qs(urlparse(response.headers["location"]).query).items()}

    def id_token_for(self, client_id: str, sub: str, *, nonce: str) -> str:
        """An ID token the provider signs for another client (its ``aud`` is ``client_id``)."""
        query = {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": "http://127.0.0.1:9/elsewhere",
            "scope": "openid",
            "state": "s",
            "nonce": nonce,
        }
        back = self.authorize(f"{self.url}/oauth2/authorize?{urlencode(query)}", sub)
        answer = httpx.post(
            f"{self.url}/oauth2/token",
            data={
                "grant_type": "authorization_code",
                "code": back["code"],
                "redirect_uri": query["redirect_uri"],
            },
            auth=(client_id, "any-secret"),
            timeout=10,
        )
        assert answer.status_code == 200, answer.text
        token: str = answer.json()["id_token"]
        return token


def _recording(idp: Idp, app: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
    """WSGI middleware noting the PKCE parameters that reach the provider."""

    def wsgi(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/oauth2/authorize" and environ.get("REQUEST_METHOD") == "GET":
            query = {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}
            with idp.lock:
                idp.authorizations.append(query)
        elif path == "/oauth2/token":
            length = int(environ.get("CONTENT_LENGTH") or 0)
            body = environ["wsgi.input"].read(length)
            form = {k: v[0] for k, v in parse_qs(body.decode("utf-8")).items()}
            form["_user_agent"] = environ.get("HTTP_USER_AGENT", "")
            with idp.lock:
                idp.token_requests.append(form)
            environ["wsgi.input"] = io.BytesIO(body)
        return app(environ, start_response)

    return wsgi


@contextmanager
def running_idp() -> Iterator[Idp]:
    import oidc_provider_mock
    import werkzeug.serving

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
    flask_app = oidc_provider_mock.app(require_nonce=True)
    server = werkzeug.serving.make_server("localhost", 0, flask_app, threaded=True)
    idp = Idp(url=f"http://localhost:{server.server_port}")
    server.app = _recording(idp, flask_app)  # type: ignore[assignment]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield idp
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)

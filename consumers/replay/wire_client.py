"""Send recorded request bytes to the operator's endpoint, in the wire format the capture names.

The body goes out as given, byte for byte (``content=``, never ``json=``). The path is the recorded
one, under the operator's endpoint: ``--model-endpoint http://host:8000`` with a recorded
``/v1/chat/completions`` dials ``http://host:8000/v1/chat/completions``; an endpoint that already
ends with the API's version prefix (``http://host:8000/v1``) or with the whole path (an allow-list
entry equal to the captured endpoint) is not repeated. The host is always one the operator
configured (:class:`~consumers.replay.endpoints.EndpointPolicy`): a capture never chooses where
replay connects, and its key travels the way the format expects (``Authorization: Bearer`` for
OpenAI, ``x-api-key`` for Anthropic), bound to the endpoint it was configured for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import httpx

from consumers.replay.endpoints import EndpointPolicy
from consumers.replay.wire_request import WireCall
from schemas.errors import ModelClientError, ModelNotFound

__all__ = ["HttpWireClient", "WireClient", "WireReply", "wire_url"]


@dataclass(frozen=True, slots=True)
class WireReply:
    """The provider's answer, as received (content-encoding undone); ``streamed``: an SSE stream."""

    status: int
    body: bytes
    streamed: bool


@runtime_checkable
class WireClient(Protocol):
    """Send one recorded call's body (possibly rebuilt or varied) and return the answer."""

    def send(self, call: WireCall, body: bytes, *, captured_endpoint: str | None) -> WireReply: ...

    def destination(self, captured_endpoint: str | None) -> str:
        """Where calls of this capture would go, for the report; raises if nowhere is allowed."""
        ...


def wire_url(base: str, path: str, query: str | None = None) -> str:
    """``path`` (recorded) under the operator's ``base`` URL (see the module docstring)."""
    url = httpx.URL(base)
    origin = f"{url.scheme}://{url.netloc.decode('ascii')}"
    prefix = url.raw_path.decode("ascii").split("?", 1)[0].rstrip("/")
    if prefix and prefix.endswith(path):
        target = origin + prefix
    elif prefix and path.startswith(prefix + "/"):
        target = origin + path
    else:
        target = origin + prefix + path
    return f"{target}?{query}" if query else target


class HttpWireClient:
    """Posts recorded bodies over a shared ``httpx.Client``; redirects are never followed."""

    def __init__(self, *, policy: EndpointPolicy, http: httpx.Client) -> None:
        self.policy = policy
        self._http = http

    def destination(self, captured_endpoint: str | None) -> str:
        return self.policy.resolve(captured_endpoint).describe()

    def send(self, call: WireCall, body: bytes, *, captured_endpoint: str | None) -> WireReply:
        target = self.policy.resolve(captured_endpoint)
        key = target.api_key.get_secret_value() if target.api_key is not None else None
        url = wire_url(target.url, call.path, call.query)
        headers = call.spec.headers(key, call.headers)
        try:
            response = self._http.post(url, content=body, headers=headers)
        except httpx.HTTPError as exc:
            raise ModelClientError(f"model endpoint {url} failed: {exc}") from exc
        if response.status_code == 404 and "model" in response.text.lower():
            raise ModelNotFound(f"{url} does not serve the requested model: {response.text[:200]}", model="")
        if response.status_code >= 400:
            raise ModelClientError(f"{url} answered {response.status_code}: {response.text[:300]}")
        kind = response.headers.get("content-type", "")
        return WireReply(
            status=response.status_code,
            body=response.content,
            streamed=kind.split(";", 1)[0].strip().lower() == "text/event-stream",
        )

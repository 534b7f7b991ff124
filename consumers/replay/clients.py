"""How replay reaches a model: one small interface, an OpenAI-compatible HTTP client and a callable.

The HTTP client serves vLLM, llama.cpp, Ollama and hosted APIs alike: ``POST
{endpoint}/chat/completions``. The body it posts is :meth:`ChatRequest.body`, so the captured
rendered context travels byte for byte. The shapes of the request and the answer are the wire
module's (``producers/wire/openai_chat.py``); the HTTP round trip is this one's (its ``wire`` sends a
wire capture's recorded bytes in the capture's own format: ``wire_client.py``). It dials only
what the operator configured (see ``consumers/replay/endpoints.py``): the endpoint a capture names
is shown, never dialled on its own.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import httpx

from consumers.replay.endpoints import EndpointPolicy, EndpointSettings
from producers.wire import openai_chat
from producers.wire.openai_chat import ChatRequest, ChatResponse
from schemas.errors import ModelClientError, ModelNotFound

if TYPE_CHECKING:
    from consumers.replay.wire_client import HttpWireClient


@runtime_checkable
class ModelClient(Protocol):
    """Send one chat request (``extra_messages`` appended after the verbatim messages) and answer."""

    def complete(
        self, request: ChatRequest, *, extra_messages: Sequence[Mapping[str, Any]] = ()
    ) -> ChatResponse: ...

    def destination(self, request: ChatRequest) -> str:
        """Where ``request`` would be sent, for the report; raises if it may not be sent anywhere."""
        ...


class OpenAICompatibleClient:
    """``POST {endpoint}/chat/completions`` over httpx, one pooled connection set per client.

    ``policy`` decides the endpoint and key of every request (:class:`EndpointPolicy`);
    ``endpoint``/``api_key`` are the short form for one operator endpoint. The captured
    ``modelProviderEndpoint`` is dialled only when the policy allow-lists it. Thread-safe
    (httpx.Client is), so regressions share one client; redirects are not followed, so a key
    never follows one to another host.
    """

    def __init__(
        self,
        *,
        endpoint: str | None = None,
        api_key: str | None = None,
        policy: EndpointPolicy | None = None,
        timeout: float = 60.0,
        http: httpx.Client | None = None,
    ) -> None:
        if policy is not None and (endpoint or api_key):
            raise ValueError("give a policy, or an endpoint and key, not both")
        self.policy = policy or EndpointPolicy.build(
            endpoint=endpoint, endpoint_source="operator", api_key=api_key
        )
        self._http = http or httpx.Client(timeout=timeout, follow_redirects=False)
        self._owns_http = http is None

    @classmethod
    def from_settings(
        cls,
        settings: EndpointSettings,
        *,
        endpoint: str | None = None,
        api_key: str | None = None,
        allow_insecure_http: bool = False,
        timeout: float = 60.0,
    ) -> OpenAICompatibleClient:
        """Flags win over ``BLACKBOX_MODEL_ENDPOINT`` / ``BLACKBOX_MODEL_API_KEY``; the allow-list is
        ``BLACKBOX_MODEL_ENDPOINTS``."""
        policy = EndpointPolicy.from_settings(
            settings, endpoint=endpoint, api_key=api_key, allow_insecure_http=allow_insecure_http
        )
        return cls(policy=policy, timeout=timeout)

    @property
    def endpoint(self) -> str | None:
        """The operator endpoint, or None when only allow-listed captured endpoints are dialled."""
        return self.policy.operator.url if self.policy.operator else None

    def destination(self, request: ChatRequest) -> str:
        return self.policy.resolve(request.endpoint).describe()

    @property
    def wire(self) -> HttpWireClient:
        """The same policy and connections, sending a wire capture's recorded bytes in its format."""
        from consumers.replay.wire_client import HttpWireClient

        return HttpWireClient(policy=self.policy, http=self._http)

    def complete(
        self, request: ChatRequest, *, extra_messages: Sequence[Mapping[str, Any]] = ()
    ) -> ChatResponse:
        target = self.policy.resolve(request.endpoint)
        key = target.api_key.get_secret_value() if target.api_key is not None else None
        headers = openai_chat.request_headers(key)
        url = target.url + openai_chat.PATH
        body = request.body(extra_messages).encode("utf-8")
        try:
            response = self._http.post(url, content=body, headers=headers)
        except httpx.HTTPError as exc:
            raise ModelClientError(f"model endpoint {url} failed: {exc}") from exc
        if response.status_code == 404 and "model" in response.text.lower():
            raise ModelNotFound(
                f"{url} does not serve model {request.model!r}: {response.text[:200]}", model=request.model
            )
        if response.status_code >= 400:
            raise ModelClientError(f"{url} answered {response.status_code}: {response.text[:300]}")
        try:
            value = response.json()
        except ValueError as exc:
            raise ModelClientError(f"{url} answered a body that is not JSON") from exc
        return ChatResponse.from_completion(value)

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> OpenAICompatibleClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class CallableModelClient:
    """An in-process model: ``fn`` receives the request dict an HTTP server would have parsed.

    ``fn`` returns a chat completion (dict) or a :class:`ChatResponse`; raising
    :class:`ModelNotFound` simulates a retired model version.
    """

    def __init__(self, fn: Callable[[dict[str, Any]], Any], *, name: str | None = None) -> None:
        self._fn = fn
        self._name = name or getattr(fn, "__qualname__", None) or type(fn).__qualname__

    def destination(self, request: ChatRequest) -> str:
        return f"in-process {self._name}"

    def complete(
        self, request: ChatRequest, *, extra_messages: Sequence[Mapping[str, Any]] = ()
    ) -> ChatResponse:
        try:
            payload = json.loads(request.body(extra_messages))
        except ValueError as exc:
            raise ModelClientError(f"request body is not JSON: {exc}") from exc
        answer = self._fn(payload)
        return answer if isinstance(answer, ChatResponse) else ChatResponse.from_completion(answer)

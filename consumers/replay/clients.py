"""How replay reaches a model: one small interface, an OpenAI-compatible HTTP client and a callable.

The HTTP client serves vLLM, llama.cpp, Ollama and hosted APIs alike: ``POST
{endpoint}/chat/completions``. The body it posts is :meth:`ChatRequest.body`, so the captured
rendered context travels byte for byte. The endpoint is the operator's (flag or
``BLACKBOX_MODEL_ENDPOINT``) when given, else the one the capture names.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import httpx

from consumers.replay.request import ChatRequest
from schemas.errors import ModelClientError

ENDPOINT_ENV = "BLACKBOX_MODEL_ENDPOINT"
API_KEY_ENV = "BLACKBOX_MODEL_API_KEY"


class ModelNotFound(ModelClientError):
    """The endpoint does not serve the requested model (version retired, or never mirrored)."""

    def __init__(self, message: str, *, model: str) -> None:
        self.model = model
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class ChatResponse:
    """The first choice of a chat completion."""

    message: dict[str, Any]
    finish_reason: str | None
    model: str | None = None

    @classmethod
    def from_completion(cls, value: Any) -> ChatResponse:
        try:
            choice = value["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError) as exc:
            raise ModelClientError(f"not a chat completion: {str(value)[:200]}") from exc
        if not isinstance(message, dict):
            raise ModelClientError("chat completion message is not an object")
        return cls(message=message, finish_reason=choice.get("finish_reason"), model=value.get("model"))


@runtime_checkable
class ModelClient(Protocol):
    """Send one chat request (``extra_messages`` appended after the verbatim messages) and answer."""

    def complete(
        self, request: ChatRequest, *, extra_messages: Sequence[Mapping[str, Any]] = ()
    ) -> ChatResponse: ...


class OpenAICompatibleClient:
    """``POST {endpoint}/chat/completions`` over httpx, one pooled connection set per client.

    ``endpoint`` overrides the captured ``modelProviderEndpoint`` for every request; leave it
    None to use the capture's. Thread-safe (httpx.Client is), so regressions share one client.
    """

    def __init__(
        self,
        *,
        endpoint: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        http: httpx.Client | None = None,
    ) -> None:
        self.endpoint = endpoint
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._http = http or httpx.Client(timeout=timeout)
        self._owns_http = http is None

    @classmethod
    def from_env(
        cls,
        *,
        endpoint: str | None = None,
        api_key: str | None = None,
        environ: Mapping[str, str] | None = None,
        timeout: float = 60.0,
    ) -> OpenAICompatibleClient:
        """Flags win over ``BLACKBOX_MODEL_ENDPOINT`` / ``BLACKBOX_MODEL_API_KEY``."""
        env = os.environ if environ is None else environ
        return cls(
            endpoint=endpoint or env.get(ENDPOINT_ENV) or None,
            api_key=api_key or env.get(API_KEY_ENV) or None,
            timeout=timeout,
        )

    def complete(
        self, request: ChatRequest, *, extra_messages: Sequence[Mapping[str, Any]] = ()
    ) -> ChatResponse:
        endpoint = self.endpoint or request.endpoint
        if not endpoint:
            raise ModelClientError(
                f"no model endpoint: the capture names none; set --model-endpoint or {ENDPOINT_ENV}"
            )
        url = endpoint.rstrip("/") + "/chat/completions"
        body = request.body(extra_messages).encode("utf-8")
        try:
            response = self._http.post(url, content=body, headers=self._headers)
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

    def __init__(self, fn: Callable[[dict[str, Any]], Any]) -> None:
        self._fn = fn

    def complete(
        self, request: ChatRequest, *, extra_messages: Sequence[Mapping[str, Any]] = ()
    ) -> ChatResponse:
        try:
            payload = json.loads(request.body(extra_messages))
        except ValueError as exc:
            raise ModelClientError(f"request body is not JSON: {exc}") from exc
        answer = self._fn(payload)
        return answer if isinstance(answer, ChatResponse) else ChatResponse.from_completion(answer)

"""Replay for agents that run their own loop: hand the agent sandboxed handles and re-run its code.

Like Temporal re-running workflow code against a recorded history, replay calls the agent's own
function with three handles instead of the real world:

- ``model.complete(messages)`` — the model; ``messages`` must start with the captured context
  (the handle sends the captured bytes verbatim and appends the rest),
- ``tools.call(name, arguments)`` — answered from the recording (or live, if authorized),
- ``external_state.get(key)`` — the captured value.

An agent function is ``Callable[[ReplayHandles], str | None]`` returning its final output. Any
step the recording cannot answer is a :class:`ReplayDivergence`; it is recorded even if the agent
catches it. The standard OpenAI tool loop (``consumers.replay.loop``) is one such function.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from consumers.replay.clients import ModelClient
from consumers.replay.sandbox import ExternalState, Sandbox, ToolCall
from producers.wire.openai_chat import ChatRequest, ChatResponse
from schemas.errors import BlackboxError, ModelClientError, ReplayDivergence

DEFAULT_MAX_MODEL_CALLS = 32


class StepLimitReached(BlackboxError):
    """The replayed agent asked the model more often than the replay allows."""


class SandboxedModel:
    """The model as a replayed agent sees it: the captured request, sent through a client."""

    def __init__(
        self, client: ModelClient, request: ChatRequest, *, sandbox: Sandbox, max_calls: int
    ) -> None:
        self._client = client
        self._sandbox = sandbox
        self._max_calls = max_calls
        self.request = request
        self._initial = request.messages()
        self.responses: list[ChatResponse] = []
        self.error: ModelClientError | None = None

    def initial_messages(self) -> list[dict[str, Any]]:
        """A fresh parsed copy of the captured messages, for the agent to extend."""
        return json.loads(self.request.messages_text)  # type: ignore[no-any-return]

    def complete(self, messages: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
        """The assistant message answering ``messages`` (default: the captured context alone)."""
        extra: Sequence[Mapping[str, Any]] = ()
        if messages is not None:
            n = len(self._initial)
            if list(messages[:n]) != self._initial:
                raise self._sandbox.diverge(
                    "the agent's messages do not start with the captured rendered context",
                    {"messages": len(messages)},
                )
            extra = messages[n:]
        if len(self.responses) >= self._max_calls:
            raise StepLimitReached(f"more than {self._max_calls} model calls")
        try:
            response = self._client.complete(self.request, extra_messages=extra)
        except ModelClientError as exc:
            self.error = exc
            raise
        self.responses.append(response)
        return response.message

    @property
    def stop_reason(self) -> str:
        if not self.responses:
            return "error"
        return self.responses[-1].stop_reason


class SandboxedTools:
    """Tools as a replayed agent sees them: recorded answers, never a live call unless authorized."""

    def __init__(self, sandbox: Sandbox) -> None:
        self._sandbox = sandbox

    def call(self, name: str, arguments: Any) -> Any:
        """Answer one call; ``arguments`` may be the model's JSON string or a parsed value.

        A string the recording holds as that very string (an agent that recorded the arguments
        as the API returned them) is compared as given; any other string is parsed first."""
        if isinstance(arguments, str) and not self._sandbox.recorded_as_given(arguments):
            # An unparsable argument string is hashed and answered as the string itself.
            with contextlib.suppress(ValueError):
                arguments = json.loads(arguments)
        return self._sandbox.call_tool(name, arguments)

    __call__ = call


@dataclass(frozen=True, slots=True)
class ReplayHandles:
    """Everything a replayed agent may touch."""

    model: SandboxedModel
    tools: SandboxedTools
    external_state: ExternalState
    request_payload: Any
    decision_id: str


AgentFunction = Callable[[ReplayHandles], "str | None"]


@dataclass(frozen=True, slots=True)
class AgentRun:
    """What one run of the agent function did."""

    final_output: str | None
    stop_reason: str
    tool_calls: tuple[ToolCall, ...]
    model_calls: int
    external_reads: tuple[str, ...]
    divergence: ReplayDivergence | None
    error: Exception | None


def run_agent(
    agent: AgentFunction,
    *,
    client: ModelClient,
    request: ChatRequest,
    sandbox: Sandbox,
    request_payload: Any,
    decision_id: str,
    max_model_calls: int = DEFAULT_MAX_MODEL_CALLS,
) -> AgentRun:
    """Run ``agent`` once against the sandbox; failures are recorded in the result, not raised."""
    model = SandboxedModel(client, request, sandbox=sandbox, max_calls=max_model_calls)
    handles = ReplayHandles(
        model=model,
        tools=SandboxedTools(sandbox),
        external_state=sandbox.external_state,
        request_payload=request_payload,
        decision_id=decision_id,
    )
    final: str | None = None
    error: Exception | None = None
    stop: str | None = None
    try:
        final = agent(handles)
    except ReplayDivergence:
        pass  # recorded by the sandbox
    except StepLimitReached as exc:
        error, stop = exc, "max_steps"
    except BlackboxError as exc:
        error = exc
    divergence = sandbox.divergence
    if divergence is not None:
        final, stop = None, "divergence"
    elif model.error is not None:
        error, stop = model.error, "error"
    elif error is not None and stop is None:
        stop = "error"
    return AgentRun(
        final_output=final,
        stop_reason=stop or model.stop_reason,
        tool_calls=tuple(sandbox.calls),
        model_calls=len(model.responses),
        external_reads=tuple(sandbox.external_state.reads),
        divergence=divergence,
        error=error,
    )

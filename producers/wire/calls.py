"""One model call read from the wire, whatever the provider: what a capture needs from its bodies.

Each format module (:mod:`~producers.wire.openai_chat`, :mod:`~producers.wire.openai_responses`,
:mod:`~producers.wire.anthropic_messages`) reads its request body into a :class:`WireRequest` and
its response body (JSON, or the raw server-sent-event stream) into a :class:`WireResponse`. Values
are kept as the provider sent them: tool arguments a string when the API returned a string, an
object when it returned an object; a tool result as the agent sent it back. What a body does not
say is None, never guessed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["ToolResult", "ToolUse", "WireFormat", "WireRequest", "WireResponse", "json_object"]


@dataclass(frozen=True, slots=True)
class ToolUse:
    """The model asking for a tool: ``arguments`` exactly as the API returned them."""

    id: str | None
    name: str | None
    arguments: Any


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool's result as the agent sent it back in a request (``output`` unconverted)."""

    id: str | None
    output: Any
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class WireRequest:
    """What one request body configures: model, system prompt, tools, sampling, tool results sent.

    ``system_prompt`` is the system text when the body holds it as one text (else None; the body
    itself is still the evidence). ``sampling`` holds the generation keys present in the body, in
    body order. ``tool_results`` are every tool result in the body's history, in order.
    """

    model: str | None
    system_prompt: str | None
    tools: Any
    sampling: dict[str, Any] = field(default_factory=dict)
    tool_results: tuple[ToolResult, ...] = ()


@dataclass(frozen=True, slots=True)
class WireResponse:
    """What one response says: the model version, text, tool calls and why it stopped.

    ``stop_reason`` is the capture's vocabulary (``end_turn``, ``max_tokens``, ``tool_call``,
    ``error``) or None when the provider's reason has no equivalent. ``complete``: the response (or
    stream) reached its final event.
    """

    model: str | None
    text: str | None
    tool_calls: tuple[ToolUse, ...] = ()
    stop_reason: str | None = None
    complete: bool = True
    reasoning: tuple[str, ...] = ()


class WireFormat(Protocol):
    """A provider format module: its name and its two readers."""

    FORMAT: str

    def parse_request(self, body: Mapping[str, Any]) -> WireRequest: ...

    def parse_response(self, body: str, *, streamed: bool) -> WireResponse: ...


def json_object(text: str, what: str) -> dict[str, Any]:
    """``text`` parsed as a JSON object; ValueError naming ``what`` otherwise."""
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"{what} is not a JSON object")
    return value

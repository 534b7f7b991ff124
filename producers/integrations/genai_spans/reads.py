"""What one span says, in the capture's terms, whichever convention it was written in.

:mod:`.gen_ai` (official OpenTelemetry GenAI) and :mod:`.openinference` (``llm.*``) each read a span
into these values; :mod:`.plan` assembles them into decisions. ``None`` always means *the span did
not carry it* (content capture off, an attribute the instrumentation does not set): nothing is
filled in from elsewhere.

The messages a model call sent are rendered as OpenAI chat messages (:data:`CHAT_MESSAGES_FORMAT`),
the rendering a semantic capture states and replays through; tool arguments and results are kept
as the span carried them (a JSON string stays a string, a structured value stays structured).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from producers.integrations.genai_spans.span import Span

__all__ = [
    "AgentRead",
    "ChatRead",
    "DocumentRead",
    "RequestedTool",
    "ToolRead",
    "chat_tool",
    "dumps",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestedTool:
    """A tool call a model asked for in its output; ``arguments`` as the span carried them."""

    id: str | None
    name: str | None
    arguments: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatRead:
    """One model call (a chat span; an agent span's own model-level attributes read the same way).

    ``messages``: everything the call sent, system instructions first, as OpenAI chat messages;
    None when the span carries no input messages. ``tool_results``: (tool call id, result as
    carried) that this request sent back.
    """

    span: Span
    provider: str | None
    model: str | None
    response_model: str | None
    endpoint: str | None
    sampling: Mapping[str, Any]
    system_prompt: str | None
    messages: tuple[dict[str, Any], ...] | None
    tools: tuple[Any, ...] | None
    tool_results: tuple[tuple[str | None, Any], ...]
    output_text: str | None
    reasoning: tuple[str, ...]
    requested: tuple[RequestedTool, ...]
    finish_reason: str | None
    input_tokens: int | None
    problems: tuple[str, ...]

    @property
    def user_text(self) -> str | None:
        """The text of the last user message (the inbound turn), when it is one string."""
        for message in reversed(self.messages or ()):
            if message.get("role") == "user" and isinstance(message.get("content"), str):
                content: str = message["content"]
                return content
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolRead:
    """One tool execution; ``arguments`` / ``result`` None when the span does not carry them."""

    span: Span
    name: str | None
    call_id: str | None
    arguments: Any
    result: Any
    error: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class DocumentRead:
    """One retrieved document; ``content`` None when the span does not carry it."""

    span: Span
    id: str | None
    score: float | None
    content: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentRead:
    """The root agent span: who ran, what it was asked and answered (None when not carried), and its
    own model-level attributes (system instructions, tools, sampling), read as a :class:`ChatRead`."""

    span: Span
    agent_id: str | None
    agent_name: str | None
    conversation_id: str | None
    user_id: str | None
    request: Any
    output_text: str | None
    model: ChatRead


def dumps(value: Any) -> str:
    """A structured value as text inside a chat message (tool arguments, tool results)."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def chat_tool(definition: Any) -> Any:
    """A tool definition as a Chat Completions ``tools`` entry; one already in that shape, or of
    another type than ``function``, is kept as given."""
    if not isinstance(definition, Mapping) or "function" in definition:
        return definition
    if definition.get("type", "function") != "function" or not isinstance(definition.get("name"), str):
        return definition
    function = {
        key: definition[key]
        for key in ("name", "description", "parameters", "strict")
        if definition.get(key) is not None
    }
    return {"type": "function", "function": function}


def joined_text(parts: Sequence[str]) -> str | None:
    return None if not parts else "\n".join(parts)


def first_system_text(messages: Iterable[Mapping[str, Any]]) -> str | None:
    """The text of the first system (or developer) message: the prompt when no attribute of its own carries it."""
    return next(
        (
            m["content"]
            for m in messages
            if m.get("role") in ("system", "developer") and isinstance(m.get("content"), str)
        ),
        None,
    )


def document_read(span: Span, *, doc_id: Any, score: Any, content: Any) -> DocumentRead:
    """A retrieved document from its raw fields; a field of the wrong type reads as absent."""
    return DocumentRead(
        span=span,
        id=str(doc_id) if isinstance(doc_id, str | int) and not isinstance(doc_id, bool) else None,
        score=float(score) if isinstance(score, int | float) and not isinstance(score, bool) else None,
        content=content if isinstance(content, str) else None,
    )

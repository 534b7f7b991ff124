"""OpenAI Chat Completions on the wire: request body, response, finish reasons, tool calls.

The same format is spoken by vLLM, llama.cpp, Ollama and most hosted APIs:
``POST {base}/chat/completions`` with a JSON body. The body's ``messages`` value is held as exact
JSON text (a capture's rendered context, verbatim): the body is built by concatenating JSON text
around it, never by parsing and re-serializing the messages, so the bytes the model receives are
the bytes the capture hashed. Later turns of a tool-calling loop append messages the same way
(the captured prefix stays byte-identical).

Tool-call ``arguments`` stay exactly as the API returned them: a JSON string stays that string,
whatever its spacing or key order, because its hash is taken over those bytes.

:func:`parse_request` and :func:`parse_response` read a captured call (a request body; a completion
or its ``data:`` chunk stream) for the capture adapters.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from producers.context import CHAT_MESSAGES_FORMAT, RenderedContext
from producers.wire.calls import ToolResult, ToolUse, WireRequest, WireResponse, json_object
from producers.wire.sse import parse_events
from schemas.errors import CaptureNotReplayable, ContractError, ModelClientError

PATH = "/chat/completions"
"""Appended to an OpenAI-compatible base URL (``https://host/v1``) to reach the endpoint."""

# finish_reason -> the capture's stopReason (what the replay report shows).
FINISH_TO_STOP: Mapping[str, str] = MappingProxyType(
    {
        "stop": "end_turn",
        "length": "max_tokens",
        "tool_calls": "tool_call",
        "function_call": "tool_call",
        "content_filter": "error",
    }
)


def stop_reason_for(finish_reason: str | None) -> str:
    """The capture's ``stopReason`` for a completion's ``finish_reason``.

    No finish reason reads as ``"stop"`` (the server answered normally and omitted it); a reason
    the table does not know passes through unchanged rather than being guessed at.
    """
    finish = finish_reason or "stop"
    return FINISH_TO_STOP.get(finish, finish)


def request_headers(api_key: str | None) -> dict[str, str]:
    """The HTTP headers of a request; the key travels only as a bearer token, never in the body."""
    headers = {"Content-Type": "application/json"}
    if api_key is not None:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One chat-completions request, with ``messages`` held as exact JSON text.

    ``endpoint`` is the base URL the request was (or is to be) sent to, when known; it is not part
    of the body.
    """

    model: str
    messages_text: str
    tools: Any = None
    sampling: Mapping[str, Any] = field(default_factory=dict)
    endpoint: str | None = None

    def body(self, extra_messages: Sequence[Mapping[str, Any]] = ()) -> str:
        """The JSON body text; ``messages`` is ``messages_text`` with ``extra_messages`` appended."""
        parts = ['{"model": ', json.dumps(self.model), ', "messages": ']
        parts.append(append_messages(self.messages_text, extra_messages))
        if self.tools is not None:
            parts += [', "tools": ', json.dumps(self.tools, ensure_ascii=False)]
        for key, value in self.sampling.items():
            if value is not None:
                parts += [", ", json.dumps(key), ": ", json.dumps(value, ensure_ascii=False)]
        parts.append("}")
        return "".join(parts)

    def to_json(self, extra_messages: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
        """The request as a dict: exactly what an HTTP server would parse from :meth:`body`."""
        value: dict[str, Any] = json.loads(self.body(extra_messages))
        return value

    def messages(self) -> list[dict[str, Any]]:
        value = json.loads(self.messages_text)
        if not isinstance(value, list):
            raise ContractError("rendered context is not a JSON array", path="renderedContext.text")
        return value

    def with_changes(self, **changes: Any) -> ChatRequest:
        return replace(self, **changes)


def append_messages(messages_text: str, extra: Sequence[Mapping[str, Any]]) -> str:
    """``messages_text`` (a JSON array) with ``extra`` appended, leaving its own bytes untouched."""
    if not extra:
        return messages_text
    head = messages_text.rstrip()
    if not head.endswith("]"):
        raise ContractError("rendered context does not end a JSON array", path="renderedContext.text")
    body = head[:-1]
    tail = ", ".join(json.dumps(m, ensure_ascii=False) for m in extra)
    separator = ", " if body.rstrip()[-1:] != "[" else ""
    return f"{body}{separator}{tail}]"


def request_from_capture(config: Mapping[str, Any], rendered: RenderedContext) -> ChatRequest:
    """The request a capture records, from its ``agentConfiguration`` and rendered context.

    The rendered text becomes ``messages`` verbatim, so it must be chat messages
    (:class:`CaptureNotReplayable` otherwise); the tool schema document becomes ``tools``
    (:func:`tools_from_schema`). A missing model, or messages that are not a JSON array, is a
    :class:`ContractError`.
    """
    if rendered.format != CHAT_MESSAGES_FORMAT:
        raise CaptureNotReplayable(
            f"rendered context format {rendered.format!r} is not {CHAT_MESSAGES_FORMAT!r}; "
            "no client here can send it verbatim"
        )
    request = ChatRequest(
        model=str(config.get("modelIdentifier") or ""),
        messages_text=rendered.text,
        tools=tools_from_schema(config.get("toolSchemaJson")),
        sampling=dict(config.get("samplingParameters") or {}),
        endpoint=config.get("modelProviderEndpoint"),
    )
    if not request.model:
        raise ContractError("no model identifier", path="agentConfiguration.modelIdentifier")
    request.messages()  # the verbatim text must at least be a JSON array
    return request


def tools_from_schema(schema: Any) -> Any:
    """The ``tools`` value of the request: ``schema["tools"]`` for ``{"tools": [...]}``, or the list."""
    if schema is None:
        return None
    if isinstance(schema, list):
        return schema
    if isinstance(schema, dict) and isinstance(schema.get("tools"), list):
        return schema["tools"]
    raise ContractError(
        'tool schema is neither a list of tools nor {"tools": [...]}',
        path="agentConfiguration.toolSchemaJson",
    )


def schema_for_tools(schema: Any, tools: Any) -> Any:
    """The schema document that ``tools`` came from, shaped like the captured one (for hashing)."""
    if isinstance(schema, dict):
        return {**schema, "tools": tools}
    return tools


@dataclass(frozen=True, slots=True)
class ToolCallRequest:
    """One entry of an assistant message's ``tool_calls``: the model asking for a function call.

    Every field is the value the API returned, unconverted: ``arguments`` is normally a JSON
    string and stays that exact string; a field the entry lacks is None.
    """

    id: str | None
    name: str | None
    arguments: Any


def parse_tool_calls(message: Mapping[str, Any]) -> tuple[ToolCallRequest, ...]:
    """The tool calls an assistant message asks for, in order (none for a final answer)."""
    calls = []
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        calls.append(
            ToolCallRequest(id=call.get("id"), name=function.get("name"), arguments=function.get("arguments"))
        )
    return tuple(calls)


def tool_message(call_id: str | None, output: Any) -> dict[str, Any]:
    """The role-``"tool"`` message that answers the tool call ``call_id`` with ``output``."""
    return {"role": "tool", "tool_call_id": call_id, "content": tool_message_content(output)}


def tool_message_content(output: Any) -> str:
    """The ``content`` of the role-"tool" message carrying ``output`` back to the model."""
    return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)


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

    @property
    def tool_calls(self) -> tuple[ToolCallRequest, ...]:
        return parse_tool_calls(self.message)

    @property
    def stop_reason(self) -> str:
        return stop_reason_for(self.finish_reason)


# --- reading a captured call (the capture adapters) ------------------------------------------------

FORMAT = "openai.chat.completions"
"""The ``format`` of a captured Chat Completions call (``executionTrace.modelCalls[].format``)."""

SAMPLING_KEYS = frozenset(
    {
        "temperature",
        "top_p",
        "max_tokens",
        "max_completion_tokens",
        "stop",
        "seed",
        "presence_penalty",
        "frequency_penalty",
        "n",
        "logit_bias",
        "logprobs",
        "top_logprobs",
        "response_format",
        "tool_choice",
        "parallel_tool_calls",
        "reasoning_effort",
        "verbosity",
        "service_tier",
        "prediction",
        "modalities",
    }
)
"""Body keys that shape generation, recorded as the capture's sampling parameters."""

_SYSTEM_ROLES = frozenset({"system", "developer"})


def _text_content(content: Any) -> str | None:
    """A message's content when it is one text: a string, or a list holding one text part."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and len(content) == 1:
        part = content[0]
        if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
            return str(part["text"])
    return None


def parse_request(body: Mapping[str, Any]) -> WireRequest:
    """A request body: the system prompt is ``messages[0]`` when its role is system or developer;
    tool results are the role-``"tool"`` messages (``content`` as the agent sent it)."""
    messages = body.get("messages")
    messages = messages if isinstance(messages, list) else []
    first = messages[0] if messages and isinstance(messages[0], dict) else {}
    system = _text_content(first.get("content")) if first.get("role") in _SYSTEM_ROLES else None
    results = tuple(
        ToolResult(id=message.get("tool_call_id"), output=message.get("content"))
        for message in messages
        if isinstance(message, dict) and message.get("role") == "tool"
    )
    model = body.get("model")
    return WireRequest(
        model=model if isinstance(model, str) else None,
        system_prompt=system,
        tools=body.get("tools"),
        sampling={key: value for key, value in body.items() if key in SAMPLING_KEYS},
        tool_results=results,
    )


def parse_response(body: str, *, streamed: bool) -> WireResponse:
    """A completion (JSON) or its stream (``data:`` chunks ending with ``data: [DONE]``)."""
    if not streamed:
        response = ChatResponse.from_completion(json_object(body, "a chat completion"))
        content = response.message.get("content")
        return WireResponse(
            model=response.model,
            text=content if isinstance(content, str) else None,
            tool_calls=tuple(ToolUse(c.id, c.name, c.arguments) for c in response.tool_calls),
            stop_reason=_capture_stop(response.finish_reason),
        )
    model: str | None = None
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finish: str | None = None
    done = False
    for event in parse_events(body):
        if event.data.strip() == "[DONE]":
            done = True
            continue
        chunk = json_object(event.data, "a chat completion chunk")
        model = chunk.get("model") or model
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            finish = choice.get("finish_reason") or finish
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                text.append(delta["content"])
            for piece in delta.get("tool_calls") or ():
                call = calls.setdefault(piece.get("index", 0), {"id": None, "name": None, "arguments": None})
                call["id"] = piece.get("id") or call["id"]
                function = piece.get("function") or {}
                call["name"] = function.get("name") or call["name"]
                if isinstance(function.get("arguments"), str):
                    call["arguments"] = (call["arguments"] or "") + function["arguments"]
    return WireResponse(
        model=model,
        text="".join(text) if text else None,
        tool_calls=tuple(ToolUse(c["id"], c["name"], c["arguments"]) for _, c in sorted(calls.items())),
        stop_reason=None if finish is None else _capture_stop(finish),  # a cut stream said nothing
        complete=done or finish is not None,
    )


_CAPTURE_STOPS = frozenset({"end_turn", "max_tokens", "tool_call", "error"})


def _capture_stop(finish_reason: str | None) -> str | None:
    stop = stop_reason_for(finish_reason)
    return stop if stop in _CAPTURE_STOPS else None

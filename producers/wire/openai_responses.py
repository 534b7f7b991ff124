"""OpenAI Responses on the wire: ``POST {base}/responses``, plain or streamed.

The system prompt is the body's ``instructions`` (or a leading system/developer message of a list
``input``); tools are ``tools``; a tool result is an ``input`` item of type
``function_call_output`` (``output`` as the agent sent it). A response's ``output`` items carry the
text (``message`` items' ``output_text`` parts) and the tool calls (``function_call`` items, whose
``arguments`` is the JSON *string* the model produced, kept exactly). A stream is a series of
``event:`` + ``data:`` pairs ending with ``response.completed`` (or ``response.incomplete`` /
``response.failed``), whose ``response`` is the whole response.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from producers.wire.calls import ToolResult, ToolUse, WireRequest, WireResponse, json_object
from producers.wire.sse import parse_events

__all__ = ["FORMAT", "PATH", "SAMPLING_KEYS", "parse_request", "parse_response"]

FORMAT = "openai.responses"
PATH = "/responses"
"""Appended to an OpenAI-compatible base URL (``https://host/v1``)."""

SAMPLING_KEYS = frozenset(
    {
        "temperature",
        "top_p",
        "max_output_tokens",
        "max_tool_calls",
        "tool_choice",
        "parallel_tool_calls",
        "reasoning",
        "text",
        "truncation",
        "top_logprobs",
        "service_tier",
    }
)
"""Body keys that shape generation, recorded as the capture's sampling parameters."""

_TOOL_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output"})
_TOOL_CALLS = frozenset({"function_call", "custom_tool_call"})
_TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})


def _system(body: Mapping[str, Any]) -> str | None:
    instructions = body.get("instructions")
    if isinstance(instructions, str):
        return instructions
    items = body.get("input")
    if isinstance(items, list) and items and isinstance(items[0], dict):
        first = items[0]
        if first.get("role") in ("system", "developer"):
            content = first.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list) and len(content) == 1 and isinstance(content[0], dict):
                text = content[0].get("text")
                return text if isinstance(text, str) else None
    return None


def parse_request(body: Mapping[str, Any]) -> WireRequest:
    items = body.get("input")
    results = tuple(
        ToolResult(id=item.get("call_id"), output=item.get("output"))
        for item in (items if isinstance(items, list) else ())
        if isinstance(item, dict) and item.get("type") in _TOOL_OUTPUTS
    )
    model = body.get("model")
    return WireRequest(
        model=model if isinstance(model, str) else None,
        system_prompt=_system(body),
        tools=body.get("tools"),
        sampling={key: value for key, value in body.items() if key in SAMPLING_KEYS},
        tool_results=results,
    )


def _from_response(response: Mapping[str, Any], *, complete: bool) -> WireResponse:
    texts: list[str] = []
    calls: list[ToolUse] = []
    reasoning: list[str] = []
    for item in response.get("output") or ():
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or ():
                if isinstance(part, dict) and part.get("type") == "output_text":
                    texts.append(str(part.get("text") or ""))
        elif kind in _TOOL_CALLS:
            arguments = item.get("arguments") if kind == "function_call" else item.get("input")
            calls.append(ToolUse(item.get("call_id"), item.get("name"), arguments))
        elif kind == "reasoning":
            for summary in item.get("summary") or ():
                if isinstance(summary, dict) and isinstance(summary.get("text"), str):
                    reasoning.append(summary["text"])
    status = response.get("status")
    details = response.get("incomplete_details") or {}
    if calls:
        stop: str | None = "tool_call"
    elif status == "incomplete" and details.get("reason") == "max_output_tokens":
        stop = "max_tokens"
    elif status in ("failed", "cancelled") or response.get("error"):
        stop = "error"
    elif status == "completed":
        stop = "end_turn"
    else:
        stop = None
    model = response.get("model")
    return WireResponse(
        model=model if isinstance(model, str) else None,
        text="".join(texts) if texts else None,
        tool_calls=tuple(calls),
        stop_reason=stop,
        complete=complete,
        reasoning=tuple(reasoning),
    )


def parse_response(body: str, *, streamed: bool) -> WireResponse:
    """A response (JSON), or its stream read up to its terminal event.

    A stream cut before its terminal event is read from the ``response.output_item.done`` items it
    did deliver, marked incomplete.
    """
    if not streamed:
        return _from_response(json_object(body, "a response"), complete=True)
    items: list[Any] = []
    last: Mapping[str, Any] = {}
    for event in parse_events(body):
        data = json_object(event.data, "a response event")
        kind = event.event or data.get("type")
        if kind in _TERMINAL and isinstance(data.get("response"), dict):
            return _from_response(data["response"], complete=True)
        if kind == "response.output_item.done":
            items.append(data.get("item"))
        elif isinstance(data.get("response"), dict):
            last = data["response"]
    return _from_response({**last, "output": items, "status": None}, complete=False)

"""Anthropic Messages on the wire: ``POST {base}/v1/messages``, plain or streamed.

The system prompt is the body's top-level ``system`` (a string, or a list of text blocks); tools are
``tools``; sampling is provider-specific (``max_tokens`` is required; the newest models refuse
``temperature``/``top_p``/``top_k``, so only the keys the body holds are recorded). A tool result is
a ``tool_result`` block inside a user message (``content`` as the agent sent it, ``is_error``). A
response's ``content`` holds ``text``, ``thinking`` and ``tool_use`` blocks; ``tool_use.input`` is
the object the API returned. A stream is ``message_start`` … ``content_block_start`` /
``content_block_delta`` (``text_delta``, ``input_json_delta``, ``thinking_delta``) /
``content_block_stop`` … ``message_delta`` (the stop reason) … ``message_stop``; a tool call's input
is the concatenated ``partial_json``, parsed as the API would return it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from producers.wire.calls import ToolResult, ToolUse, WireRequest, WireResponse, json_object
from producers.wire.sse import parse_events

__all__ = ["FORMAT", "PATH", "SAMPLING_KEYS", "STOP_REASONS", "parse_request", "parse_response"]

FORMAT = "anthropic.messages"
PATH = "/v1/messages"

SAMPLING_KEYS = frozenset(
    {
        "max_tokens",
        "temperature",
        "top_p",
        "top_k",
        "stop_sequences",
        "tool_choice",
        "thinking",
        "service_tier",
    }
)
"""Body keys that shape generation, recorded as the capture's sampling parameters."""

STOP_REASONS: Mapping[str, str] = MappingProxyType(
    {
        "end_turn": "end_turn",
        "stop_sequence": "end_turn",
        "max_tokens": "max_tokens",
        "model_context_window_exceeded": "max_tokens",
        "tool_use": "tool_call",
        "refusal": "error",
    }
)
"""``stop_reason`` -> the capture's ``stopReason``; others (``pause_turn``) have none (null)."""


def _system(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict):
        block = value[0]
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            return str(block["text"])
    return None


def parse_request(body: Mapping[str, Any]) -> WireRequest:
    results: list[ToolResult] = []
    for message in body.get("messages") or ():
        if not isinstance(message, dict) or not isinstance(message.get("content"), list):
            continue
        for block in message["content"]:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                results.append(
                    ToolResult(
                        id=block.get("tool_use_id"),
                        output=block.get("content"),
                        is_error=block.get("is_error") is True,
                    )
                )
    model = body.get("model")
    return WireRequest(
        model=model if isinstance(model, str) else None,
        system_prompt=_system(body.get("system")),
        tools=body.get("tools"),
        sampling={key: value for key, value in body.items() if key in SAMPLING_KEYS},
        tool_results=tuple(results),
    )


def _from_blocks(blocks: list[Any], *, model: Any, stop_reason: Any, complete: bool) -> WireResponse:
    texts = [str(b.get("text") or "") for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
    calls = tuple(
        ToolUse(b.get("id"), b.get("name"), b.get("input"))
        for b in blocks
        if isinstance(b, dict) and b.get("type") == "tool_use"
    )
    reasoning = tuple(
        str(b.get("thinking") or "") for b in blocks if isinstance(b, dict) and b.get("type") == "thinking"
    )
    return WireResponse(
        model=model if isinstance(model, str) else None,
        text="".join(texts) if texts else None,
        tool_calls=calls,
        stop_reason=STOP_REASONS.get(stop_reason) if isinstance(stop_reason, str) else None,
        complete=complete,
        reasoning=reasoning,
    )


def parse_response(body: str, *, streamed: bool) -> WireResponse:
    if not streamed:
        message = json_object(body, "a message")
        content = message.get("content")
        return _from_blocks(
            content if isinstance(content, list) else [],
            model=message.get("model"),
            stop_reason=message.get("stop_reason"),
            complete=True,
        )
    model: Any = None
    stop: Any = None
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, list[str]] = {}
    complete = False
    for event in parse_events(body):
        data = json_object(event.data, "a message event")
        kind = event.event or data.get("type")
        if kind == "message_start":
            model = (data.get("message") or {}).get("model")
        elif kind == "content_block_start":
            blocks[data.get("index", 0)] = dict(data.get("content_block") or {})
        elif kind == "content_block_delta":
            index = data.get("index", 0)
            block = blocks.setdefault(index, {})
            delta = data.get("delta") or {}
            if delta.get("type") == "text_delta":
                block["text"] = str(block.get("text") or "") + str(delta.get("text") or "")
            elif delta.get("type") == "thinking_delta":
                block["thinking"] = str(block.get("thinking") or "") + str(delta.get("thinking") or "")
            elif delta.get("type") == "input_json_delta":
                partial.setdefault(index, []).append(str(delta.get("partial_json") or ""))
        elif kind == "message_delta":
            stop = (data.get("delta") or {}).get("stop_reason") or stop
        elif kind == "message_stop":
            complete = True
    for index, pieces in partial.items():
        text = "".join(pieces)
        try:
            blocks[index]["input"] = json.loads(text) if text.strip() else {}
        except ValueError:
            blocks[index]["input"] = text  # a stream cut mid-argument: keep what arrived
    return _from_blocks(
        [blocks[index] for index in sorted(blocks)], model=model, stop_reason=stop, complete=complete
    )

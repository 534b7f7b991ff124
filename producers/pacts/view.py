"""The ``decision`` a CEL rule reads: a capture's structured data under short snake_case names.

Built from the capture's JSON form (the article's camelCase dict, as ingest decodes it or replay
rebuilds it). Content fields (``request``, a tool call's ``input`` / ``output``, ``final_output``,
a memory entry's ``content``, an external's value) are *left out* when the capture does not hold them
(structured-only or compacted): ``has(t.input)`` tells whether a rule can read them, and reading one
that is absent is an evaluation error, never a silent ``false``.

==========================  =================================================================
``decision.``               value
==========================  =================================================================
``id``, ``agent``,          decision, agent and runtime ids
``runtime``
``captured_at``             timestamp (``decision.captured_at > timestamp("2026-11-01T00:00:00Z")``)
``capture_level``           ``full`` | ``structured-only`` | ``sampled``
``fidelity``                ``wire`` | ``sdk`` | ``semantic``
``consequential``           bool; ``consequential_reason`` string
``outcome``                 ``{status, reason}``; ``failed`` is ``outcome.status == "failure"``
``request``                 the inbound request payload (content)
``user``, ``session``       origin user and session ids
``prompt_version``          system prompt version; ``prompt_hash``; ``tool_schema_version``
``model``                   ``{id, version, endpoint}``; ``sampling`` the sampling parameters map
``memory``                  list of ``{id, tier, position, score, method, source_type, writer,
                            content, bytes}`` (``content``/``bytes`` only when the content is held)
``memory_bytes``            working-set size in UTF-8 bytes (only when every entry's content is held)
``tool_calls``              list of ``{sequence, name, input, output, latency_ms, error, failed}``
                            in sequence order; ``error`` is the error reference or ``""``
``externals``               map of external-state key to the value the agent observed
``final_output``            the final output text (content); ``stop_reason``; ``latency_ms``
``context_tokens``,         token counts (null when not recorded)
``reasoning_tokens``
==========================  =================================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

__all__ = ["decision_view"]

_EMPTY: Mapping[str, Any] = {}


def decision_view(capture: Mapping[str, Any]) -> dict[str, Any]:
    """The ``decision`` variable of the pact and finding rules for one capture (module docstring)."""
    inp = capture.get("input") or _EMPTY
    config = capture.get("agentConfiguration") or _EMPTY
    memory = capture.get("memoryState") or _EMPTY
    trace = capture.get("executionTrace") or _EMPTY
    outcome = capture.get("outcome") or _EMPTY
    consequential = capture.get("consequential") or _EMPTY
    status = str(outcome.get("status") or "unknown")
    view: dict[str, Any] = {
        "id": str(capture.get("decisionId") or ""),
        "agent": str(capture.get("agentId") or ""),
        "runtime": str(capture.get("runtimeId") or ""),
        "captured_at": _timestamp(capture.get("capturedAt")),
        "capture_level": str(capture.get("captureLevel") or "full"),
        "fidelity": str(capture.get("fidelity") or "sdk"),
        "consequential": bool(consequential.get("flagged")),
        "consequential_reason": str(consequential.get("reason") or ""),
        "outcome": {"status": status, "reason": str(outcome.get("reason") or "")},
        "failed": status == "failure",
        "user": str(inp.get("originUserId") or ""),
        "session": str(inp.get("originSessionId") or ""),
        "prompt_version": str(config.get("systemPromptVersion") or ""),
        "prompt_hash": str(config.get("systemPromptHash") or ""),
        "tool_schema_version": str(config.get("toolSchemaVersion") or ""),
        "model": {
            "id": str(config.get("modelIdentifier") or ""),
            "version": str(config.get("modelVersion") or ""),
            "endpoint": str(config.get("modelProviderEndpoint") or ""),
        },
        "sampling": dict(config.get("samplingParameters") or _EMPTY),
        "memory": [],
        "tool_calls": _tool_calls(trace),
        "externals": _externals(capture),
        "stop_reason": str(trace.get("stopReason") or ""),
        "latency_ms": trace.get("totalLatencyMs"),
        "context_tokens": memory.get("totalContextTokens"),
        "reasoning_tokens": trace.get("reasoningTokenCount"),
    }
    _put_content(view, "request", inp.get("requestPayload"))
    _put_content(view, "final_output", trace.get("finalOutputText"))
    total: int | None = 0
    for position, entry in enumerate(memory.get("workingSetEntries") or ()):
        provenance = entry.get("provenance") or _EMPTY
        item: dict[str, Any] = {
            "id": str(entry.get("entryId") or ""),
            "tier": str(entry.get("tier") or ""),
            "position": position if entry.get("contextPosition") is None else entry["contextPosition"],
            "score": entry.get("retrievalScore"),
            "method": str(entry.get("retrievalMethod") or ""),
            "source_type": str(provenance.get("sourceType") or ""),
            "writer": str(provenance.get("writerId") or ""),
        }
        content = entry.get("renderedContent")
        if isinstance(content, str):
            item["content"] = content
            item["bytes"] = len(content.encode("utf-8"))
            total = None if total is None else total + item["bytes"]
        else:
            total = None
        view["memory"].append(item)
    if total is not None:
        view["memory_bytes"] = total
    return view


def _tool_calls(trace: Mapping[str, Any]) -> list[dict[str, Any]]:
    calls = sorted(trace.get("toolCalls") or (), key=lambda c: int(c.get("sequence") or 0))
    out: list[dict[str, Any]] = []
    for call in calls:
        error = str(call.get("errorRef") or "")
        item: dict[str, Any] = {
            "sequence": int(call.get("sequence") or 0),
            "name": str(call.get("toolName") or ""),
            "latency_ms": call.get("latencyMs"),
            "error": error,
            "failed": bool(error),
        }
        _put_content(item, "input", call.get("input"))
        _put_content(item, "output", call.get("output"))
        out.append(item)
    return out


def _externals(capture: Mapping[str, Any]) -> dict[str, Any]:
    state = capture.get("externalState") or _EMPTY
    values: dict[str, Any] = {}
    for external in state.get("observableExternals") or ():
        value = external.get("capturedValue")
        if value is not None:  # absent content: the key is left out, like every other content field
            values.setdefault(str(external.get("key") or ""), value)
    return values


def _put_content(target: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        target[key] = value


def _timestamp(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)

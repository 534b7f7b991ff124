"""Rebuild the exact model request a capture records, and prove it is exact before sending it.

The chat ``messages`` value is the captured ``renderedContext.text`` *verbatim*: the request body
is built by concatenating JSON text around it, never by parsing and re-serializing the messages,
so the bytes the model receives are the bytes the capture hashed. Later turns of a tool-calling
loop append messages the same way (the captured prefix stays byte-identical).

Before anything is sent, the rendered context, the system prompt and the tool schema are hashed
again and compared with the capture's hash fields (:func:`check_request`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from consumers.replay.digest import json_hash, text_hash
from producers.context import CHAT_MESSAGES_FORMAT, RenderedContext
from schemas.errors import CaptureNotReplayable, ContentHashMismatch, ContractError

NULL_JSON_HASH = json_hash(None)


class ContentAbsent(CaptureNotReplayable):
    """The capture verifies but lacks content a replay needs (structured-only or compacted).

    ``missing`` lists the content paths that are gone; ``available`` says what the record still
    offers (hashes, metadata) so the operator knows what questions it can still answer.
    """

    def __init__(self, message: str, *, missing: Sequence[str], available: Sequence[str]) -> None:
        self.missing = tuple(missing)
        self.available = tuple(available)
        super().__init__(f"{message}; still available: {', '.join(self.available)}")


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One OpenAI-compatible chat-completions request, with ``messages`` held as exact JSON text."""

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


@dataclass(frozen=True, slots=True)
class HashCheck:
    """One hash recomputed over what will be sent; ``ok`` is None when the capture holds no hash."""

    part: str
    expected: str | None
    actual: str

    @property
    def ok(self) -> bool | None:
        return None if self.expected is None else self.expected == self.actual


@dataclass(frozen=True, slots=True)
class RebuiltRequest:
    request: ChatRequest
    rendered: RenderedContext
    checks: tuple[HashCheck, ...]

    @property
    def mismatches(self) -> tuple[HashCheck, ...]:
        return tuple(c for c in self.checks if c.ok is False)

    def require_exact(self) -> None:
        """Raise :class:`ContentHashMismatch` naming the first part that does not match the capture."""
        for check in self.mismatches:
            raise ContentHashMismatch(
                f"rebuilt request hashes to {check.actual}, capture says {check.expected}", part=check.part
            )


def rebuild_request(capture: Mapping[str, Any]) -> RebuiltRequest:
    """The model request as captured, with its hash checks (not yet enforced: see ``require_exact``)."""
    require_replayable(capture)
    config = capture.get("agentConfiguration") or {}
    rendered = RenderedContext.from_json(capture["renderedContext"])
    if rendered.format != CHAT_MESSAGES_FORMAT:
        raise CaptureNotReplayable(
            f"rendered context format {rendered.format!r} is not {CHAT_MESSAGES_FORMAT!r}; "
            "no client here can send it verbatim"
        )
    schema = config.get("toolSchemaJson")
    request = ChatRequest(
        model=str(config.get("modelIdentifier") or ""),
        messages_text=rendered.text,
        tools=tools_from_schema(schema),
        sampling=dict(config.get("samplingParameters") or {}),
        endpoint=config.get("modelProviderEndpoint"),
    )
    if not request.model:
        raise ContractError("no model identifier", path="agentConfiguration.modelIdentifier")
    request.messages()  # the verbatim text must at least be a JSON array
    return RebuiltRequest(request=request, rendered=rendered, checks=check_request(capture, request))


def check_request(capture: Mapping[str, Any], request: ChatRequest) -> tuple[HashCheck, ...]:
    """Hash what will be sent and pair it with the capture's hash fields."""
    config = capture.get("agentConfiguration") or {}
    checks = [
        HashCheck(
            part="renderedContext.text",
            expected=(capture.get("renderedContext") or {}).get("hash"),
            actual=text_hash(request.messages_text),
        )
    ]
    prompt = config.get("systemPromptText")
    if prompt is not None:
        checks.append(
            HashCheck(
                part="agentConfiguration.systemPromptText",
                expected=config.get("systemPromptHash"),
                actual=text_hash(prompt),
            )
        )
    schema = config.get("toolSchemaJson")
    if schema is not None or config.get("toolSchemaHash") is not None:
        sent_schema = schema_for_tools(schema, request.tools)
        checks.append(
            HashCheck(
                part="agentConfiguration.toolSchemaJson",
                expected=config.get("toolSchemaHash"),
                actual=json_hash(sent_schema),
            )
        )
    return tuple(checks)


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


def require_replayable(capture: Mapping[str, Any]) -> None:
    """Raise :class:`ContentAbsent` unless every content part a replay needs is present."""
    missing = absent_replay_parts(capture)
    if not missing:
        return
    level = capture.get("captureLevel", "full")
    if level == "structured-only":
        why = "structured-only capture: the routine turn was recorded without rendered content"
    else:
        why = "metadata-only capture: its content was compacted away after the retention window"
    raise ContentAbsent(
        f"decision {capture.get('decisionId')} cannot be replayed ({why}; missing {', '.join(missing)})",
        missing=missing,
        available=_still_available(capture),
    )


def absent_replay_parts(capture: Mapping[str, Any]) -> list[str]:
    """Content paths replay needs whose content is gone while the capture still names a hash."""
    config = capture.get("agentConfiguration") or {}
    rendered = capture.get("renderedContext") or {}
    trace = capture.get("executionTrace") or {}
    missing: list[str] = []
    if rendered.get("text") is None:
        missing.append("renderedContext.text")
    if _absent(config, "systemPromptText", "systemPromptHash", text=True):
        missing.append("agentConfiguration.systemPromptText")
    if _absent(config, "toolSchemaJson", "toolSchemaHash", text=False):
        missing.append("agentConfiguration.toolSchemaJson")
    for i, call in enumerate(trace.get("toolCalls") or ()):
        if _absent(call, "output", "outputHash", text=False):
            missing.append(f"executionTrace.toolCalls[{i}].output")
    for i, external in enumerate((capture.get("externalState") or {}).get("observableExternals") or ()):
        if _absent(external, "capturedValue", "capturedValueHash", text=False):
            missing.append(f"externalState.observableExternals[{i}].capturedValue")
    return missing


def _absent(holder: Mapping[str, Any], key: str, hash_key: str, *, text: bool) -> bool:
    if holder.get(key) is not None:
        return False
    recorded = holder.get(hash_key)
    # A JSON part may legitimately be null; its hash then is the hash of "null".
    return recorded is not None and (text or recorded != NULL_JSON_HASH)


def _still_available(capture: Mapping[str, Any]) -> list[str]:
    config = capture.get("agentConfiguration") or {}
    trace = capture.get("executionTrace") or {}
    memory = capture.get("memoryState") or {}
    available = ["content hashes and the signed manifest (verify it with `blackbox verify`)"]
    if config.get("systemPromptVersion") or config.get("modelIdentifier"):
        available.append(
            f"configuration metadata (prompt {config.get('systemPromptVersion')}, model "
            f"{config.get('modelIdentifier')} {config.get('modelVersion')})"
        )
    calls = trace.get("toolCalls") or ()
    if calls:
        names = ", ".join(str(c.get("toolName")) for c in calls)
        available.append(f"tool-call sequence ({names}) with input/output hashes and latencies")
    entries = memory.get("workingSetEntries") or ()
    if entries:
        available.append(f"{len(entries)} working-set entry ids with provenance, tier and content hashes")
    if capture.get("outcome"):
        available.append(f"outcome ({(capture.get('outcome') or {}).get('status')})")
    return available

"""Rebuild the exact model request a capture records, and prove it is exact before sending it.

The request is the wire module's (``producers/wire/openai_chat.py``): its ``messages`` value is
the captured ``renderedContext.text`` *verbatim*, so the bytes the model receives are the bytes
the capture hashed.

Before anything is sent, the rendered context, the system prompt and the tool schema are hashed
again and compared with the capture's hash fields (:func:`check_request`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from consumers.replay.digest import json_hash, text_hash
from producers.context import RenderedContext
from producers.wire.openai_chat import ChatRequest, request_from_capture, schema_for_tools
from schemas.errors import CaptureNotReplayable, ContentHashMismatch

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
class HashCheck:
    """One hash recomputed over what will be sent; ``ok`` is None when the capture holds no hash."""

    part: str
    expected: str | None
    actual: str

    @property
    def ok(self) -> bool | None:
        return None if self.expected is None else self.expected == self.actual


def mismatched(checks: Sequence[HashCheck]) -> tuple[HashCheck, ...]:
    """The checks whose recomputed hash differs from the capture's (a check with no hash never does)."""
    return tuple(c for c in checks if c.ok is False)


def require_matching(checks: Sequence[HashCheck], *, sent: str) -> None:
    """Raise :class:`ContentHashMismatch` naming the first mismatched part; ``sent`` names what was hashed."""
    for check in mismatched(checks):
        raise ContentHashMismatch(
            f"{sent} hashes to {check.actual}, capture says {check.expected}", part=check.part
        )


@dataclass(frozen=True, slots=True)
class RebuiltRequest:
    request: ChatRequest
    rendered: RenderedContext
    checks: tuple[HashCheck, ...]

    @property
    def mismatches(self) -> tuple[HashCheck, ...]:
        return mismatched(self.checks)

    def require_exact(self) -> None:
        """Raise :class:`ContentHashMismatch` naming the first part that does not match the capture."""
        require_matching(self.checks, sent="rebuilt request")


def rebuild_request(capture: Mapping[str, Any]) -> RebuiltRequest:
    """The model request as captured, with its hash checks (not yet enforced: see ``require_exact``)."""
    require_replayable(capture)
    rendered = RenderedContext.from_json(capture["renderedContext"])
    request = request_from_capture(capture.get("agentConfiguration") or {}, rendered)
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
    for i, model_call in enumerate(trace.get("modelCalls") or ()):  # a wire capture sends these bytes
        if _absent(model_call, "requestBody", "requestBodyHash", text=True):
            missing.append(f"executionTrace.modelCalls[{i}].requestBody")
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

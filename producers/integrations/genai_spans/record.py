"""A :class:`~.plan.DecisionPlan` into the Recorder: one semantic-fidelity decision.

What the spans say goes where the Recorder puts a hand-recorded decision's parts:

* configuration: the first model call's request model, system instructions (or its first system
  message), tool definitions (as Chat Completions ``tools``), sampling (``gen_ai.request.*`` /
  ``llm.invocation_parameters``), and the model that answered as the model version;
* rendered context: the first call's messages as OpenAI chat messages (:data:`CHAT_MESSAGES_FORMAT`),
  with the spans of the system prompt, the user turn and each retrieved document whose text occurs;
* memory entries: retrieved documents in order, with their ids and scores (tier ``retrieval``);
* tool calls: ``execute_tool`` spans, else the calls the model asked for paired by id with the
  results later requests sent back; arguments and results as the spans carried them;
* final output, stop reason and reasoning from the agent span or the last call; the root span's
  error status as a failed outcome; its duration, its end time as ``capturedAt``.

What spans cannot carry stays absent, never invented: no request bytes (``modelCalls`` is empty),
no memory provenance, no external reads, and, when content capture was off, null content (system
prompt, rendered context, tool schema and arguments, outputs), not empty content. Problems reading
the spans are named in ``outcome.reason``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from producers import unrecordable as check
from producers.context import CHAT_MESSAGES_FORMAT
from producers.integrations.genai_spans.plan import DecisionPlan
from producers.integrations.genai_spans.reads import ChatRead

if TYPE_CHECKING:
    from producers.decision import StopReason
    from producers.recorder import Recorder

__all__ = ["MEMORY_TIER", "record_plan", "render_messages"]

MEMORY_TIER = "retrieval"
"""The tier of a memory entry rebuilt from a retrieval span (spans do not say more)."""

_STOP_REASONS: dict[str, StopReason] = {
    "stop": "end_turn",
    "end_turn": "end_turn",
    "length": "max_tokens",
    "max_tokens": "max_tokens",
    "tool_call": "tool_call",
    "tool_calls": "tool_call",
    "tool_use": "tool_call",
    "error": "error",
}


def _escaped(text: str) -> bytes:
    return json.dumps(text, ensure_ascii=False)[1:-1].encode("utf-8")


def render_messages(
    messages: Sequence[dict[str, Any]],
    *,
    system_prompt: str | None,
    user: str | None,
    memory: Sequence[tuple[str, str]],
) -> tuple[str, list[dict[str, Any]]]:
    """The chat messages as JSON text, and the byte spans of the system prompt and the user turn
    (whole string values) and of each memory entry's text (its first occurrence)."""
    text = json.dumps(list(messages), ensure_ascii=False)
    body = text.encode("utf-8")
    spans: list[dict[str, Any]] = []

    def whole(part: str, value: str | None, *, last: bool) -> None:
        if not value:
            return
        quoted = b'"' + _escaped(value) + b'"'
        at = body.rfind(quoted) if last else body.find(quoted)
        if at >= 0:
            spans.append(
                {"part": part, "start": at + 1, "end": at + len(quoted) - 1, "encoding": "json-string"}
            )

    whole("system_prompt", system_prompt, last=False)
    for entry_id, content in memory:
        form = _escaped(content) if content else b""
        at = body.find(form) if form else -1
        if at >= 0:
            spans.append(
                {"part": f"memory:{entry_id}", "start": at, "end": at + len(form), "encoding": "json-string"}
            )
    whole("user", user, last=True)
    return text, spans


def _named(value: str | None) -> str:
    """A required name the span may lack: None goes to the Recorder as is, which records the marker
    and names the problem in the capture (never a made-up name)."""
    return value  # type: ignore[return-value]


def _config_source(plan: DecisionPlan) -> ChatRead | None:
    if plan.calls:
        return plan.calls[0]
    return plan.agent.model if plan.agent is not None else None


def _tool_calls_from_messages(calls: Sequence[ChatRead]) -> list[tuple[str | None, Any, Any]]:
    out = []
    for index, call in enumerate(calls):
        for requested in call.requested:
            result = None
            if requested.id is not None:
                result = next(
                    (
                        r
                        for later in calls[index + 1 :]
                        for rid, r in later.tool_results
                        if rid == requested.id
                    ),
                    None,
                )
            out.append((requested.name, requested.arguments, result))
    return out


def record_plan(plan: DecisionPlan, recorder: Recorder, *, consequential: bool = False) -> str:
    """Record ``plan`` as one decision (fidelity ``semantic``); returns its id. Never raises for
    what the spans say (the Recorder names what it cannot record)."""
    agent, root = plan.agent, plan.root
    source = _config_source(plan)
    fallback = agent.model if agent is not None else None
    decision = recorder.decision(
        request=agent.request if agent is not None else None,
        origin_user_id=agent.user_id if agent is not None else None,
        origin_session_id=agent.conversation_id if agent is not None else None,
        consequential=consequential,
        decision_id=plan.decision_id,
        fidelity="semantic",
    )

    def first(attribute: str) -> Any:
        for read in (source, fallback):
            value = getattr(read, attribute, None) if read is not None else None
            if value is not None and value != {}:
                return value
        return None

    tools = first("tools")
    decision.configure(
        model=first("model"),
        model_version=next((c.response_model for c in plan.calls if c.response_model), None),
        endpoint=first("endpoint"),
        system_prompt=first("system_prompt"),
        tool_schema=list(tools) if tools is not None else None,
        sampling=first("sampling") or {},
    )
    memory: list[tuple[str, str]] = []
    for document in plan.documents:
        decision.add_memory(
            entry_id=_named(document.id), tier=MEMORY_TIER, content=document.content, score=document.score
        )
        if document.id is not None and document.content:
            memory.append((document.id, document.content))
    if source is not None and source.messages is not None:
        text, spans = render_messages(
            source.messages, system_prompt=source.system_prompt, user=source.user_text, memory=memory
        )
        decision.set_rendered_context(text, spans, format=CHAT_MESSAGES_FORMAT)

    if plan.tools:
        for tool in plan.tools:
            decision.add_tool_call(
                name=_named(tool.name),
                input=tool.arguments,
                output=tool.result,
                latency_ms=tool.span.duration_ms,
                error_ref=tool.error,
            )
    else:
        for name, arguments, result in _tool_calls_from_messages(plan.calls):
            decision.add_tool_call(name=_named(name), input=arguments, output=result)

    last = plan.calls[-1] if plan.calls else None
    stop: StopReason | None = None
    if last is not None and last.finish_reason is not None:
        stop = _STOP_REASONS.get(last.finish_reason)
    if root.error is not None:
        stop = "error"
    reasons = [root.error] if root.error is not None else []
    if plan.problems:
        reasons.append(
            f"rebuilt from spans with {len(plan.problems)} problem(s): {check.summary(list(plan.problems))}"
        )
    reasoning = [text for call in plan.calls for text in call.reasoning]
    output = agent.output_text if agent is not None and agent.output_text is not None else None
    if output is None and last is not None:
        output = last.output_text
    return decision.finish(
        output=output,
        stop_reason=stop,
        reasoning=reasoning or None,
        outcome="failure" if root.error is not None else "unknown",
        outcome_reason="; ".join(reasons) or None,
        total_latency_ms=root.duration_ms,
        total_context_tokens=plan.calls[0].input_tokens if plan.calls else None,
        captured_at=datetime.fromtimestamp(root.end_ns / 1e9, UTC),
    )

"""What one LangChain top-level run brought, and how it becomes a decision (no LangChain dispatch here).

The handler (:mod:`.handler`) fills a :class:`RunRecord` as callbacks arrive; :func:`record_decision`
writes it into the decision when the run ends. The conversions read LangChain's values defensively:
whatever a callback carries that is not what LangChain documents is left out or kept as given for
the recorder to mark, never raised.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

from langchain_core.messages import BaseMessage
from pydantic import BaseModel

from producers.context import CHAT_MESSAGES_FORMAT, ContextSpan

if TYPE_CHECKING:
    from producers.decision import DecisionBuilder, StopReason

__all__ = [
    "PROVENANCE_KEYS",
    "SAMPLING_KEYS",
    "SCORE_KEYS",
    "RunRecord",
    "ToolRun",
    "configuration",
    "describe",
    "jsonable",
    "memory_entry",
    "model_response",
    "record_decision",
    "run_name",
]

PROVENANCE_KEYS: Mapping[str, tuple[str, ...]] = {
    "writerId": ("writer_id", "writerId", "author", "created_by", "source"),
    "writtenAt": ("written_at", "writtenAt", "created_at", "updated_at", "last_modified", "timestamp"),
    "sourceType": ("source_type", "sourceType"),
}
"""Which document metadata key fills each provenance field (the first one present)."""

SCORE_KEYS = ("score", "relevance_score", "similarity_score")
SAMPLING_KEYS = (
    "temperature",
    "top_p",
    "top_k",
    "max_tokens",
    "max_completion_tokens",
    "max_output_tokens",
    "stop",
    "stop_sequences",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "n",
    "reasoning_effort",
)
"""Invocation parameters recorded as sampling (when present and not null)."""

_STOP_REASONS: Mapping[str, StopReason] = {
    "stop": "end_turn",
    "end_turn": "end_turn",
    "stop_sequence": "end_turn",
    "length": "max_tokens",
    "max_tokens": "max_tokens",
    "tool_calls": "tool_call",
    "function_call": "tool_call",
    "tool_use": "tool_call",
}


@dataclass
class ToolRun:
    sequence: int
    name: str
    input: Any
    started: float  # perf_counter seconds
    output: Any = None
    error: str | None = None
    ended: float | None = None


@dataclass
class RunRecord:
    """One top-level run being recorded: its decision and what its callbacks brought so far."""

    decision: DecisionBuilder
    inputs: Any
    runs: set[UUID] = field(default_factory=set)
    config: dict[str, Any] | None = None
    messages: list[dict[str, Any]] | None = None
    model_calls: int = 0
    last_text: str | None = None
    last_stop: StopReason | None = None
    memory: list[dict[str, Any]] = field(default_factory=list)
    tools: dict[UUID, ToolRun] = field(default_factory=dict)
    steps: dict[tuple[int, str], list[dict[str, Any]]] = field(default_factory=dict)
    retrievals: dict[UUID, dict[str, Any]] = field(default_factory=dict)  # started, not ended
    problems: list[tuple[str, Exception]] = field(default_factory=list)


def record_decision(root: RunRecord, *, output: Any, error: BaseException | None) -> None:
    """Write what the run brought into its decision, finish it and make it no longer current."""
    decision = root.decision
    for what, exc in root.problems:
        decision._failed(what, exc)
    try:
        _build(decision, root)
    except Exception as exc:
        decision._failed("langchain run", exc)
    text = _final_text(output)
    if text is None:
        text = root.last_text
    if error is None:
        decision.finish(output=text, stop_reason=root.last_stop)
    else:
        decision.finish(output=text, stop_reason="error", outcome="failure", outcome_reason=describe(error))
    decision.__exit__(None, None, None)  # no longer current (already finished: nothing else)


def _build(decision: DecisionBuilder, root: RunRecord) -> None:
    steps = [{"step": step, "node": node, "runs": runs} for (step, node), runs in root.steps.items()]
    payload: dict[str, Any] = {"inputs": root.inputs}
    if steps:
        payload["langgraph"] = steps
    decision.set_request(payload)
    config = root.config
    if config is not None:
        messages = root.messages
        decision.configure(**config)
        if messages is not None:
            text = json.dumps(messages, ensure_ascii=False)
            parts = [("system_prompt", config.get("system_prompt"))]
            parts += [(f"memory:{m['entry_id']}", m["content"]) for m in root.memory]
            decision.set_rendered_context(text, _spans(text, parts), format=CHAT_MESSAGES_FORMAT)
    for entry in root.memory:
        decision.add_memory(**entry)
    for tool in sorted(root.tools.values(), key=lambda t: t.sequence):
        ended = tool.ended
        decision.add_tool_call(
            name=tool.name,
            input=tool.input,
            output=tool.output,
            latency_ms=None if ended is None else round((ended - tool.started) * 1000),
            error_ref=tool.error if ended is not None else "no result: the run ended before the tool did",
            sequence=tool.sequence,
        )


def configuration(
    params: Mapping[str, Any],
    metadata: Mapping[str, Any],
    rendered: list[dict[str, Any]] | None,
    *,
    name: str,
) -> dict[str, Any]:
    """The model configuration a chat model's invocation states; without a model name, the chat
    model's own name (a test double, a wrapper) stands for it."""
    model = params.get("model") or params.get("model_name") or metadata.get("ls_model_name") or name
    system = None
    for message in rendered or ():
        if message.get("role") in ("system", "developer") and isinstance(message.get("content"), str):
            system = message["content"]
            break
    return {
        "model": model if isinstance(model, str) and model else name,
        "system_prompt": system,
        "tool_schema": jsonable(params["tools"]) if params.get("tools") else None,
        "sampling": {k: jsonable(params[k]) for k in SAMPLING_KEYS if params.get(k) is not None},
    }


def model_response(response: Any) -> tuple[str | None, StopReason | None, str | None]:
    """The last generation's text, its stop reason and the model that answered, where stated."""
    generations = [g for batch in getattr(response, "generations", None) or () for g in batch]
    if not generations:
        return None, None, None
    last = generations[-1]
    message = getattr(last, "message", None)
    info: dict[str, Any] = dict(getattr(last, "generation_info", None) or {})
    if isinstance(message, BaseMessage):
        info = {**dict(message.response_metadata or {}), **info}
        text: str | None = str(message.text)
    else:
        given = getattr(last, "text", None)
        text = given if isinstance(given, str) else None
    reason = info.get("finish_reason") or info.get("stop_reason")
    stop = _STOP_REASONS.get(reason) if isinstance(reason, str) else None
    if isinstance(message, BaseMessage) and getattr(message, "tool_calls", None):
        stop = "tool_call"
    llm_output = getattr(response, "llm_output", None) or {}
    version = info.get("model_name") or info.get("model") or llm_output.get("model_name")
    return text or None, stop, version if isinstance(version, str) else None


def memory_entry(document: Any, *, method: Any) -> dict[str, Any]:
    """A retrieved document as :meth:`DecisionBuilder.add_memory` keywords (context order: as added)."""
    metadata: Mapping[str, Any] = getattr(document, "metadata", None) or {}
    content = getattr(document, "page_content", None)
    entry_id = getattr(document, "id", None) or metadata.get("id")
    if not isinstance(entry_id, str | int) or entry_id == "":
        digest = hashlib.sha256(str(content).encode("utf-8", "surrogatepass")).hexdigest()
        entry_id = f"sha256:{digest[:16]}"
    provenance = {}
    for slot, keys in PROVENANCE_KEYS.items():
        value = next((metadata[k] for k in keys if metadata.get(k) not in (None, "")), None)
        provenance[slot] = value.isoformat() if isinstance(value, datetime | date) else value
        if value is not None and not isinstance(provenance[slot], str):
            provenance[slot] = json.dumps(jsonable(value), ensure_ascii=False)
    score = next((metadata[k] for k in SCORE_KEYS if isinstance(metadata.get(k), int | float)), None)
    tier = metadata.get("tier")
    return {
        "entry_id": str(entry_id),
        "tier": tier if isinstance(tier, str) and tier else "retrieved",
        "content": content,
        "provenance": provenance,
        "score": None if isinstance(score, bool) else score,
        "method": method if isinstance(method, str) else None,
    }


def _final_text(output: Any) -> str | None:
    """The text a run's output carries: a string, a message, or the last of its ``messages``."""
    if isinstance(output, str):
        return output
    if isinstance(output, BaseMessage):
        return str(output.text)
    if isinstance(output, Mapping):
        messages = output.get("messages")
        if isinstance(messages, Sequence) and messages and isinstance(messages[-1], BaseMessage):
            return _final_text(messages[-1])
        for key in ("output", "answer", "result"):
            if isinstance(output.get(key), str):
                return str(output[key])
    return None


def _spans(text: str, parts: Sequence[tuple[str, str | None]]) -> list[ContextSpan]:
    """Where each part's text first occurs in ``text`` (escaped as a JSON string), in UTF-8 bytes."""
    body = text.encode("utf-8", "surrogatepass")
    spans: list[ContextSpan] = []
    for part, value in parts:
        if not value:
            continue
        form = json.dumps(value, ensure_ascii=False)[1:-1].encode("utf-8", "surrogatepass")
        start = body.find(form)
        if start >= 0:
            spans.append(ContextSpan(part=part, start=start, end=start + len(form)))
    return spans


def jsonable(value: Any) -> Any:
    """LangChain values (messages, documents, pydantic models, dataclasses) in JSON form; what is
    not JSON stays as given, for the recorder to mark and name. Never raises."""
    try:
        return _to_json(value, 0)
    except Exception:
        return value


def _to_json(value: Any, depth: int) -> Any:
    if depth > 64 or value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, BaseModel):
        try:
            return value.model_dump(mode="json")
        except Exception:
            return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _to_json(dataclasses.asdict(value), depth + 1)
    if isinstance(value, Mapping):
        return {str(k): _to_json(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_to_json(v, depth + 1) for v in value]
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    return value


def run_name(serialized: Mapping[str, Any] | None, kwargs: Mapping[str, Any]) -> str:
    name = kwargs.get("name")
    if isinstance(name, str) and name:
        return name
    if serialized:
        if isinstance(serialized.get("name"), str):
            return str(serialized["name"])
        ident = serialized.get("id")
        if isinstance(ident, list) and ident and isinstance(ident[-1], str):
            return ident[-1]
    return "unknown"


def describe(error: BaseException) -> str:
    try:
        return f"{type(error).__name__}: {error}"
    except Exception:  # an exception whose str() fails
        return type(error).__name__

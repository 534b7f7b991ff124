"""Building one decision's capture on the runtime's thread: cheap, keyword-only, no I/O.

A :class:`DecisionBuilder` collects what the runtime saw and did (configuration, working set,
rendered context, tool calls, external reads, final output) as plain JSON-form values. It never
hashes, signs or encodes: :meth:`DecisionBuilder.finish` hands the builder to the recorder's
queue and the background worker turns it into a capture (:meth:`DecisionBuilder.to_capture`).

JSON values given to the builder (request payload, tool schema, tool inputs/outputs, external
values, provenance, sampling parameters) are snapshotted when given — dicts and lists are copied,
strings and numbers shared — so a runtime may reuse or mutate its objects afterwards
(``snapshot=False`` on the recorder skips the copy for runtimes that never mutate).
"""

from __future__ import annotations

import contextlib
import os
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Self

from producers.context import CHAT_MESSAGES_FORMAT, ContextSpan, RenderedContext, render_chat_context
from schemas.errors import ContractError

if TYPE_CHECKING:
    from producers.recorder import Recorder

__all__ = [
    "AgentConfig",
    "Clock",
    "DecisionBuilder",
    "ReplayPolicy",
    "format_timestamp",
    "new_decision_id",
    "pin_config",
    "snapshot_json",
    "system_clock",
]

Clock = Callable[[], datetime]
OutcomeStatus = Literal["success", "failure", "unknown"]
StopReason = Literal["end_turn", "max_tokens", "tool_call", "error"]


def system_clock() -> datetime:
    return datetime.now(UTC)


def format_timestamp(moment: datetime) -> str:
    """ISO-8601 UTC with milliseconds and ``Z``: ``2026-07-23T13:00:00.456Z``."""
    if moment.tzinfo is None:
        raise ValueError("the clock must return timezone-aware datetimes")
    moment = moment.astimezone(UTC)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond // 1000:03d}Z"


_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# Ids need uniqueness, not secrecy: a PRNG seeded from the OS (re-seeded in forked children) avoids
# os.urandom's syscall, which releases the GIL on the caller's thread and can cost a GIL wait.
_ids = random.Random(os.urandom(32))
os.register_at_fork(after_in_child=lambda: _ids.seed(os.urandom(32)))


def new_decision_id(moment: datetime) -> str:
    """``dec_`` + a ULID: 48-bit ms timestamp + 80 random bits, Crockford base32 (sorts by time)."""
    value = (int(moment.timestamp() * 1000) << 80) | _ids.getrandbits(80)
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "dec_" + "".join(reversed(chars))


_ATOMS = frozenset({str, int, float, bool, type(None)})


def snapshot_json(value: Any) -> Any:
    """A copy of a JSON value's containers (dict/list; tuples become lists); leaves are shared."""
    kind = type(value)
    if kind is dict:
        return {key: item if type(item) in _ATOMS else snapshot_json(item) for key, item in value.items()}
    if kind is list or kind is tuple:
        return [item if type(item) in _ATOMS else snapshot_json(item) for item in value]
    if isinstance(value, Mapping):
        return {key: snapshot_json(item) for key, item in value.items()}
    return value  # a leaf, or not JSON (refused with its path by the worker)


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentConfig:
    """What the model was configured with; set once on the recorder or per decision."""

    model: str
    model_version: str | None = None
    endpoint: str | None = None
    system_prompt: str | None = None
    system_prompt_version: str | None = None
    tool_schema: Any = None
    tool_schema_version: str | None = None
    sampling: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "systemPromptVersion": self.system_prompt_version,
            "systemPromptHash": None,
            "systemPromptText": self.system_prompt,
            "toolSchemaVersion": self.tool_schema_version,
            "toolSchemaHash": None,
            "toolSchemaJson": self.tool_schema,
            "modelIdentifier": self.model,
            "modelVersion": self.model_version,
            "modelProviderEndpoint": self.endpoint,
            "samplingParameters": dict(self.sampling),
        }


def pin_config(config: AgentConfig, *, owned: bool) -> None:
    """Hash the configuration's parts once, so sealing every decision that uses it skips them.

    The system prompt (a ``str``, immutable) is always pinned; the tool schema (and its JSON text
    for the codec) only when ``owned`` — the recorder's own snapshot, which nothing mutates.
    Content that cannot be hashed is left for the worker to refuse with its path.
    """
    from producers.evidence.parts import pin_part
    from schemas.codec import pin_json_text

    with contextlib.suppress(Exception):
        if type(config.system_prompt) is str:
            pin_part(config.system_prompt, "text")
        if owned and config.tool_schema is not None:
            pin_part(config.tool_schema, "json")
            pin_json_text(config.tool_schema)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayPolicy:
    """The capture's ``replayPolicy``: who may replay it and the runtime's retention request."""

    retention_days: int | None = 365
    pii_redacted: bool = False
    access_scope: Literal["operator", "regulator", "counterparty"] = "operator"

    def to_json(self) -> dict[str, Any]:
        return {
            "retentionDays": self.retention_days,
            "piiRedacted": self.pii_redacted,
            "replayAccessScope": self.access_scope,
        }


class DecisionBuilder:
    """One decision being recorded. Use as a context manager, or call :meth:`finish` yourself.

    Leaving the ``with`` block without :meth:`finish` still records the decision: after an
    exception with outcome ``failure`` and stop reason ``error`` (the exception is not swallowed),
    otherwise with outcome ``unknown``. A builder is used by one thread; after :meth:`finish` it
    is frozen (further calls raise :class:`ContractError`).
    """

    def __init__(
        self,
        recorder: Recorder,
        *,
        decision_id: str,
        request: Any,
        origin_user_id: str | None,
        origin_session_id: str | None,
        consequential: bool,
        consequential_reason: str | None,
        config: AgentConfig | None,
        replay_policy: ReplayPolicy,
        snapshot: Callable[[Any], Any],
    ) -> None:
        self._recorder = recorder
        self._snap = snapshot
        self.decision_id = decision_id
        self.agent_id = recorder.agent_id
        self._started = time.perf_counter()
        self._request = snapshot(request)
        self._origin = (origin_user_id, origin_session_id)
        self.consequential = consequential
        self.consequential_reason = consequential_reason
        self._config = config
        self._replay_policy = replay_policy
        self._memory: list[dict[str, Any]] = []
        self._rendered: dict[str, Any] | None = None
        self._tool_calls: list[dict[str, Any]] = []
        self._externals: list[dict[str, Any]] = []
        self._total_context_tokens: int | None = None
        self._final: dict[str, Any] = {}
        self._outcome: tuple[OutcomeStatus, str | None] = ("unknown", None)
        self._captured_at = ""
        self.finished = False

    # --- recording ---------------------------------------------------------------------------
    def _open(self) -> None:
        if self.finished:
            raise ContractError("decision already finished", path=self.decision_id)

    def configure(
        self,
        *,
        model: str,
        model_version: str | None = None,
        endpoint: str | None = None,
        system_prompt: str | None = None,
        system_prompt_version: str | None = None,
        tool_schema: Any = None,
        tool_schema_version: str | None = None,
        sampling: Mapping[str, Any] | None = None,
    ) -> Self:
        """The model configuration of this decision (overrides the recorder's default)."""
        self._open()
        self._config = AgentConfig(
            model=model,
            model_version=model_version,
            endpoint=endpoint,
            system_prompt=system_prompt,
            system_prompt_version=system_prompt_version,
            tool_schema=self._snap(tool_schema),
            tool_schema_version=tool_schema_version,
            sampling=self._snap(dict(sampling or {})),
        )
        return self

    def use_config(self, config: AgentConfig) -> Self:
        """Use a prepared :class:`AgentConfig` (shared, already snapshotted) for this decision."""
        self._open()
        self._config = config
        return self

    def add_memory(
        self,
        *,
        entry_id: str,
        tier: str,
        content: str | None,
        provenance: Mapping[str, Any] | None = None,
        score: float | None = None,
        method: str | None = None,
        embedding_model: str | None = None,
        embedding_version: str | None = None,
        position: int | None = None,
    ) -> Self:
        """One working-set entry, in context order (``position`` defaults to the next one).

        ``provenance`` is ``{"writerId", "writtenAt", "sourceType"}`` (missing keys are null).
        """
        self._open()
        prov = provenance or {}
        self._memory.append(
            {
                "entryId": entry_id,
                "tier": tier,
                "provenance": {
                    "writerId": prov.get("writerId"),
                    "writtenAt": prov.get("writtenAt"),
                    "sourceType": prov.get("sourceType"),
                },
                "renderedContent": content,
                "contextPosition": len(self._memory) if position is None else position,
                "retrievalScore": score,
                "retrievalMethod": method,
                "embeddingModel": embedding_model,
                "embeddingVersion": embedding_version,
                "renderedContentHash": None,
            }
        )
        return self

    def render_context(self, *, user_message: str) -> RenderedContext:
        """Render ``[system prompt, working set, user message]`` as chat messages and record it.

        Returns the :class:`RenderedContext`; send ``.text`` (or ``.messages()``) to the model so
        the capture holds exactly what the model received.
        """
        self._open()
        config = self._config or self._recorder.default_config
        if config is None or config.system_prompt is None:
            raise ContractError(
                "configure(system_prompt=...) before render_context()", path="renderedContext"
            )
        memory = sorted(self._memory, key=lambda e: e["contextPosition"])
        rendered = render_chat_context(
            system_prompt=config.system_prompt,
            memory=[(e["entryId"], e["renderedContent"] or "") for e in memory],
            user_message=user_message,
        )
        self._rendered = {"format": rendered.format, "text": rendered.text, "spans": rendered.spans}
        return rendered

    def set_rendered_context(
        self,
        text: str,
        spans: Sequence[ContextSpan | Mapping[str, Any]] = (),
        *,
        format: str = CHAT_MESSAGES_FORMAT,
    ) -> Self:
        """Record a context the runtime rendered itself: the exact text and its part spans."""
        self._open()
        self._rendered = {"format": format, "text": text, "spans": tuple(spans)}
        return self

    def add_tool_call(
        self,
        *,
        name: str,
        input: Any,
        output: Any,
        latency_ms: int | None = None,
        error_ref: str | None = None,
        sequence: int | None = None,
    ) -> int:
        """One tool call (in order); returns its sequence number (1-based)."""
        self._open()
        seq = len(self._tool_calls) + 1 if sequence is None else sequence
        self._tool_calls.append(
            {
                "sequence": seq,
                "toolName": name,
                "input": self._snap(input),
                "inputHash": None,
                "output": self._snap(output),
                "outputHash": None,
                "latencyMs": None if latency_ms is None else int(latency_ms),
                "errorRef": error_ref,
            }
        )
        return seq

    def observe_external(
        self, *, key: str, value: Any, source: str | None = None, captured_at: datetime | str | None = None
    ) -> Self:
        """An external value the decision read (balance, inventory, ...), as of ``captured_at`` (now)."""
        self._open()
        if captured_at is None:
            captured_at = self._recorder.clock()
        self._externals.append(
            {
                "key": key,
                "capturedValue": self._snap(value),
                "capturedValueHash": None,
                "capturedAt": captured_at if isinstance(captured_at, str) else format_timestamp(captured_at),
                "sourceEndpoint": source,
            }
        )
        return self

    def flag_consequential(self, reason: str) -> Self:
        """Mark this decision consequential (full capture) before it is finished."""
        self._open()
        self.consequential = True
        self.consequential_reason = reason
        return self

    def set_context_tokens(self, total: int) -> Self:
        self._open()
        self._total_context_tokens = total
        return self

    def finish(
        self,
        *,
        output: str | None,
        stop_reason: StopReason | None = "end_turn",
        reasoning: Sequence[str] | None = None,
        reasoning_token_count: int | None = None,
        outcome: OutcomeStatus = "unknown",
        outcome_reason: str | None = None,
        total_latency_ms: int | None = None,
        total_context_tokens: int | None = None,
    ) -> str:
        """Record the end of the decision and queue the capture; returns the decision id.

        Never blocks beyond the recorder's queue policy and never raises on delivery problems
        (they go to the recorder's ``on_error`` and ``stats``).
        """
        self._open()
        latency = total_latency_ms
        if latency is None:
            latency = int((time.perf_counter() - self._started) * 1000)
        self._final = {
            "reasoningTokens": None if reasoning is None else list(reasoning),
            "reasoningTokenCount": reasoning_token_count,
            "finalOutputText": output,
            "stopReason": stop_reason,
            "totalLatencyMs": latency,
        }
        if total_context_tokens is not None:
            self._total_context_tokens = total_context_tokens
        self._outcome = (outcome, outcome_reason)
        self._captured_at = format_timestamp(self._recorder.clock())
        self.finished = True
        self._recorder._submit_decision(self)
        return self.decision_id

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.finished:
            return
        if exc is None:
            self.finish(output=None, stop_reason=None)
        else:
            self.finish(
                output=None,
                stop_reason="error",
                outcome="failure",
                outcome_reason=f"{type(exc).__name__}: {exc}",
            )

    # --- the worker's side ---------------------------------------------------------------------
    def to_capture(self) -> dict[str, Any]:
        """The capture in JSON form, unsealed (hashes and signature null); ``captureLevel`` null
        means "let the policy decide". Called on the recorder's worker thread."""
        config = self._config or self._recorder.default_config
        if config is None:
            raise ContractError(
                "no model configuration: call configure() or Recorder.configure()", path="agentConfiguration"
            )
        rendered = self._rendered
        final = self._final
        user_id, session_id = self._origin
        return {
            "version": "replay/v1",
            "decisionId": self.decision_id,
            "agentId": self.agent_id,
            "runtimeId": self._recorder.runtime_id,
            "capturedAt": self._captured_at,
            "captureLevel": None,
            "consequential": {"flagged": self.consequential, "reason": self.consequential_reason},
            "outcome": {"status": self._outcome[0], "reason": self._outcome[1]},
            "input": {
                "originUserId": user_id,
                "originSessionId": session_id,
                "requestPayload": self._request,
                "requestPayloadHash": None,
            },
            "agentConfiguration": config.to_json(),
            "renderedContext": None
            if rendered is None
            else {
                "format": rendered["format"],
                "text": rendered["text"],
                "spans": [s.to_json() if isinstance(s, ContextSpan) else dict(s) for s in rendered["spans"]],
                "hash": None,
            },
            "memoryState": {
                "workingSetEntries": self._memory,
                "totalContextTokens": self._total_context_tokens,
                "contextSetHash": None,
                "contextSetAlgorithm": "rfc6962-sha256",
                "contextSetLeafCount": None,
            },
            "executionTrace": {
                "reasoningTokens": final.get("reasoningTokens"),
                "reasoningTokensHash": None,
                "reasoningTokenCount": final.get("reasoningTokenCount"),
                "toolCalls": self._tool_calls,
                "finalOutputText": final.get("finalOutputText"),
                "finalOutputHash": None,
                "stopReason": final.get("stopReason"),
                "totalLatencyMs": final.get("totalLatencyMs"),
            },
            "externalState": {"observableExternals": self._externals},
            "replayPolicy": self._replay_policy.to_json(),
            "signature": {"algorithm": "ed25519", "publicKeyRef": None, "signatureBytes": None},
        }

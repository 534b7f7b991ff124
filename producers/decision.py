"""Building one decision's capture on the runtime's thread: cheap, keyword-only, no I/O.

A :class:`DecisionBuilder` collects what the runtime saw and did (configuration, working set,
rendered context, tool calls, external reads, final output) as plain JSON-form values. It never
hashes, signs or encodes: :meth:`DecisionBuilder.finish` hands the builder to the recorder's
queue and the background worker turns it into a capture (:meth:`DecisionBuilder.to_capture`).

JSON values given to the builder (request payload, tool schema, tool inputs/outputs, external
values, sampling parameters) are snapshotted when given — dicts and lists are copied, strings and
numbers shared — so a runtime may reuse or mutate its objects afterwards (``snapshot=False`` on the
recorder skips the copy for runtimes that never mutate).

The decision a ``with recorder.decision(...) as d:`` block opened is the *current decision* of that
thread or asyncio task (:func:`current_decision`, a context variable: a task created inside the
block inherits it, another thread does not). Capture adapters (``producers/integrations/``) attach
the model calls they see to it with :meth:`DecisionBuilder.attach_model_call`; the worker turns them
into capture fields when the capture is built.

Nothing here raises into the agent for what it was given: a value that cannot be recorded as given
(circular, nested deeper than :data:`~producers.unrecordable.MAX_DEPTH`, not JSON, the wrong type)
is replaced as :mod:`producers.unrecordable` describes and named as a *problem* of the decision;
the capture is still made and says so. Only misuse of the builder's protocol raises
:class:`ContractError`: recording into a finished decision, ``render_context()`` before a system
prompt is configured.
"""

from __future__ import annotations

import marshal
import os
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar, Token
from datetime import datetime
from types import TracebackType
from typing import Any, Literal, Protocol, Self

from producers import unrecordable as check
from producers.clock import format_timestamp
from producers.config import AgentConfig, ReplayPolicy, agent_config, pin_config
from producers.context import CHAT_MESSAGES_FORMAT, ContextSpan, RenderedContext, render_chat_context
from schemas.errors import ContractError

__all__ = [
    "AgentConfig",
    "DecisionBuilder",
    "DecisionSink",
    "ModelCallAssembler",
    "ReplayPolicy",
    "current_decision",
    "new_decision_id",
    "pin_config",
]

OutcomeStatus = Literal["success", "failure", "unknown"]
StopReason = Literal["end_turn", "max_tokens", "tool_call", "error"]
_OUTCOMES: frozenset[str] = frozenset(("success", "failure", "unknown"))
_STOP_REASONS: frozenset[str] = frozenset(("end_turn", "max_tokens", "tool_call", "error"))


_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# Ids need uniqueness, not secrecy: a PRNG seeded from the OS (re-seeded in forked children) avoids
# os.urandom's syscall, which releases the GIL on the caller's thread and can cost a GIL wait.
_ids = random.Random(os.urandom(32))
os.register_at_fork(after_in_child=lambda: _ids.seed(os.urandom(32)))


# Each random byte keeps its low 5 bits as one Crockford character (256 is a multiple of 32, so every
# character is equally likely): 16 bytes make the 80 random bits of the id's last 16 characters.
_RANDOM_CHARACTERS = bytes(ord(_CROCKFORD[byte & 31]) for byte in range(256))
# The id's first 10 characters (its 48-bit millisecond time), for the last millisecond asked for.
_last_time: tuple[int, str] = (-1, "")


def new_decision_id(moment: datetime) -> str:
    """``dec_`` + a ULID: 48-bit ms timestamp + 80 random bits, Crockford base32 (sorts by time).

    Built from a cached time prefix and translated random bytes: a third of the cost of
    base32-encoding the 130-bit value digit by digit, on the agent's thread for every decision."""
    global _last_time
    ms = int(moment.timestamp() * 1000)
    last = _last_time
    if last[0] != ms:  # its low 50 bits (two's complement before 1970), 5 to a character
        last = _last_time = (ms, "".join([_CROCKFORD[(ms >> shift) & 31] for shift in range(45, -1, -5)]))
    return "dec_" + last[1] + _ids.randbytes(16).translate(_RANDOM_CHARACTERS).decode("ascii")


ModelCallAssembler = Callable[[dict[str, Any], Sequence[Any], list[str]], None]
"""Turns the model calls an adapter attached into capture fields, on the recorder's worker:
``assemble(capture, calls, problems)`` fills ``capture`` in place and appends what it could not
record to ``problems``; it must not raise (the builder treats a raise as one more problem)."""

_CURRENT: ContextVar[DecisionBuilder | None] = ContextVar("blackbox_current_decision", default=None)


def current_decision() -> DecisionBuilder | None:
    """The decision whose ``with`` block encloses the caller (this thread or asyncio task), if any."""
    return _CURRENT.get()


class DecisionSink(Protocol):
    """What a :class:`DecisionBuilder` needs from the recorder that started it (the
    :class:`~producers.recorder.Recorder`): its identity and defaults, read when the capture is
    built (so a later ``Recorder.configure`` still applies), its clock, and where a finished
    decision goes. The builder depends on this seam, never on the recorder itself."""

    @property
    def agent_id(self) -> str: ...
    @property
    def runtime_id(self) -> str | None: ...
    @property
    def default_config(self) -> AgentConfig | None: ...
    @property
    def replay_policy(self) -> ReplayPolicy: ...

    def _now(self, problems: list[str]) -> datetime:
        """The current time; a clock failure is appended to ``problems``, never raised."""
        ...

    def _submit_decision(self, builder: DecisionBuilder) -> None:
        """Queue a finished decision; never raises into the agent."""
        ...


class DecisionBuilder:
    """One decision being recorded. Use as a context manager, or call :meth:`finish` yourself.

    Leaving the ``with`` block without :meth:`finish` still records the decision: after an
    exception with outcome ``failure`` and stop reason ``error`` (the exception is not swallowed),
    otherwise with outcome ``unknown``. A builder is used by one thread; after :meth:`finish` it
    is frozen (further calls raise :class:`ContractError`).

    No method raises for the values it is given (see the module docstring); :attr:`problems` lists
    what could not be recorded as given, and the recorder reports it once the capture is made.
    """

    def __init__(
        self,
        recorder: DecisionSink,
        *,
        decision_id: Any,
        request: Any,
        origin_user_id: Any,
        origin_session_id: Any,
        consequential: Any,
        consequential_reason: Any,
        config: Any,
        replay_policy: Any,
        snapshot: bool,
        fidelity: Any = "sdk",
    ) -> None:
        self._recorder = recorder
        self._copies = snapshot
        self._problems: list[str] = []
        self._started = time.perf_counter()
        self.agent_id = recorder.agent_id
        self.finished = False
        problems = self._problems
        self.decision_id = check.text(decision_id, at="decisionId", problems=problems) or new_decision_id(
            self._now()
        )
        self._request = self._json(request, "input.requestPayload")
        self._origin = (
            check.text(origin_user_id, at="input.originUserId", problems=problems),
            check.text(origin_session_id, at="input.originSessionId", problems=problems),
        )
        self.consequential = _flag(consequential, "consequential.flagged", problems)
        self.consequential_reason = check.text(
            consequential_reason, at="consequential.reason", problems=problems
        )
        if config is not None and not isinstance(config, AgentConfig):
            problems.append(f"an AgentConfig expected, got {type(config).__name__}; the default was used")
            config = None
        self._config: AgentConfig | None = config
        if not isinstance(replay_policy, ReplayPolicy):
            problems.append(
                f"a ReplayPolicy expected, got {type(replay_policy).__name__}; the recorder's was used"
            )
            replay_policy = recorder.replay_policy
        self._replay_policy: ReplayPolicy = replay_policy
        if fidelity not in ("sdk", "semantic"):
            problems.append(f"fidelity {fidelity!r} is not 'sdk' or 'semantic'; 'sdk' was used")
            fidelity = "sdk"
        self._fidelity: str = fidelity
        self._memory: list[dict[str, Any]] = []
        self._rendered: dict[str, Any] | None = None
        self._tool_calls: list[dict[str, Any]] = []
        self._externals: list[dict[str, Any]] = []
        self._total_context_tokens: int | None = None
        self._final: dict[str, Any] = {}
        self._outcome: tuple[str, str | None] = ("unknown", None)
        self._captured_at = ""
        self._model_calls: list[Any] = []
        self._assemble: ModelCallAssembler | None = None
        self._model_lock = threading.Lock()  # calls arrive from the agent's tasks and threads
        self._scope: Token[DecisionBuilder | None] | None = None
        self._packed: bytes | None = None  # see _pack()

    @property
    def recorder(self) -> DecisionSink:
        """The recorder this decision goes to."""
        return self._recorder

    # --- recording ---------------------------------------------------------------------------
    def _open(self) -> None:
        if self.finished:
            raise ContractError("decision already finished", path=self.decision_id)

    def _json(self, value: Any, path: str) -> Any:
        return check.snapshot(value, path=path, problems=self._problems) if self._copies else value

    def _now(self) -> datetime:
        return self._recorder._now(self._problems)

    def _failed(self, method: str, exc: Exception) -> None:
        """A last line of defence: a step that raised anyway is a problem, never the agent's."""
        self._problems.append(f"{method}() could not be recorded: {type(exc).__name__}: {exc}")

    @property
    def problems(self) -> tuple[str, ...]:
        """What could not be recorded as given in this decision; reported once its capture is made."""
        if self._config is None and self._recorder.default_config is None and not self._model_calls:
            return (*self._problems, _NO_CONFIGURATION)  # model calls bring their own configuration
        return tuple(self._problems)

    @property
    def inherited_problems(self) -> tuple[str, ...]:
        """What the recorder's default configuration could not record: reported by
        :meth:`Recorder.configure`, named again in every capture that uses it."""
        config = self._config or self._recorder.default_config
        return () if config is None or config is self._config else config.unrecordable

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
        try:
            given = {
                "model": model,
                "model_version": model_version,
                "endpoint": endpoint,
                "system_prompt": system_prompt,
                "system_prompt_version": system_prompt_version,
                "tool_schema": tool_schema,
                "tool_schema_version": tool_schema_version,
                "sampling": sampling,
            }
            self._config = agent_config(given, snapshot=self._copies, problems=self._problems)
        except Exception as exc:
            self._failed("configure", exc)
        return self

    def use_config(self, config: AgentConfig) -> Self:
        """Use a prepared :class:`AgentConfig` (shared, already snapshotted) for this decision."""
        self._open()
        if isinstance(config, AgentConfig):
            self._config = config
        else:
            self._problems.append(f"use_config(): an AgentConfig expected, got {type(config).__name__}")
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
        try:
            at = f"memoryState.workingSetEntries[{len(self._memory)}]"
            problems = self._problems
            prov: Mapping[str, Any] = {}
            if isinstance(provenance, Mapping):
                prov = provenance
            elif provenance is not None:
                problems.append(f"a mapping expected, got {type(provenance).__name__}, at {at}.provenance")
            given_position = check.count(position, at=at, field="contextPosition", problems=problems)
            self._memory.append(
                {
                    "entryId": check.required_text(entry_id, at=at, field="entryId", problems=problems),
                    "tier": check.required_text(tier, at=at, field="tier", problems=problems),
                    "provenance": {
                        key: check.text(prov.get(key), at=at, field=f"provenance.{key}", problems=problems)
                        for key in ("writerId", "writtenAt", "sourceType")
                    },
                    "renderedContent": check.text(
                        content, at=at, field="renderedContent", problems=problems, part=True
                    ),
                    "contextPosition": len(self._memory) if given_position is None else given_position,
                    "retrievalScore": check.number(score, at=at, field="retrievalScore", problems=problems),
                    "retrievalMethod": check.text(method, at=at, field="retrievalMethod", problems=problems),
                    "embeddingModel": check.text(
                        embedding_model, at=at, field="embeddingModel", problems=problems
                    ),
                    "embeddingVersion": check.text(
                        embedding_version, at=at, field="embeddingVersion", problems=problems
                    ),
                    "renderedContentHash": None,
                }
            )
        except Exception as exc:
            self._failed("add_memory", exc)
        return self

    def render_context(self, *, user_message: str) -> RenderedContext:
        """Render ``[system prompt, working set, user message]`` as chat messages and record it.

        Returns the :class:`RenderedContext`; send ``.text`` (or ``.messages()``) to the model so
        the capture holds exactly what the model received. A user message that is not text is
        rendered as empty (and named as a problem).
        """
        self._open()
        config = self._config or self._recorder.default_config
        if config is None or config.system_prompt is None:
            raise ContractError(
                "configure(system_prompt=...) before render_context()", path="renderedContext"
            )
        try:
            message = check.text(user_message, at="renderedContext(user)", problems=self._problems)
            memory = sorted(self._memory, key=lambda e: e["contextPosition"])
            rendered = render_chat_context(
                system_prompt=config.system_prompt,
                memory=[(e["entryId"], e["renderedContent"] or "") for e in memory],
                user_message=message or "",
            )
        except Exception as exc:
            self._failed("render_context", exc)
            rendered = RenderedContext(format=CHAT_MESSAGES_FORMAT, text="", spans=())
        self._rendered = {"format": rendered.format, "text": rendered.text, "spans": rendered.spans}
        return rendered

    def set_request(self, payload: Any) -> Self:
        """The inbound request (``input.requestPayload``), for an adapter that only knows it once
        the decision has started (a callback handler that sees the run unfold)."""
        self._open()
        try:
            self._request = self._json(payload, "input.requestPayload")
        except Exception as exc:
            self._failed("set_request", exc)
        return self

    def set_rendered_context(
        self,
        text: str,
        spans: Sequence[ContextSpan | Mapping[str, Any]] = (),
        *,
        format: str = CHAT_MESSAGES_FORMAT,
    ) -> Self:
        """Record a context the runtime rendered itself: the exact text and its part spans."""
        self._open()
        try:
            problems = self._problems
            checked_format = check.text(format, at="renderedContext.format", problems=problems)
            self._rendered = {
                "format": checked_format or CHAT_MESSAGES_FORMAT,
                "text": check.text(text, at="renderedContext.text", problems=problems, part=True),
                "spans": _spans(spans, problems),
            }
        except Exception as exc:
            self._failed("set_rendered_context", exc)
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
        at = f"executionTrace.toolCalls[{len(self._tool_calls)}]"
        seq = len(self._tool_calls) + 1
        try:
            problems = self._problems
            seq = check.count(sequence, at=at, field="sequence", problems=problems) or seq
            latency: Any = latency_ms
            if isinstance(latency, float) and latency.is_integer():
                latency = int(latency)  # the old int(latency_ms) accepted whole floats
            self._tool_calls.append(
                {
                    "sequence": seq,
                    "toolName": check.required_text(name, at=at, field="toolName", problems=problems),
                    "input": self._json(input, f"{at}.input"),
                    "inputHash": None,
                    "output": self._json(output, f"{at}.output"),
                    "outputHash": None,
                    "latencyMs": check.count(latency, at=at, field="latencyMs", problems=problems),
                    "errorRef": check.text(error_ref, at=at, field="errorRef", problems=problems),
                }
            )
        except Exception as exc:
            self._failed("add_tool_call", exc)
        return seq

    def observe_external(
        self, *, key: str, value: Any, source: str | None = None, captured_at: datetime | str | None = None
    ) -> Self:
        """An external value the decision read (balance, inventory, ...), as of ``captured_at`` (now)."""
        self._open()
        try:
            at = f"externalState.observableExternals[{len(self._externals)}]"
            problems = self._problems
            when: str | None
            if isinstance(captured_at, str):
                when = check.text(captured_at, at=at, field="capturedAt", problems=problems)
            else:
                moment = captured_at
                if moment is None or not _aware(moment):
                    if moment is not None:
                        problems.append(
                            f"a timezone-aware datetime or a string expected, got {captured_at!r}, "
                            f"at {at}.capturedAt; the capture time was used"
                        )
                    moment = self._now()
                when = format_timestamp(moment)
            self._externals.append(
                {
                    "key": check.required_text(key, at=at, field="key", problems=problems),
                    "capturedValue": self._json(value, f"{at}.capturedValue"),
                    "capturedValueHash": None,
                    "capturedAt": when,
                    "sourceEndpoint": check.text(source, at=at, field="sourceEndpoint", problems=problems),
                }
            )
        except Exception as exc:
            self._failed("observe_external", exc)
        return self

    def attach_model_call(self, call: Any, assemble: ModelCallAssembler) -> bool:
        """Attach one model call seen by a capture adapter (kept as given, e.g. an HTTP exchange);
        ``assemble`` turns the attached calls into capture fields on the worker. False when the
        decision is already finished (the caller records the call elsewhere). Never raises."""
        with self._model_lock:
            if self.finished:
                return False
            self._model_calls.append(call)
            self._assemble = assemble
            return True

    def flag_consequential(self, reason: str) -> Self:
        """Mark this decision consequential (full capture) before it is finished."""
        self._open()
        self.consequential = True
        self.consequential_reason = check.text(reason, at="consequential.reason", problems=self._problems)
        return self

    def set_context_tokens(self, total: int) -> Self:
        self._open()
        self._total_context_tokens = check.count(
            total, at="memoryState.totalContextTokens", problems=self._problems
        )
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
        captured_at: datetime | None = None,
    ) -> str:
        """Record the end of the decision and queue the capture; returns the decision id.

        ``captured_at`` (default: now) lets an adapter that rebuilds a decision from spans date it by
        the spans, so the same spans always give the same capture (idempotent at ingest).

        Never blocks beyond the recorder's queue policy and never raises for what it is given or
        on delivery problems (they go to the recorder's ``on_error`` and ``stats``).
        """
        self._open()
        with self._model_lock:  # a model call arriving now goes elsewhere, never half-recorded
            self.finished = True
        try:
            self._finish(
                output=output,
                stop_reason=stop_reason,
                reasoning=reasoning,
                reasoning_token_count=reasoning_token_count,
                outcome=outcome,
                outcome_reason=outcome_reason,
                total_latency_ms=total_latency_ms,
                total_context_tokens=total_context_tokens,
            )
        except Exception as exc:
            self._failed("finish", exc)
        if _aware(captured_at):
            try:
                self._captured_at = format_timestamp(captured_at)  # type: ignore[arg-type]
            except Exception as exc:
                self._failed("finish", exc)
        elif captured_at is not None:
            self._problems.append(f"a timezone-aware datetime expected, got {captured_at!r}, at capturedAt")
        if not self._captured_at:
            self._captured_at = format_timestamp(self._now())
        self.finished = True
        self._recorder._submit_decision(self)
        return self.decision_id

    def _finish(
        self,
        *,
        output: Any,
        stop_reason: Any,
        reasoning: Any,
        reasoning_token_count: Any,
        outcome: Any,
        outcome_reason: Any,
        total_latency_ms: Any,
        total_context_tokens: Any,
    ) -> None:
        problems = self._problems
        at = "executionTrace"
        latency = check.count(total_latency_ms, at=at, field="totalLatencyMs", problems=problems)
        if latency is None:
            latency = int((time.perf_counter() - self._started) * 1000)
        if stop_reason is not None and not (type(stop_reason) is str and stop_reason in _STOP_REASONS):
            problems.append(
                f"one of {sorted(_STOP_REASONS)} expected, got {stop_reason!r}, at {at}.stopReason; "
                "recorded as null"
            )
            stop_reason = None
        tokens: list[Any] | None = None
        if reasoning is not None:
            try:
                tokens = list(reasoning)
            except Exception as exc:
                problems.append(f"a sequence of text expected ({type(exc).__name__}) at {at}.reasoningTokens")
        self._final = {
            "reasoningTokens": tokens,
            "reasoningTokenCount": check.count(
                reasoning_token_count, at=at, field="reasoningTokenCount", problems=problems
            ),
            "finalOutputText": check.text(
                output, at=at, field="finalOutputText", problems=problems, part=True
            ),
            "stopReason": stop_reason,
            "totalLatencyMs": latency,
        }
        if total_context_tokens is not None:
            self._total_context_tokens = check.count(
                total_context_tokens, at="memoryState.totalContextTokens", problems=problems
            )
        if not (type(outcome) is str and outcome in _OUTCOMES):
            problems.append(
                f"one of {sorted(_OUTCOMES)} expected, got {outcome!r}, at outcome.status; recorded as 'unknown'"
            )
            outcome = "unknown"
        self._outcome = (outcome, check.text(outcome_reason, at="outcome.reason", problems=problems))
        self._captured_at = format_timestamp(self._now())

    def __enter__(self) -> Self:
        self._scope = _CURRENT.set(self)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        scope, self._scope = self._scope, None
        if scope is not None:
            try:
                _CURRENT.reset(scope)
            except ValueError:  # left in another context than entered (a generator moved): clear ours
                if _CURRENT.get() is self:
                    _CURRENT.set(None)
        if self.finished:
            return
        if exc is None:
            self.finish(output=None, stop_reason=None)
            return
        try:
            reason = f"{type(exc).__name__}: {exc}"
        except Exception:  # an exception whose str() fails must not replace the agent's own
            reason = type(exc).__name__
        self.finish(output=None, stop_reason="error", outcome="failure", outcome_reason=reason)

    # --- waiting in the recorder's backlog ------------------------------------------------------
    def _pack(self) -> bool:
        """Fold the recorded values into one ``bytes`` while the finished decision waits in a deep
        backlog; :meth:`to_capture` unfolds them. True when packed. Only the recorder calls it, before it
        queues the decision: never while the worker may be building the capture.

        A queued decision otherwise holds ~27 objects the cyclic GC tracks (dicts, lists, spans).
        Thousands of them waiting survive into the oldest generation, and each full collection walks
        them all, on whichever thread allocates: the agent's (measured in ``bench_producer.py``: at
        a full 10,000-deep backlog ~200 ms per collection and ~50 µs per decision). Packed, a queued
        decision holds five. :mod:`marshal` copies exactly the built-in types it writes (a ``str``
        subclass, an object, nesting beyond its limit: it refuses, and the decision stays as it
        is), in C without calling back into Python, and gives back equal values of the same types,
        the same order and the same sharing: the capture is the one an unpacked decision makes."""
        if self._packed is not None or not self.finished:
            return False
        rendered = self._rendered
        if rendered is not None:  # spans as their JSON records, which to_capture takes as they are
            spans = [s.to_json() if isinstance(s, ContextSpan) else s for s in rendered["spans"]]
            rendered = {**rendered, "spans": spans}
        try:
            packed = marshal.dumps(
                (self._request, self._memory, self._tool_calls, self._externals, self._final, rendered)
            )
        except Exception:  # ValueError: not marshal's to write; the decision waits unpacked
            return False
        self._packed = packed
        self._request = self._memory = self._tool_calls = self._externals = self._final = None  # type: ignore[assignment]
        self._rendered = None
        return True

    def _unpack(self, packed: bytes) -> None:
        self._packed = None
        (
            self._request,
            self._memory,
            self._tool_calls,
            self._externals,
            self._final,
            self._rendered,
        ) = marshal.loads(packed)

    # --- the worker's side ---------------------------------------------------------------------
    def to_capture(self) -> dict[str, Any]:
        """The capture in JSON form, unsealed (hashes and signature null); ``captureLevel`` null
        means "let the policy decide". Called on the recorder's worker thread."""
        if self._packed is not None:
            self._unpack(self._packed)
        config = self._config or self._recorder.default_config or _UNCONFIGURED
        rendered = self._rendered
        final = self._final
        user_id, session_id = self._origin
        capture = self._capture(config, rendered, final, user_id, session_id)
        if self._model_calls and self._assemble is not None:
            try:
                self._assemble(capture, tuple(self._model_calls), self._problems)
            except Exception as exc:  # the assembler's own last line of defence failed
                self._failed("model calls", exc)
        return capture

    def _capture(
        self,
        config: AgentConfig,
        rendered: dict[str, Any] | None,
        final: dict[str, Any],
        user_id: str | None,
        session_id: str | None,
    ) -> dict[str, Any]:
        return {
            "version": "replay/v1",
            "decisionId": self.decision_id,
            "agentId": self.agent_id,
            "runtimeId": self._recorder.runtime_id,
            "capturedAt": self._captured_at,
            "captureLevel": None,
            # "sdk" is the schema's default and stays implicit; an adapter that rebuilds a decision
            # from spans or callbacks says "semantic" (a wire adapter sets "wire" when it assembles)
            **({"fidelity": self._fidelity} if self._fidelity != "sdk" else {}),
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


_NO_CONFIGURATION = (
    "no model configuration (call configure() or Recorder.configure()) at agentConfiguration; "
    f"modelIdentifier recorded as {check.MARKER!r}"
)
_UNCONFIGURED = AgentConfig(model=check.MARKER)


def _flag(value: Any, path: str, problems: list[str]) -> bool:
    if type(value) is bool:
        return value
    try:
        return bool(value)
    except Exception as exc:
        problems.append(f"a bool expected ({type(exc).__name__}: {exc}) at {path}; recorded as True")
        return True  # when in doubt, capture in full


def _aware(moment: Any) -> bool:
    return isinstance(moment, datetime) and moment.utcoffset() is not None


def _spans(spans: Any, problems: list[str]) -> tuple[dict[str, Any], ...]:
    """The runtime's spans as JSON records; a span that is not one is dropped (a problem)."""
    try:
        given = [] if spans is None else list(spans)
    except Exception as exc:
        problems.append(f"a sequence of spans expected ({type(exc).__name__}) at renderedContext.spans")
        return ()
    out: list[dict[str, Any]] = []
    for index, span in enumerate(given):
        at = f"renderedContext.spans[{index}]"
        found: list[str] = []
        if isinstance(span, ContextSpan):
            out.append(span.to_json())
            continue
        if not isinstance(span, Mapping):
            problems.append(f"a ContextSpan or mapping expected, got {type(span).__name__}, at {at}; dropped")
            continue
        checked = {
            "part": check.text(span.get("part"), at=at, field="part", problems=found),
            "start": check.count(span.get("start"), at=at, field="start", problems=found),
            "end": check.count(span.get("end"), at=at, field="end", problems=found),
            "encoding": check.text(
                span.get("encoding", "json-string"), at=at, field="encoding", problems=found
            ),
        }
        if found or None in checked.values():
            problems.append(f"an incomplete span at {at} dropped" + (f" ({found[0]})" if found else ""))
            continue
        out.append(checked)
    return tuple(out)

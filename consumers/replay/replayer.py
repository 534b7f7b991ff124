"""The Replayer: load → access gate → verify → rebuild the exact request → run in the sandbox.

Three entry points, as in Temporal's replayer: :meth:`Replayer.replay` (one decision, raises on
failure), :meth:`Replayer.replay_many` (results keyed by decision id) and
:meth:`Replayer.replay_iterator` (results as they come). Results are frozen
:class:`ReplayResult` values carrying ``replay_failure: Exception | None``; a divergence is a
:class:`ReplayDivergence` there, never a live call.

:meth:`prepare` does the expensive, audited part once (one access-log row per read); :meth:`run`
then replays the prepared capture as captured or under a variation as often as needed.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from consumers.access import AccessGate, Caller, denial, raise_if_denied
from consumers.replay.agent_hook import DEFAULT_MAX_MODEL_CALLS, AgentFunction, AgentRun, run_agent
from consumers.replay.clients import ModelClient
from consumers.replay.loop import tool_calling_loop
from consumers.replay.memory_variation import memory_items
from consumers.replay.outcome import Comparison, Outcome, compare
from consumers.replay.request import HashCheck, rebuild_request
from consumers.replay.sandbox import LiveTools, Sandbox, ToolBackend, ToolCall, externals_of
from consumers.replay.source import CaptureSource
from consumers.replay.variation import InvalidVariation, ReplayInputs, Variation, apply_all
from consumers.replay.verification import Verifier
from consumers.replay.wire_client import WireClient
from consumers.replay.wire_loop import run_wire
from consumers.replay.wire_request import WireInputs, is_wire, rebuild_wire
from consumers.replay.wire_variation import apply_all_wire
from schemas.errors import (
    BlackboxError,
    CaptureNotReplayable,
    ModelNotFound,
    ReplayDivergence,
    VerificationError,
)

if TYPE_CHECKING:
    from producers.privacy.keys import Vault

PREPARE_BATCH = 64

View = Literal["original", "redacted"]
"""Which view of the content a replay used: ``redacted`` (personal data as placeholders, the default
for a redacted capture) or ``original`` (revealed under a personal-data grant, or nothing was redacted)."""


class UnverifiedCapture(VerificationError):
    """No verifier was configured, so the capture's signature and hashes were not checked."""


class RevealRefused(BlackboxError):
    """The original of a redacted capture is not revealed for this replay (it does not verify, or no
    vault is configured)."""


class NoVariation(InvalidVariation):
    """A variation whose value equals the captured one: replaying it would test nothing."""


@dataclass(frozen=True, slots=True)
class PreparedCapture:
    """A capture that passed the gate, its verification status and its as-captured request.

    ``inputs`` is the rebuilt request (sdk and semantic captures) or the recorded model calls (wire
    captures, sent as recorded)."""

    capture: Mapping[str, Any]
    inputs: ReplayInputs | WireInputs
    checks: tuple[HashCheck, ...]
    verified: bool
    verification_note: str | None
    key_id: str | None
    original: Outcome
    live: LiveTools | None = None
    model_endpoint: str | None = None
    view: View = "original"
    """``redacted`` when personal data was redacted and not revealed (see :data:`View`)."""

    @property
    def decision_id(self) -> str:
        return str(self.capture.get("decisionId"))

    @property
    def captured_endpoint(self) -> str | None:
        """The endpoint the capture names: shown in reports, dialled only if the operator allows it."""
        value = (self.capture.get("agentConfiguration") or {}).get("modelProviderEndpoint")
        return None if value is None else str(value)

    @property
    def agent_id(self) -> str:
        return str(self.capture.get("agentId") or "")

    @property
    def captured_model(self) -> str:
        config = self.capture.get("agentConfiguration") or {}
        version = config.get("modelVersion")
        return f"{config.get('modelIdentifier')}" + (f" ({version})" if version else "")


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """One replay of one decision; ``replay_failure`` is None when it ran to the model's final answer."""

    decision_id: str
    agent_id: str = ""
    variations: tuple[Variation, ...] = ()
    verified: bool = False
    verification_note: str | None = None
    request_checks: tuple[HashCheck, ...] = ()
    model: str = ""
    substitute_caveat: str | None = None
    live: bool = False
    final_output: str | None = None
    stop_reason: str = "error"
    tool_calls: tuple[ToolCall, ...] = ()
    model_calls: int = 0
    external_reads: tuple[str, ...] = ()
    duration_ms: float = 0.0
    original: Outcome | None = None
    replay_failure: Exception | None = None

    @property
    def outcome(self) -> Outcome:
        return Outcome(
            tool_calls=tuple((c.tool_name, c.input_hash) for c in self.tool_calls),
            final_output=self.final_output,
            stop_reason=self.stop_reason,
        )

    @property
    def divergence(self) -> ReplayDivergence | None:
        return self.replay_failure if isinstance(self.replay_failure, ReplayDivergence) else None

    @property
    def reached_model(self) -> bool:
        """True when the run happened (it may still have diverged); False for refused captures."""
        return self.model_calls > 0

    def compared_to_original(self) -> Comparison | None:
        return None if self.original is None else compare(self.original, self.outcome)


@dataclass(frozen=True, slots=True)
class ReplayResults:
    """Results of many replays, keyed by decision id."""

    results: Mapping[str, ReplayResult] = field(default_factory=dict)

    @property
    def replay_failures(self) -> dict[str, Exception]:
        return {k: r.replay_failure for k, r in self.results.items() if r.replay_failure is not None}


class Replayer:
    """Replays captured decisions in the sandbox. Construct with keywords only.

    ``verifier`` None means nothing is verified: every capture is then refused unless
    ``allow_unverified``, and replays are marked unverified. ``substitute_model`` is used only
    when the endpoint reports the captured model as unavailable, and the result says so.
    ``live_tools`` (with ``live_reason``) turns on authorized live mode: every tool call goes to
    the backend, after the gate has logged the operator's reason for each decision.
    ``wire_client`` sends wire captures' recorded bytes (default: ``client.wire`` when the client
    has one, as :class:`~consumers.replay.clients.OpenAICompatibleClient` does).
    ``reveal`` (with ``vault``) replays a redacted capture on its original: only after it verified and
    the gate logged an allowed ``reveal`` for the caller (a personal-data grant); each original part is
    checked against its signed hash. Without it a redacted capture replays on the redacted view.
    """

    def __init__(
        self,
        *,
        source: CaptureSource,
        client: ModelClient,
        gate: AccessGate,
        caller: Caller,
        verifier: Verifier | None,
        allow_unverified: bool = False,
        substitute_model: str | None = None,
        agent: AgentFunction = tool_calling_loop,
        max_model_calls: int = DEFAULT_MAX_MODEL_CALLS,
        live_tools: ToolBackend | None = None,
        live_reason: str | None = None,
        wire_client: WireClient | None = None,
        reveal: bool = False,
        vault: Vault | None = None,
    ) -> None:
        if live_tools is not None and not (live_reason or "").strip():
            raise ValueError("live tools need an explicit authorization reason")
        self._source = source
        self._client = client
        self._wire_client = wire_client if wire_client is not None else getattr(client, "wire", None)
        self._gate = gate
        self._caller = caller
        self._verifier = verifier
        self._allow_unverified = allow_unverified
        self._substitute = substitute_model
        self._agent = agent
        self._max_model_calls = max_model_calls
        self._live_backend = live_tools
        self._live_reason = live_reason or ""
        self._reveal = reveal
        self._vault = vault

    # -- the three entry points -------------------------------------------------------------
    def replay(
        self,
        decision_id: str,
        *,
        variation: Variation | None = None,
        raise_on_replay_failure: bool = True,
    ) -> ReplayResult:
        """Replay one decision; refusals always raise, run failures raise unless told otherwise."""
        result = self.run(self.prepare(decision_id), variation=variation)
        if raise_on_replay_failure and result.replay_failure is not None:
            raise result.replay_failure
        return result

    def replay_many(
        self, decision_ids: Iterable[str], *, variation: Variation | None = None
    ) -> ReplayResults:
        """Replay every decision; failures (refusals included) are kept per id, never raised."""
        return ReplayResults(
            results={r.decision_id: r for r in self.replay_iterator(decision_ids, variation=variation)}
        )

    def replay_iterator(
        self, decision_ids: Iterable[str], *, variation: Variation | None = None
    ) -> Iterator[ReplayResult]:
        """Replay decisions one after another, yielding each result as soon as it exists."""
        for prepared in self.prepare_many(decision_ids):
            if isinstance(prepared, ReplayResult):
                yield prepared
            else:
                yield self.run(prepared, variation=variation)

    # -- the two halves -----------------------------------------------------------------------
    def prepare(self, decision_id: str, *, capture: Mapping[str, Any] | None = None) -> PreparedCapture:
        """Load (unless given), pass the gate, verify and rebuild; raise on any refusal."""
        loaded = capture if capture is not None else self._source.load(decision_id)
        raise_if_denied(self._gate.authorize_many(self._caller, [loaded], action="replay")[0])
        return self._check(loaded)

    def read(self, decision_id: str) -> Mapping[str, Any]:
        """Load, pass the gate and verify one capture, without rebuilding it (to read a value out of
        it, e.g. the prompt text of a version); raise on any refusal."""
        loaded = self._source.load(decision_id)
        raise_if_denied(self._gate.authorize_many(self._caller, [loaded], action="replay")[0])
        self._verify(loaded)
        return loaded

    def prepare_many(self, decision_ids: Iterable[str]) -> Iterator[PreparedCapture | ReplayResult]:
        """Prepare in batches (one access-log write per batch); refusals come back as failed results."""
        batch: list[str] = []
        for decision_id in decision_ids:
            batch.append(decision_id)
            if len(batch) >= PREPARE_BATCH:
                yield from self._prepare_batch(batch)
                batch = []
        if batch:
            yield from self._prepare_batch(batch)

    def run(
        self,
        prepared: PreparedCapture,
        *,
        variation: Variation | None = None,
        configuration: Sequence[Variation] = (),
    ) -> ReplayResult:
        """Replay a prepared capture as captured, with one ``variation``, or with a ``configuration``."""
        if variation is not None and configuration:
            raise ValueError("give one variation or a configuration, not both")
        variations = (variation,) if variation is not None else tuple(configuration)
        inputs = _apply(prepared.inputs, variations) if variations else prepared.inputs
        started = time.perf_counter()
        run = self._run_once(prepared, inputs, as_captured=not variations)
        model, caveat = _model(inputs), None
        if (
            isinstance(run.error, ModelNotFound)
            and self._substitute
            and _model(inputs) == _model(prepared.inputs)
        ):
            caveat = (
                f"the captured model {prepared.captured_model} is not available "
                f"({run.error}); replayed against the substitute {self._substitute}: this is not "
                "a faithful replay of the original model"
            )
            model = self._substitute
            substitute = Variation("model", model)
            if isinstance(inputs, WireInputs):
                inputs = apply_all_wire(inputs, [substitute])
            else:
                inputs = ReplayInputs(
                    request=inputs.request.with_changes(model=model),
                    rendered=inputs.rendered,
                    externals=inputs.externals,
                )
            run = self._run_once(prepared, inputs, as_captured=False)
        return ReplayResult(
            decision_id=prepared.decision_id,
            agent_id=prepared.agent_id,
            variations=variations,
            verified=prepared.verified,
            verification_note=prepared.verification_note,
            request_checks=prepared.checks,
            model=model,
            substitute_caveat=caveat,
            live=prepared.live is not None,
            final_output=run.final_output,
            stop_reason=run.stop_reason,
            tool_calls=run.tool_calls,
            model_calls=run.model_calls,
            external_reads=run.external_reads,
            duration_ms=(time.perf_counter() - started) * 1000.0,
            original=prepared.original,
            replay_failure=run.divergence or run.error,
        )

    # -- internals ------------------------------------------------------------------------------
    def _run_once(
        self, prepared: PreparedCapture, inputs: ReplayInputs | WireInputs, *, as_captured: bool
    ) -> AgentRun:
        trace = prepared.capture.get("executionTrace") or {}
        sandbox = Sandbox(
            recorded_calls=trace.get("toolCalls") or (), externals=inputs.externals, live=prepared.live
        )
        if isinstance(inputs, WireInputs):
            return run_wire(
                client=self._require_wire(),
                inputs=inputs,
                sandbox=sandbox,
                max_model_calls=self._max_model_calls,
                as_captured=as_captured,
            )
        return run_agent(
            self._agent,
            client=self._client,
            request=inputs.request,
            sandbox=sandbox,
            request_payload=(prepared.capture.get("input") or {}).get("requestPayload"),
            decision_id=prepared.decision_id,
            max_model_calls=self._max_model_calls,
        )

    def _require_wire(self) -> WireClient:
        if self._wire_client is None:
            raise CaptureNotReplayable(
                "a wire capture replays by sending its recorded bytes to an HTTP endpoint "
                "(--model-endpoint); this model client cannot send them"
            )
        return self._wire_client

    def _prepare_batch(self, decision_ids: Sequence[str]) -> Iterator[PreparedCapture | ReplayResult]:
        loaded: list[tuple[str, Mapping[str, Any]]] = []
        failed: dict[str, ReplayResult] = {}
        for decision_id in decision_ids:
            try:
                loaded.append((decision_id, self._source.load(decision_id)))
            except BlackboxError as exc:
                failed[decision_id] = ReplayResult(decision_id=decision_id, replay_failure=exc)
        try:
            records = self._gate.authorize_many(self._caller, [c for _, c in loaded], action="replay")
        except BlackboxError as exc:  # the log is down: every read in the batch is refused
            failed.update({d: _refused(d, c, exc) for d, c in loaded})
            loaded, records = [], []
        allowed: dict[str, Mapping[str, Any]] = {}
        for (decision_id, capture), record in zip(loaded, records, strict=True):
            if record.outcome == "denied":
                failed[decision_id] = _refused(decision_id, capture, denial(record))
            else:
                allowed[decision_id] = capture
        for decision_id in decision_ids:
            if decision_id in failed:
                yield failed[decision_id]
                continue
            try:
                yield self._check(allowed[decision_id])
            except BlackboxError as exc:
                yield _refused(decision_id, allowed[decision_id], exc)

    def _check(self, capture: Mapping[str, Any]) -> PreparedCapture:
        verified, note, key_id = self._verify(capture)
        capture, view = self._view(capture, verified=verified)
        if is_wire(capture):
            return self._check_wire(capture, verified=verified, note=note, key_id=key_id, view=view)
        rebuilt = rebuild_request(capture)
        if rebuilt.mismatches:
            if not self._allow_unverified:
                rebuilt.require_exact()
            verified = False
            parts = ", ".join(c.part for c in rebuilt.mismatches)
            note = "; ".join(p for p in (note, f"rebuilt request differs from the capture in {parts}") if p)
        # Before any live authorization or model call: refuse a capture whose endpoint the
        # operator did not configure (EndpointNotAllowed), so nothing is ever dialled for it.
        destination = self._client.destination(rebuilt.request)
        live = None
        if self._live_backend is not None:
            authorization = self._gate.authorize_live(self._caller, capture, reason=self._live_reason)
            live = LiveTools(self._live_backend, authorization=authorization)
        return PreparedCapture(
            capture=capture,
            inputs=ReplayInputs(
                request=rebuilt.request,
                rendered=rebuilt.rendered,
                externals=externals_of(capture),
                memory=memory_items(capture, rebuilt.rendered),
            ),
            checks=rebuilt.checks,
            verified=verified,
            verification_note=note,
            key_id=key_id,
            original=Outcome.from_capture(capture),
            live=live,
            model_endpoint=destination,
            view=view,
        )

    def _view(self, capture: Mapping[str, Any], *, verified: bool) -> tuple[Mapping[str, Any], View]:
        """The capture to replay and which view it is: the original only when revealed (see the class)."""
        if not isinstance(capture.get("privacy"), dict):
            return capture, "original"  # nothing was redacted: the capture is its original
        if not self._reveal:
            return capture, "redacted"
        from consumers.privacy.reveal import authorize_reveal, reveal

        decision_id = capture.get("decisionId")
        if not verified:  # the original hashes are only as good as the signature over them
            raise RevealRefused(f"{decision_id} is not revealed: the stored capture does not verify")
        if self._vault is None:
            raise RevealRefused(f"{decision_id} is not revealed: no key vault is configured")
        authorize_reveal(self._gate, self._caller, capture)  # logged; raises AccessDenied if refused
        return reveal(capture, vault=self._vault).capture, "original"

    def _check_wire(
        self,
        capture: Mapping[str, Any],
        *,
        verified: bool,
        note: str | None,
        key_id: str | None,
        view: View = "original",
    ) -> PreparedCapture:
        """``_check`` for a wire capture: its recorded bodies, each hash-checked before any is sent."""
        if self._live_backend is not None:
            raise CaptureNotReplayable(
                "live tools cannot replay a wire capture: its later requests carry the recorded tool "
                "results, byte for byte"
            )
        rebuilt = rebuild_wire(capture, externals=externals_of(capture))
        if rebuilt.mismatches:
            if not self._allow_unverified:
                rebuilt.require_exact()
            verified = False
            parts = ", ".join(c.part for c in rebuilt.mismatches)
            note = "; ".join(
                p for p in (note, f"recorded request bodies differ from their hashes in {parts}") if p
            )
        destination = self._require_wire().destination(rebuilt.inputs.captured_endpoint)
        return PreparedCapture(
            capture=capture,
            inputs=rebuilt.inputs,
            checks=rebuilt.checks,
            verified=verified,
            verification_note=note,
            key_id=key_id,
            original=Outcome.from_capture(capture),
            model_endpoint=destination,
            view=view,
        )

    def _verify(self, capture: Mapping[str, Any]) -> tuple[bool, str | None, str | None]:
        try:
            if self._verifier is None:
                raise UnverifiedCapture(
                    "no trust store configured: the capture was not verified", part="signature"
                )
            return True, None, self._verifier.verify(capture)
        except VerificationError as exc:
            if not self._allow_unverified:
                raise
            return False, f"UNVERIFIED ({type(exc).__name__}: {exc})", None


def _apply(inputs: ReplayInputs | WireInputs, variations: Sequence[Variation]) -> ReplayInputs | WireInputs:
    if isinstance(inputs, WireInputs):
        return apply_all_wire(inputs, variations)
    return apply_all(inputs, variations)


def vary_inputs(prepared: PreparedCapture, variations: Sequence[Variation]) -> ReplayInputs | WireInputs:
    """What a run under ``variations`` would send and answer from (nothing is sent)."""
    return _apply(prepared.inputs, variations) if variations else prepared.inputs


def inputs_key(inputs: ReplayInputs | WireInputs) -> str:
    """A digest of everything a run sends and answers from: equal keys, identical runs."""
    digest = hashlib.sha256()
    if isinstance(inputs, WireInputs):
        for call in inputs.calls:
            digest.update(call.body)
            digest.update(b"\x00")
    else:
        digest.update(inputs.request.body().encode("utf-8"))
    digest.update(json.dumps(dict(inputs.externals), sort_keys=True, default=str).encode("utf-8"))
    return digest.hexdigest()


def require_variation(prepared: PreparedCapture, variation: Variation) -> None:
    """Refuse (:class:`NoVariation`) a variation that leaves the request and the world as captured."""
    if inputs_key(vary_inputs(prepared, [variation])) == inputs_key(prepared.inputs):
        raise NoVariation(
            "no variation: equals the captured value, so it would test nothing", path=variation.describe()
        )


def _model(inputs: ReplayInputs | WireInputs) -> str:
    return inputs.model if isinstance(inputs, WireInputs) else inputs.request.model


def _refused(decision_id: str, capture: Mapping[str, Any], error: Exception) -> ReplayResult:
    return ReplayResult(
        decision_id=decision_id, agent_id=str(capture.get("agentId") or ""), replay_failure=error
    )

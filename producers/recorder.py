"""The recorder: what a runtime holds to capture its decisions without ever waiting on them.

The runtime's thread only builds plain dicts (:class:`~producers.decision.DecisionBuilder`) and puts
the finished builder on a bounded queue. One background worker does the rest, per capture: apply
the capture policy, seal (hash every content part, Merkle root, sign the manifest), drop content
for structured-only captures, Avro-encode, claim-check an oversized capture through the blob
store, and hand the bytes to the transport. Delivery outcomes come back through transport
callbacks and update :attr:`Recorder.stats`; failures also go to ``on_error``. Between stages the
worker takes turns with the runtime's threads for the GIL (:mod:`producers.turns`), so a runtime
thread waiting for it gets it within about one stage, not CPython's 5 ms switch interval.

Values the runtime gives that cannot be recorded as given (circular, nested deeper than
:data:`~producers.unrecordable.MAX_DEPTH` levels, not JSON, NaN, an integer beyond ±(2**53 − 1),
the wrong type, ...) never raise in the agent: the capture is still made, with a marker
``{"blackbox.unrecordable": "<why> at <path>"}`` in their place and the problems named in its
``outcome.reason``; it is signed and verifies as usual. Each such capture is reported once through
``on_error`` (stage ``record``, ``partial=True``, a :class:`~schemas.errors.Unrecordable` error)
and counted in ``stats.unrecordable``. See :mod:`producers.unrecordable`.

Backpressure: when the queue is full a routine capture is dropped at once and a consequential one
(or a flag) waits up to ``consequential_wait`` seconds; either way a drop is counted
(``dropped_queue_full``) and reported through ``on_error`` — never silent, never an exception in
the agent. Nothing the worker does can raise into the agent, and neither can ``on_error`` itself
(what it raises is logged and counted in ``stats.on_error_raised``).

``flush(timeout)`` waits until everything queued so far is delivered or failed; ``close()``
flushes, stops the worker and closes the transport, reporting whatever could not be delivered.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import queue
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Self

from producers import native
from producers import unrecordable as check
from producers.backlog import Backlog
from producers.claimcheck import ClaimChecker
from producers.clock import Clock, system_clock
from producers.config import AgentConfig, ReplayPolicy, agent_config, pin_config
from producers.decision import DecisionBuilder
from producers.evidence.events import flag_event
from producers.flight import (
    NO_FLIGHT,
    FailurePredicate,
    FlightPolicy,
    FlightRecorder,
    FlightStats,
    failure_indicator,
)
from producers.pacts.judge import AppliedVersion, apply_pact
from producers.pacts.source import PactSource
from producers.pipeline import Prepared, Stage, StageFailed, as_blackbox, prepare_capture, prepare_flag
from producers.policy import CapturePolicy
from producers.privacy.protect import RedactMode, Redactor, RedactPatterns
from producers.turns import WorkerTurns
from schemas.errors import (
    BlackboxError,
    ContentNotHeld,
    ContractError,
    FailurePredicateFailed,
    PactRefused,
    PactRuleFailed,
    QueueFull,
    TransportError,
    Unrecordable,
)

if TYPE_CHECKING:
    from pathlib import Path

    from producers.blobstore import BlobStore
    from producers.evidence import Signer, TrustStore
    from producers.privacy.keys import Vault
    from producers.settings import BlackboxSettings
    from producers.transports import DeliveryFailed, Transport

__all__ = ["CaptureFailure", "DecisionBuilder", "Recorder", "RecorderStats"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RecorderStats:
    """Counters since the recorder started. ``outstanding`` = enqueued, not yet delivered or failed.

    ``unrecordable``: captures (and ``configure`` calls) in which values the runtime gave could not
    be recorded as given and were replaced by markers (each also reported through ``on_error``);
    such a capture is still counted as enqueued and then delivered or failed. ``on_error_raised``:
    times the ``on_error`` callback itself raised (logged, never propagated). ``flight``: the flight
    recorder's counters (:class:`~producers.flight.FlightStats`; all zero when it is off).
    """

    enqueued: int
    delivered: int
    dropped_queue_full: int
    failed: int
    claim_checked: int
    outstanding: int
    unrecordable: int = 0
    on_error_raised: int = 0
    flight: FlightStats = NO_FLIGHT


@dataclass(frozen=True, slots=True)
class CaptureFailure:
    """What ``on_error`` receives: which decision (or flag) was lost, at which stage, and why.

    ``partial=True`` (stage ``record``): the capture was *not* lost; it was made with markers in
    place of values that could not be recorded as given, which ``error`` names. ``partial=True``
    (stage ``flight``): nothing was lost either; a flag was sent but the flight recorder no longer
    held the content (:class:`ContentNotHeld`), or ``failure_when`` raised (:class:`FailurePredicateFailed`).
    ``partial=True`` (stage ``pact``): nothing was lost; the pact version given was refused
    (:class:`PactRefused`, no decision id), or a ``consequential_when`` rule could not be evaluated on
    one decision (:class:`PactRuleFailed`).
    """

    decision_id: str | None
    agent_id: str
    kind: Literal["capture", "flag"]
    stage: Stage
    error: BlackboxError
    partial: bool = False

    def __str__(self) -> str:
        if self.stage == "pact" and self.decision_id is None:
            return f"pact: {self.error}"
        if self.stage in ("flight", "pact"):
            return f"{self.kind} {self.decision_id}: {self.error}"
        if self.partial:
            return f"{self.kind} {self.decision_id} recorded with unrecordable values replaced: {self.error}"
        return f"{self.kind} {self.decision_id} lost at {self.stage}: {self.error}"


class _Flag:
    __slots__ = ("at", "value")

    def __init__(self, value: dict[str, Any], at: datetime) -> None:
        self.value = value
        self.at = at  # the recorder's clock when flagged: the flight recorder's window is measured to it


class _Assembled:
    """A capture the runtime assembled itself (:meth:`Recorder.record`), and what its snapshot found."""

    __slots__ = ("problems", "value")

    def __init__(self, value: dict[str, Any], problems: list[str]) -> None:
        self.value = value
        self.problems = problems


_STOP = object()
# A decision queued behind this many waits long enough (milliseconds) to outlive the GC's young
# generations: it is packed (DecisionBuilder._pack). A shallower backlog skips the ~6 µs it costs.
PACK_BEHIND = 32
_LIVE: weakref.WeakSet[Recorder] = weakref.WeakSet()
EXIT_FLUSH_TIMEOUT = 10.0


@atexit.register
def _close_live_recorders() -> None:
    """At interpreter exit, close recorders the runtime forgot, so queued captures are delivered
    (or reported failed) instead of vanishing with the daemon worker thread."""
    for recorder in list(_LIVE):
        try:
            recorder.close(EXIT_FLUSH_TIMEOUT)
        except Exception:
            log.exception("closing a recorder at exit failed")


class Recorder:
    """Capture decisions of one agent; emit them in the background. See the module docstring.

    Thread-safe: many runtime threads may record decisions on one recorder. ``on_error`` runs on
    the worker thread (or on the caller's thread for queue-full drops); keep it quick.

    ``flight``: the flight recorder's window and byte cap (:mod:`producers.flight`; None: the
    defaults, 15 minutes and 64 MiB; ``FlightPolicy(max_bytes=0)``: off). While it is on, a routine
    decision whose capture shows a failure (:func:`~producers.flight.failure_indicator`, or
    ``failure_when`` returning truthy) is captured in full at once, consequential with the reason.

    ``redact``: personal data is redacted in every capture before it is sealed (:mod:`producers.privacy`;
    ``"builtin"`` by default, ``"presidio"``, or ``"off"``), plus whatever ``redact_patterns`` (regular
    expressions, or a mapping kind -> expression) match; the original parts are kept sealed under a
    per-decision data key in ``vault`` (``from_settings`` wires the key file and the blob store;
    without a vault the originals are not kept).

    ``pact``: where the operator keeps the pact version this agent is judged by (a file path or an
    ``http(s)://`` URL of a signed version document, :mod:`producers.pacts.source`), verified against
    ``pact_trust`` (a trust store, a trust store file or a public key file: the operator's pact key(s))
    and read again every ``pact_refresh`` seconds, always off the agent's thread. A routine decision
    one of its ``consequential_when`` rules matches is captured in full, consequential, the rule named
    in the reason; every capture made while the version binds the agent records it (``pactVersion``).
    A version that cannot be used is refused through ``on_error`` (stage ``pact``) and the agent runs
    on, judged by the version it had (or none). Needs the CEL engine, ``agent-blackbox[pacts]``.
    """

    def __init__(
        self,
        *,
        agent_id: str,
        transport: Transport,
        signer: Signer,
        runtime_id: str | None = None,
        policy: CapturePolicy | None = None,
        blob_store: BlobStore | None = None,
        max_message_bytes: int = 900_000,
        queue_size: int = 10_000,
        consequential_wait: float = 1.0,
        on_error: Callable[[CaptureFailure], None] | None = None,
        clock: Clock = system_clock,
        config: AgentConfig | None = None,
        replay_policy: ReplayPolicy | None = None,
        snapshot: bool = True,
        sign_flags: bool = True,
        flight: FlightPolicy | None = None,
        failure_when: FailurePredicate | None = None,
        redact: RedactMode = "builtin",
        redact_patterns: RedactPatterns | None = None,
        vault: Vault | None = None,
        pact: str | Path | PactSource | None = None,
        pact_trust: TrustStore | str | Path | None = None,
        pact_refresh: float = 60.0,
    ) -> None:
        self.agent_id = agent_id
        self.runtime_id = runtime_id
        self.policy = policy or CapturePolicy()
        self.clock = clock
        self.default_config = config
        self.replay_policy = replay_policy or ReplayPolicy()
        self._transport = transport
        self._signer = signer
        self._key = agent_id.encode("utf-8")
        self._claims = (
            None
            if blob_store is None
            else ClaimChecker(store=blob_store, max_message_bytes=max_message_bytes)
        )
        self._max_message_bytes = max_message_bytes
        self._consequential_wait = consequential_wait
        self._on_error = on_error
        self._copies = snapshot
        self._sign_flags = sign_flags
        flight = flight or FlightPolicy()
        self._flight = FlightRecorder(flight) if flight.enabled else None
        self._failure_when = failure_when
        self._redactor = Redactor.create(redact, patterns=redact_patterns, vault=vault)
        # The native core is chosen here, on construction: BLACKBOX_NATIVE=require without it fails
        # now (NativeCoreUnavailable), never later inside a decision in the agent's thread.
        native.core()
        self._queue: Backlog[Any] = Backlog(queue_size)
        self._turns = WorkerTurns()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._enqueued = self._delivered = self._dropped = self._failed = self._claimed = 0
        self._unrecordable = self._on_error_raised = 0
        # accepted by the transport, delivery callback pending: token -> (kind, decision id)
        self._in_transport: dict[int, tuple[Literal["capture", "flag"], str | None]] = {}
        self._next_token = 0
        self._flush_waiters = 0
        self._closed = False
        self._pact: PactSource | None = None
        self._worker = threading.Thread(target=self._run, name=f"blackbox-recorder-{agent_id}", daemon=True)
        self._worker.start()
        self._pact = self._open_pact(pact, pact_trust, pact_refresh)
        _LIVE.add(self)

    @classmethod
    def from_settings(
        cls,
        settings: BlackboxSettings | None = None,
        *,
        agent_id: str,
        runtime_id: str | None = None,
        signer: Signer | None = None,
        transport: Transport | None = None,
        blob_store: BlobStore | None = None,
        policy: CapturePolicy | None = None,
        transport_options: dict[str, Any] | None = None,
        **options: Any,
    ) -> Recorder:
        """A recorder wired from settings (env ``BLACKBOX_*``): transport, signing key, blob store,
        message limit, capture policy and flight recorder; explicit arguments win."""
        from producers.blobstore import open_blob_store
        from producers.evidence import load_signer
        from producers.privacy.protect import vault_from_settings
        from producers.settings import load_settings
        from producers.transports import open_sender

        settings = settings or load_settings()
        if signer is None:
            signer = load_signer(settings.signing_key, settings.signing_key_b64)
        blob_store = blob_store or open_blob_store(settings)
        if settings.redact != "off":
            options.setdefault("redact", settings.redact)
            options.setdefault("vault", vault_from_settings(settings, blob_store))
        else:
            options.setdefault("redact", "off")
        return cls(
            agent_id=agent_id,
            runtime_id=runtime_id,
            signer=signer,
            transport=transport
            if transport is not None
            else open_sender(settings, **(transport_options or {})),
            blob_store=blob_store,
            policy=policy or CapturePolicy.from_settings(settings),
            max_message_bytes=settings.max_message_bytes,
            **{"flight": FlightPolicy.from_settings(settings), **_pact_options(settings), **options},
        )

    # --- the runtime's side ----------------------------------------------------------------------
    def configure(self, **config: Any) -> AgentConfig:
        """Set the default model configuration for later decisions (same keywords as
        :meth:`DecisionBuilder.configure`); returns it.

        Never raises: what cannot be recorded as given is replaced, reported once through
        ``on_error`` now, and named in every capture that uses this configuration.
        """
        problems: list[str] = []
        try:
            built = agent_config(config, snapshot=self._copies, problems=problems)
        except Exception as exc:  # a last line of defence
            problems.append(f"configure() could not be recorded: {type(exc).__name__}: {exc}")
            built = AgentConfig(model=check.MARKER)
        if problems:
            built = replace(built, unrecordable=tuple(problems))
            self._unrecorded(None, problems)
        self.default_config = built
        pin_config(built, owned=self._copies)
        return built

    def decision(
        self,
        *,
        request: Any = None,
        origin_user_id: str | None = None,
        origin_session_id: str | None = None,
        consequential: bool = False,
        consequential_reason: str | None = None,
        decision_id: str | None = None,
        config: AgentConfig | None = None,
        replay_policy: ReplayPolicy | None = None,
        fidelity: Literal["sdk", "semantic"] = "sdk",
    ) -> DecisionBuilder:
        """Start recording one decision; use as ``with rec.decision(...) as d:``.

        ``fidelity``: ``"sdk"`` when the agent records by hand; ``"semantic"`` when an adapter rebuilds
        the decision from spans or callbacks (``"wire"`` is set by the HTTP adapters themselves)."""
        return DecisionBuilder(
            self,
            decision_id=decision_id,
            request=request,
            origin_user_id=origin_user_id,
            origin_session_id=origin_session_id,
            consequential=consequential,
            consequential_reason=consequential_reason,
            config=config,
            replay_policy=replay_policy or self.replay_policy,
            snapshot=self._copies,
            fidelity=fidelity,
        )

    def record(self, capture: dict[str, Any]) -> bool:
        """Queue a capture the runtime assembled itself (JSON form; hashes may be null); it is
        snapshotted like every value given to the recorder.

        A null ``captureLevel`` lets the policy decide; a given one is kept. Returns False if the
        capture was dropped (queue full, or not a JSON object), True if queued.
        """
        problems: list[str] = []
        try:
            if self._copies:
                capture = check.snapshot(capture, path="", problems=problems)
            if not isinstance(capture, dict):
                raise ContractError(f"a capture is a JSON object, got {type(capture).__name__}")
            decision_id = capture.get("decisionId")
            consequential = capture.get("consequential")
            flagged = isinstance(consequential, dict) and consequential.get("flagged") is True
        except Exception as exc:
            self._lost("capture", None, as_blackbox(exc))
            return False
        return self._enqueue(
            _Assembled(capture, problems),
            consequential=flagged,
            decision_id=decision_id if isinstance(decision_id, str) else None,
            kind="capture",
        )

    def flag_consequential(
        self, decision_id: str, reason: str, *, failure: bool = True, flagged_at: datetime | None = None
    ) -> bool:
        """Upgrade an earlier decision to consequential (e.g. a failure signal that arrived later).

        Sends a ``flag`` event on the same key as the captures, so it follows them in order. If the
        decision went out structured-only and the flight recorder still holds its content (within
        the window, measured to now), the *full* capture follows the flag: same decision id, same
        hashes, ``captureLevel`` full, consequential with ``reason``; ingest upgrades the
        structured-only record to it. If the content is no longer held, the flag is still sent and
        ``on_error`` (or the log) says so plainly (:class:`ContentNotHeld`, stage ``flight``,
        counted in ``stats.flight.not_held``); a decision captured in full already needs nothing.

        Returns True when the flag was queued. Never raises: a flag that cannot be made is reported
        (and counted failed), and False returned.
        """
        try:
            if type(decision_id) is not str or type(reason) is not str:
                raise ContractError(
                    f"decision_id and reason must be strings, got {type(decision_id).__name__} and "
                    f"{type(reason).__name__}"
                )
            now = self._now([])
            value = flag_event(
                decision_id,
                agent_id=self.agent_id,
                reason=reason,
                flagged_at=flagged_at or now,
                failure=failure,
            )
        except Exception as exc:
            self._lost("flag", decision_id if isinstance(decision_id, str) else None, as_blackbox(exc))
            return False
        return self._enqueue(_Flag(value, now), consequential=True, decision_id=decision_id, kind="flag")

    def _now(self, problems: list[str]) -> datetime:
        """The recorder's clock, or the system clock (with a problem) if it fails or is naive."""
        try:
            moment = self.clock()
            if isinstance(moment, datetime) and moment.utcoffset() is not None:
                return moment
            raise ValueError(f"a timezone-aware datetime expected, got {moment!r}")
        except Exception as exc:
            problems.append(
                f"the recorder's clock failed ({type(exc).__name__}: {exc}); the system clock was used"
            )
            return system_clock()

    def _lost(self, kind: Literal["capture", "flag"], decision_id: str | None, error: BlackboxError) -> None:
        """Nothing could be queued for what the runtime gave: count it enqueued and failed, report it."""
        with self._lock:
            self._enqueued += 1
        self._settle(False, CaptureFailure(decision_id, self.agent_id, kind, "record", error))

    def _unrecorded(self, decision_id: str | None, problems: list[str] | tuple[str, ...]) -> None:
        with self._lock:
            self._unrecordable += 1
        error = Unrecordable(f"{len(problems)} value(s) replaced by markers: {check.summary(list(problems))}")
        self._report(CaptureFailure(decision_id, self.agent_id, "capture", "record", error, partial=True))

    def _submit_decision(self, builder: DecisionBuilder) -> None:
        if self._queue.qsize() >= PACK_BEHIND:
            try:
                builder._pack()
            except Exception:  # never into the agent's thread; the decision waits unpacked
                log.exception("packing a queued decision failed")
        self._enqueue(
            builder, consequential=builder.consequential, decision_id=builder.decision_id, kind="capture"
        )

    def _enqueue(
        self, item: Any, *, consequential: bool, decision_id: str | None, kind: Literal["capture", "flag"]
    ) -> bool:
        with self._lock:
            self._enqueued += 1
            closed = self._closed
        if closed:
            self._settle(
                False,
                CaptureFailure(
                    decision_id, self.agent_id, kind, "close", TransportError("recorder is closed")
                ),
            )
            return False
        try:
            if consequential:
                self._queue.put(item, timeout=self._consequential_wait)
            else:
                self._queue.put_nowait(item)
            return True
        except queue.Full:
            pass
        with self._idle:
            self._enqueued -= 1
            self._dropped += 1
            if self._flush_waiters:
                self._idle.notify_all()
        how = f"waited {self._consequential_wait:.2f}s" if consequential else "routine capture dropped"
        error = QueueFull(f"recorder queue full ({self._queue.maxsize} captures); {how}")
        self._report(CaptureFailure(decision_id, self.agent_id, kind, "queue", error))
        return False

    # --- lifecycle -----------------------------------------------------------------------------
    @property
    def pact(self) -> PactSource | None:
        """Where the pact version comes from (``pact.current``: the version in force), or None."""
        return self._pact

    @property
    def stats(self) -> RecorderStats:
        with self._lock:
            return RecorderStats(
                enqueued=self._enqueued,
                delivered=self._delivered,
                dropped_queue_full=self._dropped,
                failed=self._failed,
                claim_checked=self._claimed,
                outstanding=self._outstanding(),
                unrecordable=self._unrecordable,
                on_error_raised=self._on_error_raised,
                flight=NO_FLIGHT if self._flight is None else self._flight.stats,
            )

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every capture queued so far is delivered or failed; True if none is left."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._idle:
            self._flush_waiters += 1
            try:
                while self._outstanding() > 0:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return False
                    self._idle.wait(remaining if remaining is not None else 0.5)
                return True
            finally:
                self._flush_waiters -= 1

    def _outstanding(self) -> int:
        return self._enqueued - self._delivered - self._failed

    def close(self, timeout: float | None = 30.0) -> bool:
        """Flush (up to ``timeout``), stop the worker, close the transport. Whatever is still
        undelivered is reported as failed. True if nothing failed from the call on and nothing is
        left outstanding (every capture queued before ``close`` was delivered)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            if self._closed:
                return self._outstanding() == 0
            self._closed = True
            failed_before = self._failed
        _LIVE.discard(self)
        if self._pact is not None:
            self._pact.close()
        self.flush(timeout)
        while True:  # make room for the stop marker; what we pop was never processed
            try:
                self._queue.put_nowait(_STOP)
                break
            except queue.Full:
                self._fail_unprocessed()
        self._worker.join(None if deadline is None else max(0.0, deadline - time.monotonic()) + 1.0)
        if self._flight is not None and not self._worker.is_alive():
            self._flight.close()  # held content (and spill files) go with the recorder
        remaining = None if deadline is None else max(0.5, deadline - time.monotonic())
        try:
            self._transport.close(remaining)
        except Exception as exc:  # the transport failing to close must not crash shutdown
            log.exception("transport close failed")
            self._report(CaptureFailure(None, self.agent_id, "capture", "close", as_blackbox(exc)))
        self._fail_unprocessed()
        for token in list(self._in_transport):
            entry = self._in_transport.pop(token, None)
            if entry is not None:
                error = TransportError("the transport closed without reporting delivery")
                self._settle(False, CaptureFailure(entry[1], self.agent_id, entry[0], "close", error))
        with self._lock:
            return self._outstanding() == 0 and self._failed == failed_before

    def _fail_unprocessed(self) -> None:
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return
            if item is not _STOP:
                kind, decision_id = _describe(item)
                self._settle(
                    False,
                    CaptureFailure(
                        decision_id,
                        self.agent_id,
                        kind,
                        "close",
                        TransportError("recorder closed before the capture was sent"),
                    ),
                )

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- the worker ----------------------------------------------------------------------------
    def _run(self) -> None:
        get, get_nowait, transport = self._queue.get, self._queue.get_nowait, self._transport
        since_poll = 0
        self._turns.waited()  # turns count this thread's CPU time
        while True:
            try:
                item = get_nowait()
            except queue.Empty:
                if self._in_transport:
                    self._idle_poll()
                    continue
                try:
                    item = get(timeout=0.2)
                except queue.Empty:
                    continue
                self._turns.waited()  # it blocked: the GIL was the runtime's meanwhile
            if item is _STOP:
                break
            try:
                self._process(item)
            except Exception:  # _process reports its own failures; this is a last line of defence
                log.exception("recorder worker step failed")
            since_poll += 1
            if since_poll >= 8:
                since_poll = 0
                self._safe_poll(0)
        # drain callbacks of what was sent; close() does the final transport flush
        try:
            transport.flush(0)
        except Exception:
            log.exception("transport flush failed")

    def _idle_poll(self) -> None:
        if self._flush_waiters:
            try:
                self._transport.flush(0.05)
            except Exception as exc:
                log.exception("transport flush failed")
                self._report(CaptureFailure(None, self.agent_id, "capture", "delivery", as_blackbox(exc)))
                time.sleep(0.05)
        else:
            self._safe_poll(0.005)

    def _safe_poll(self, timeout: float) -> None:
        try:
            self._transport.poll(timeout)
        except Exception as exc:
            log.exception("transport poll failed")
            self._report(CaptureFailure(None, self.agent_id, "capture", "delivery", as_blackbox(exc)))
            time.sleep(timeout)

    def _process(self, item: Any) -> None:
        kind, decision_id = _describe(item)
        if isinstance(item, _Flag):
            self._process_flag(item, decision_id)
            return
        try:
            if isinstance(item, DecisionBuilder):
                prepared = self._prepare_recorded(
                    item.to_capture,
                    owned=True,
                    problems=lambda: item.problems,  # read after build: assembling model calls adds some
                    inherited=item.inherited_problems,
                    decision_id=decision_id,
                )
            else:
                prepared = self._prepare_recorded(
                    lambda: item.value,
                    owned=False,
                    problems=item.problems,
                    inherited=(),
                    decision_id=decision_id,
                )
        except StageFailed as failed:
            self._settle(False, CaptureFailure(decision_id, self.agent_id, kind, failed.stage, failed.error))
            return
        self._send(kind, decision_id, prepared)
        flight = self._flight
        if flight is not None and decision_id is not None:
            if prepared.held is not None:
                flight.hold(decision_id, prepared.held, encoded=prepared.data, at=self._now([]))
            else:
                flight.captured_in_full(decision_id)
        self._turns.pause()

    # --- the flight recorder (producers/flight.py) ---------------------------------------------
    def _process_flag(self, item: _Flag, decision_id: str | None) -> None:
        """Send the flag; then the full capture if the flight recorder still holds the content."""
        flight = self._flight
        held: dict[str, Any] | None = None
        if flight is not None and decision_id is not None:
            try:
                held = flight.take(decision_id, at=item.at)
            except Exception:
                log.exception("the flight recorder failed to hand out %s", decision_id)
            if held is not None:
                with self._lock:  # counted now, so flush() never sees a gap between the two messages
                    self._enqueued += 1
        try:
            prepared = prepare_flag(item.value, signer=self._signer if self._sign_flags else None)
        except StageFailed as failed:
            self._settle(
                False, CaptureFailure(decision_id, self.agent_id, "flag", failed.stage, failed.error)
            )
        else:
            self._send("flag", decision_id, prepared)
        if flight is None or decision_id is None:
            return
        if held is not None:
            self._send_full(flight, decision_id, held, reason=str(item.value.get("reason") or ""))
            return
        fate = flight.fate(decision_id)
        if fate in ("full", "taken"):  # captured in full already, or brought in by an earlier flag
            return
        flight.count("not_held")
        why = fate or (
            f"not recorded by this recorder as a routine decision in the last "
            f"{flight.policy.window_seconds:g} s"
        )
        error = ContentNotHeld(
            f"flag sent, but the flight recorder does not hold the content ({why}); no full capture "
            "follows, a structured-only capture stays structured-only"
        )
        self._report(CaptureFailure(decision_id, self.agent_id, "flag", "flight", error, partial=True))

    def _send_full(
        self, flight: FlightRecorder, decision_id: str, held: dict[str, Any], *, reason: str
    ) -> None:
        """Emit the held capture in full, consequential with ``reason`` (resealed: the signature
        covers level and flag; sealing again checks every content hash against the one sent)."""
        full = dict(held)
        full["captureLevel"] = "full"
        full["consequential"] = {"flagged": True, "reason": reason}
        try:
            prepared = prepare_capture(
                full,
                signer=self._signer,
                policy=self.policy,
                claims=self._claims,
                max_message_bytes=self._max_message_bytes,
                pause=self._turns.pause,
            )
        except StageFailed as failed:
            self._settle(
                False, CaptureFailure(decision_id, self.agent_id, "capture", failed.stage, failed.error)
            )
            return
        flight.count("upgraded")
        self._send("capture", decision_id, prepared)

    def _fire_on_failure(
        self, capture: dict[str, Any], flight: FlightRecorder, *, owned: bool
    ) -> dict[str, Any]:
        """A routine capture whose level the policy decides and that shows a failure: full, now."""
        if capture.get("captureLevel") is not None:  # a level the runtime gave is kept
            return capture
        consequential = capture.get("consequential")
        if isinstance(consequential, dict) and consequential.get("flagged") is True:
            return capture
        reason = failure_indicator(capture) or self._ask_failure_when(capture, flight)
        if reason is None:
            return capture
        if not owned:
            capture = dict(capture)
        capture["captureLevel"] = "full"
        capture["consequential"] = {"flagged": True, "reason": f"failure indicator: {reason}"}
        flight.count("fired")
        return capture

    def _ask_failure_when(self, capture: dict[str, Any], flight: FlightRecorder) -> str | None:
        predicate = self._failure_when
        if predicate is None:
            return None
        try:
            verdict = predicate(capture)
            if not verdict:
                return None
            return verdict if isinstance(verdict, str) and verdict else "failure_when"
        except Exception as exc:
            flight.count("predicate_raised")
            try:
                what = f"{type(exc).__name__}: {exc}"
            except Exception:  # an exception whose str() fails
                what = type(exc).__name__
            error = FailurePredicateFailed(
                f"failure_when raised {what}; the decision was captured as the capture policy decided"
            )
            decision_id = capture.get("decisionId")
            self._report(
                CaptureFailure(
                    decision_id if isinstance(decision_id, str) else None,
                    self.agent_id,
                    "capture",
                    "flight",
                    error,
                    partial=True,
                )
            )
            return None

    # --- the pact's consequential_when rules (producers/pacts/) -------------------------------
    def _open_pact(
        self, pact: str | Path | PactSource | None, trust: TrustStore | str | Path | None, refresh: float
    ) -> PactSource | None:
        if pact is None:
            return None
        if isinstance(pact, PactSource):
            source = pact
        elif trust is None:
            self._pact_refused(
                PactRefused(
                    f"pact {pact} given without pact_trust (the operator's pact key or trust store): a "
                    "version is only used once verified against it; judged by no pact"
                )
            )
            return None
        else:
            source = PactSource(
                pact, trust=trust, agent_id=self.agent_id, on_refused=self._pact_refused, refresh=refresh
            )
        source.start()  # reads and verifies on its own thread, never this one
        return source

    def _pact_refused(self, error: PactRefused) -> None:
        self._report(CaptureFailure(None, self.agent_id, "capture", "pact", error, partial=True))

    def _judge(self, capture: dict[str, Any], applied: AppliedVersion, *, owned: bool) -> dict[str, Any]:
        try:
            judged, judgement = apply_pact(capture, applied, owned=owned)
            errors = judgement.errors
        except Exception as exc:  # a last line of defence: the capture goes on as the policy decides
            judged, errors = capture, (("*", f"{type(exc).__name__}: {exc}"),)
        if errors:
            decision_id = capture.get("decisionId")
            details = "; ".join(f"{rule}: {detail}" for rule, detail in errors)
            error = PactRuleFailed(
                f"consequential_when rule(s) of {applied.version} could not be evaluated ({details})"
            )
            self._report(
                CaptureFailure(
                    decision_id if isinstance(decision_id, str) else None,
                    self.agent_id,
                    "capture",
                    "pact",
                    error,
                    partial=True,
                )
            )
        return judged

    def _prepare_recorded(
        self,
        build: Callable[[], dict[str, Any]],
        *,
        owned: bool,
        problems: tuple[str, ...] | list[str] | Callable[[], tuple[str, ...]],
        inherited: tuple[str, ...],
        decision_id: str | None,
    ) -> Prepared:
        """Prepare a capture; if sealing or encoding refuses it, repair what could not be recorded
        (:func:`producers.unrecordable.repair_capture`) and prepare that instead.

        The capture names every problem (``inherited`` ones come from ``Recorder.configure``, which
        reported them already); this reports the rest, the runtime's and the repair's, once.
        """
        try:
            capture = build()
        except Exception as exc:
            raise StageFailed("build", as_blackbox(exc)) from exc
        if callable(problems):
            problems = problems()
        if problems or inherited:
            check.annotate(capture, [*problems, *inherited])
        try:
            prepared = self._prepare(capture, owned=owned)
        except StageFailed as failed:
            if failed.stage not in ("seal", "encode"):
                raise
            try:  # a fresh capture: sealing in place may have filled the first one partly
                repaired, found = check.repair_capture(build())
            except Exception:
                log.exception("repairing a refused capture failed")
                raise failed from None
            if not found:
                raise
            problems = [*problems, *found]
            check.annotate(repaired, [*problems, *inherited])
            try:
                prepared = self._prepare(repaired, owned=False)
            except StageFailed:
                raise failed from None
        if problems:
            self._unrecorded(decision_id, problems)
        return prepared

    def _send(self, kind: Literal["capture", "flag"], decision_id: str | None, prepared: Prepared) -> None:
        if prepared.claim_checked:
            with self._lock:
                self._claimed += 1
        self._next_token += 1
        token = self._next_token
        self._in_transport[token] = (kind, decision_id)
        try:
            self._transport.send(self._key, prepared.data, self._delivery_callback(token))
        except Exception as exc:
            self._in_transport.pop(token, None)
            self._settle(False, CaptureFailure(decision_id, self.agent_id, kind, "send", as_blackbox(exc)))

    def _prepare(self, capture: dict[str, Any], *, owned: bool) -> Prepared:
        pact = self._pact
        applied = None if pact is None else pact.current
        if applied is not None and applied.binds:
            capture = self._judge(capture, applied, owned=owned)
        flight = self._flight
        if flight is not None:
            capture = self._fire_on_failure(capture, flight, owned=owned)
        return prepare_capture(
            capture,
            signer=self._signer,
            policy=self.policy,
            claims=self._claims,
            max_message_bytes=self._max_message_bytes,
            owned=owned,
            hold=flight is not None,
            redactor=self._redactor,
            pause=self._turns.pause,
        )

    def _delivery_callback(self, token: int) -> Callable[[DeliveryFailed | None], None]:
        def delivered(error: DeliveryFailed | None) -> None:
            entry = self._in_transport.pop(token, None)
            if entry is None:  # a second callback for one message: the transport broke its contract
                return
            if error is None:
                self._settle(True, None)
            else:
                self._settle(False, CaptureFailure(entry[1], self.agent_id, entry[0], "delivery", error))

        return delivered

    def _settle(self, ok: bool, failure: CaptureFailure | None) -> None:
        with self._idle:
            if ok:
                self._delivered += 1
            else:
                self._failed += 1
            if self._flush_waiters and self._outstanding() <= 0:
                self._idle.notify_all()
        if failure is not None:
            self._report(failure)

    def _report(self, failure: CaptureFailure) -> None:
        log.debug("%s", failure)
        if self._on_error is None:
            log.warning("%s", failure)
            return
        try:
            self._on_error(failure)
        except Exception:
            with self._lock:
                self._on_error_raised += 1
            with contextlib.suppress(Exception):  # not even logging may raise into the agent
                log.exception("recorder on_error callback raised")


def _pact_options(settings: BlackboxSettings) -> dict[str, Any]:
    """The pact settings as Recorder keywords (none when ``BLACKBOX_PACT`` is unset)."""
    if not settings.pact:
        return {}
    return {"pact": settings.pact, "pact_trust": settings.pact_trust, "pact_refresh": settings.pact_refresh}


def _describe(item: Any) -> tuple[Literal["capture", "flag"], str | None]:
    if isinstance(item, _Flag):
        return "flag", item.value.get("decisionId")
    if isinstance(item, DecisionBuilder):
        return "capture", item.decision_id
    if isinstance(item, _Assembled):
        decision_id = item.value.get("decisionId")
        return "capture", decision_id if isinstance(decision_id, str) else None
    return "capture", None

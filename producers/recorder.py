"""The recorder: what a runtime holds to capture its decisions without ever waiting on them.

The runtime's thread only builds plain dicts (:class:`~producers.decision.DecisionBuilder`) and puts
the finished builder on a bounded queue. One background worker does the rest, per capture: apply
the capture policy, seal (hash every content part, Merkle root, sign the manifest), drop content
for structured-only captures, Avro-encode, claim-check an oversized capture through the blob
store, and hand the bytes to the transport. Delivery outcomes come back through transport
callbacks and update :attr:`Recorder.stats`; failures also go to ``on_error``.

Backpressure: when the queue is full a routine capture is dropped at once and a consequential one
(or a flag) waits up to ``consequential_wait`` seconds; either way a drop is counted
(``dropped_queue_full``) and reported through ``on_error`` — never silent, never an exception in
the agent. Nothing the worker does can raise into the agent.

``flush(timeout)`` waits until everything queued so far is delivered or failed; ``close()``
flushes, stops the worker and closes the transport, reporting whatever could not be delivered.
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Self

from producers.claimcheck import ClaimChecker
from producers.decision import (
    AgentConfig,
    Clock,
    DecisionBuilder,
    ReplayPolicy,
    format_timestamp,
    new_decision_id,
    pin_config,
    snapshot_json,
    system_clock,
)
from producers.pipeline import (
    Prepared,
    Stage,
    StageFailed,
    as_blackbox,
    prepare_capture,
    prepare_flag,
    sign_flag,
)
from producers.policy import CapturePolicy
from schemas.errors import BlackboxError, QueueFull, TransportError

if TYPE_CHECKING:
    from producers.blobstore import BlobStore
    from producers.evidence import Signer
    from producers.settings import BlackboxSettings
    from producers.transport import DeliveryFailed, Transport

__all__ = ["CaptureFailure", "DecisionBuilder", "Recorder", "RecorderStats", "sign_flag"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RecorderStats:
    """Counters since the recorder started. ``outstanding`` = enqueued, not yet delivered or failed."""

    enqueued: int
    delivered: int
    dropped_queue_full: int
    failed: int
    claim_checked: int
    outstanding: int


@dataclass(frozen=True, slots=True)
class CaptureFailure:
    """What ``on_error`` receives: which decision (or flag) was lost, at which stage, and why."""

    decision_id: str | None
    agent_id: str
    kind: Literal["capture", "flag"]
    stage: Stage
    error: BlackboxError

    def __str__(self) -> str:
        return f"{self.kind} {self.decision_id} lost at {self.stage}: {self.error}"


class _Flag:
    __slots__ = ("value",)

    def __init__(self, value: dict[str, Any]) -> None:
        self.value = value


_STOP = object()
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
        self._snapshot: Callable[[Any], Any] = snapshot_json if snapshot else _identity
        self._sign_flags = sign_flags
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=queue_size)
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._enqueued = self._delivered = self._dropped = self._failed = self._claimed = 0
        # accepted by the transport, delivery callback pending: token -> (kind, decision id)
        self._in_transport: dict[int, tuple[Literal["capture", "flag"], str | None]] = {}
        self._next_token = 0
        self._flush_waiters = 0
        self._closed = False
        self._worker = threading.Thread(target=self._run, name=f"blackbox-recorder-{agent_id}", daemon=True)
        self._worker.start()
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
        message limit and capture policy; explicit arguments win."""
        from producers.blobstore import open_blob_store
        from producers.evidence import load_signer
        from producers.settings import load_settings
        from producers.transport import open_transport

        settings = settings or load_settings()
        if signer is None:
            signer = load_signer(settings.signing_key, settings.signing_key_b64)
        return cls(
            agent_id=agent_id,
            runtime_id=runtime_id,
            signer=signer,
            transport=transport or open_transport(settings, **(transport_options or {})),
            blob_store=blob_store or open_blob_store(settings),
            policy=policy or CapturePolicy.from_settings(settings),
            max_message_bytes=settings.max_message_bytes,
            **options,
        )

    # --- the runtime's side ----------------------------------------------------------------------
    def configure(self, **config: Any) -> AgentConfig:
        """Set the default model configuration for later decisions (same keywords as
        :meth:`DecisionBuilder.configure`); returns it."""
        if "tool_schema" in config:
            config["tool_schema"] = self._snapshot(config["tool_schema"])
        if "sampling" in config:
            config["sampling"] = self._snapshot(dict(config["sampling"] or {}))
        self.default_config = AgentConfig(**config)
        pin_config(self.default_config, owned=self._snapshot is snapshot_json)
        return self.default_config

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
    ) -> DecisionBuilder:
        """Start recording one decision; use as ``with rec.decision(...) as d:``."""
        return DecisionBuilder(
            self,
            decision_id=decision_id or new_decision_id(self.clock()),
            request=request,
            origin_user_id=origin_user_id,
            origin_session_id=origin_session_id,
            consequential=consequential,
            consequential_reason=consequential_reason,
            config=config,
            replay_policy=replay_policy or self.replay_policy,
            snapshot=self._snapshot,
        )

    def record(self, capture: dict[str, Any]) -> bool:
        """Queue a capture the runtime assembled itself (JSON form; hashes may be null); it is
        snapshotted like every value given to the recorder.

        A null ``captureLevel`` lets the policy decide; a given one is kept. Returns False if the
        capture was dropped (queue full), True if queued.
        """
        capture = self._snapshot(capture)
        flagged = bool((capture.get("consequential") or {}).get("flagged"))
        return self._enqueue(
            capture, consequential=flagged, decision_id=capture.get("decisionId"), kind="capture"
        )

    def flag_consequential(
        self, decision_id: str, reason: str, *, failure: bool = True, flagged_at: datetime | None = None
    ) -> bool:
        """Upgrade an earlier decision to consequential (e.g. a failure signal that arrived later).

        Sends a ``flag`` event on the same key as the captures, so it follows them in order.
        """
        value = {
            "decisionId": decision_id,
            "agentId": self.agent_id,
            "reason": reason,
            "flaggedAt": format_timestamp(flagged_at or self.clock()),
            "failure": failure,
        }
        return self._enqueue(_Flag(value), consequential=True, decision_id=decision_id, kind="flag")

    def _submit_decision(self, builder: DecisionBuilder) -> None:
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
    def stats(self) -> RecorderStats:
        with self._lock:
            return RecorderStats(
                enqueued=self._enqueued,
                delivered=self._delivered,
                dropped_queue_full=self._dropped,
                failed=self._failed,
                claim_checked=self._claimed,
                outstanding=self._outstanding(),
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
        self.flush(timeout)
        while True:  # make room for the stop marker; what we pop was never processed
            try:
                self._queue.put_nowait(_STOP)
                break
            except queue.Full:
                self._fail_unprocessed()
        self._worker.join(None if deadline is None else max(0.0, deadline - time.monotonic()) + 1.0)
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
        while True:
            try:
                if self._in_transport:
                    try:
                        item = get_nowait()
                    except queue.Empty:
                        self._idle_poll()
                        continue
                else:
                    item = get(timeout=0.2)
            except queue.Empty:
                continue
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
        try:
            if isinstance(item, _Flag):
                prepared = prepare_flag(item.value, signer=self._signer if self._sign_flags else None)
            elif isinstance(item, DecisionBuilder):
                try:
                    capture = item.to_capture()
                except Exception as exc:
                    raise StageFailed("build", as_blackbox(exc)) from exc
                prepared = self._prepare(capture, owned=True)
            else:
                prepared = self._prepare(item, owned=False)
        except StageFailed as failed:
            self._settle(False, CaptureFailure(decision_id, self.agent_id, kind, failed.stage, failed.error))
            return
        self._send(kind, decision_id, prepared)

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
        return prepare_capture(
            capture,
            signer=self._signer,
            policy=self.policy,
            claims=self._claims,
            max_message_bytes=self._max_message_bytes,
            owned=owned,
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
            log.exception("recorder on_error callback raised")


def _identity(value: Any) -> Any:
    return value


def _describe(item: Any) -> tuple[Literal["capture", "flag"], str | None]:
    if isinstance(item, _Flag):
        return "flag", item.value.get("decisionId")
    if isinstance(item, DecisionBuilder):
        return "capture", item.decision_id
    return "capture", item.get("decisionId") if isinstance(item, dict) else None

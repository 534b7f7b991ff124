"""The OTLP trace receiver without its HTTP: a checked request in, decisions recorded, an answer out.

Per request (the route, :mod:`.routes`, has read and inflated the body under its limits):

1. :meth:`OtlpReceiver.admit` first, before the body is read: when the recorders' undelivered
   backlog is over ``max_backlog`` the answer is 429; while the body arrives, every request's bytes
   count against one budget (``max_receiving_bytes``, released once the request is answered) and
   a request that would pass it is 503. Both carry ``Retry-After`` (the OTLP exporters retry both,
   as the specification asks). A connection that sends nothing holds no bytes and no thread;
   decoding and recording run in at most ``max_decoding`` worker threads at once;
2. :meth:`OtlpReceiver.accept` decodes and checks every span (:mod:`.decode`; anything wrong is 400
   with the reason, and nothing of the request is recorded); spans for an agent the sender may not
   send for, or whose agent id is not printable, are rejected and the rest recorded: the answer is
   200 with ``partial_success`` (``rejected_spans`` and why), or 403 when every span was rejected;
3. the kept spans go to :class:`~producers.integrations.genai_spans.SpanDecisions`, which records the
   decisions of every trace now whole; the answer is an ``ExportTraceServiceResponse`` in the
   request's encoding.

Error bodies are a ``google.rpc.Status`` (code and message) in the request's encoding, as the OTLP
specification asks; an OTLP exporter logs its message.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from consumers.otlp.decode import JSON, PROTOBUF, MalformedRequest, decode_request, spans_of
from consumers.otlp.recorders import RecorderPool, agent_of_span
from consumers.otlp.senders import Sender
from consumers.web.bodies import BodyLimits, BodyRefused
from producers.integrations.genai_spans import SpanDecisions

__all__ = ["DEFAULT_MAX_BODY_BYTES", "TRACES_PATH", "Answer", "OtlpReceiver", "ReceiverStats", "status_body"]

log = logging.getLogger(__name__)

TRACES_PATH = "/v1/traces"
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
# google.rpc.Code
INVALID_ARGUMENT, PERMISSION_DENIED, RESOURCE_EXHAUSTED, INTERNAL, UNAVAILABLE, UNAUTHENTICATED = (
    3,
    7,
    8,
    13,
    14,
    16,
)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def status_body(code: int, message: str, content_type: str) -> bytes:
    """A ``google.rpc.Status`` (field 1 code, field 2 message): two fields, written directly rather
    than pulling in googleapis-common-protos for them."""
    if content_type == JSON:
        return json.dumps({"code": code, "message": message}).encode("utf-8")
    text = message.encode("utf-8")
    return b"\x08" + _varint(code) + b"\x12" + _varint(len(text)) + text


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: bytes
    content_type: str
    headers: tuple[tuple[str, str], ...] = ()


def refusal(status: int, code: int, message: str, content_type: str, **headers: str) -> Answer:
    answer_type = JSON if content_type == JSON else PROTOBUF
    return Answer(status, status_body(code, message, answer_type), answer_type, tuple(headers.items()))


@dataclass(frozen=True, slots=True)
class ReceiverStats:
    requests: int
    rejected: int
    spans: int
    decisions: int
    rejected_spans: int = 0


class OtlpReceiver:
    """See the module docstring. :meth:`start` the expiry thread (traces overdue for their root,
    recorders idle too long); :meth:`shutdown` stops it and records every trace still held."""

    def __init__(
        self,
        decisions: SpanDecisions,
        recorders: RecorderPool,
        *,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        max_receiving_bytes: int = 4 * DEFAULT_MAX_BODY_BYTES,
        max_decoding: int = 2,
        max_backlog: int = 5_000,
        read_idle_seconds: float = 10.0,
        expire_every: float = 1.0,
    ) -> None:
        self.decisions = decisions
        self.recorders = recorders
        self.max_body_bytes = max_body_bytes
        self.max_receiving_bytes = max(max_receiving_bytes, max_body_bytes)
        self.max_decoding = max_decoding
        self.max_backlog = max_backlog
        self.read_idle_seconds = read_idle_seconds
        self._lock = threading.Lock()
        self._receiving = 0  # bytes of bodies held, read or being read
        self._counts = {"requests": 0, "rejected": 0, "spans": 0, "decisions": 0, "rejected_spans": 0}
        self._stop = threading.Event()
        self._expire_every = expire_every
        self._thread: threading.Thread | None = None

    @property
    def limits(self) -> BodyLimits:
        return BodyLimits(
            max_bytes=self.max_body_bytes,
            idle_seconds=self.read_idle_seconds,
            total_seconds=max(60.0, self.read_idle_seconds),
        )

    @property
    def receiving_bytes(self) -> int:
        with self._lock:
            return self._receiving

    @property
    def stats(self) -> ReceiverStats:
        with self._lock:
            return ReceiverStats(**self._counts)

    def count(self, **counts: int) -> None:
        with self._lock:
            for key, value in counts.items():
                self._counts[key] += value

    # --- lifecycle ------------------------------------------------------------------------------
    def start(self) -> OtlpReceiver:
        if self._thread is None:
            self._thread = threading.Thread(target=self._expire_loop, name="otlp-expire", daemon=True)
            self._thread.start()
        return self

    def _expire_loop(self) -> None:
        while not self._stop.wait(self._expire_every):
            try:
                self.count(decisions=len(self.decisions.expire()))
                self.recorders.reap()
            except Exception:  # the loop must outlive one bad trace or recorder
                log.exception("expiring held traces or idle recorders failed")

    def shutdown(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        self.count(decisions=len(self.decisions.drain()))

    # --- one request ----------------------------------------------------------------------------
    def admit(self, content_type: str) -> Answer | None:
        """None, or the 429 to answer when the recorders' backlog is over ``max_backlog``."""
        self.count(requests=1)
        backlog = self.recorders.outstanding()
        if backlog < self.max_backlog:
            return None
        return self.refuse(
            refusal(
                429,
                RESOURCE_EXHAUSTED,
                f"{backlog} captures are waiting for delivery; retry",
                content_type,
                **{"Retry-After": "2"},
            )
        )

    def take(self, size: int) -> None:
        """Count ``size`` more body bytes held; :class:`BodyRefused` (503) past ``max_receiving_bytes``."""
        with self._lock:
            if self._receiving + size > self.max_receiving_bytes:
                raise BodyRefused(503, "the receiver is busy receiving other requests; retry")
            self._receiving += size

    def release(self, size: int) -> None:
        with self._lock:
            self._receiving -= size

    def refuse(self, answer: Answer) -> Answer:
        self.count(rejected=1)
        return answer

    def accept(self, body: bytes, content_type: str, sender: Sender) -> Answer:
        """Decode, check and record one request's body (inflated already); see the module docstring."""
        answer_type = JSON if content_type == JSON else PROTOBUF
        try:
            spans = spans_of(decode_request(body, content_type))  # the whole request, checked
        except MalformedRequest as exc:
            return self.refuse(refusal(400, INVALID_ARGUMENT, str(exc), answer_type))
        kept, why = [], ""
        fixed = self.recorders.agent_id
        for span in spans:
            agent = agent_of_span(span, fixed)
            if not agent.isprintable():
                why = "an agent id (service.name) holds control characters"
            elif not sender.may_send_for(agent):
                why = f"{sender.credential} may not send for agent {agent!r}"
            else:
                kept.append(span)
        rejected = len(spans) - len(kept)
        if spans and not kept:
            self.count(rejected_spans=rejected)
            return self.refuse(refusal(403, PERMISSION_DENIED, f"every span was refused: {why}", answer_type))
        try:
            recorded = self.decisions.add(kept)
        except Exception:  # SpanDecisions records defensively; this is a last line of defence
            log.exception("recording %d spans failed", len(kept))
            return self.refuse(refusal(500, INTERNAL, "the receiver failed to record the spans", answer_type))
        self.count(spans=len(kept), decisions=len(recorded), rejected_spans=rejected)
        response = ExportTraceServiceResponse()
        if rejected:
            response.partial_success.rejected_spans = rejected
            response.partial_success.error_message = f"{rejected} span(s) refused: {why}"
        if answer_type == JSON:
            payload = {}
            if rejected:
                payload["partialSuccess"] = {
                    "rejectedSpans": str(rejected),
                    "errorMessage": response.partial_success.error_message,
                }
            return Answer(200, json.dumps(payload).encode() if payload else b"{}", JSON)
        return Answer(200, response.SerializeToString(), PROTOBUF)

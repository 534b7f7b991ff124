"""The OTLP/HTTP trace receiver: ``POST /v1/traces``, protobuf or JSON, into decisions.

Standard library HTTP (``http.server.ThreadingHTTPServer``, one thread per connection): the
receiver needs one route, and the services extra carries no ASGI server. Per request:

1. the route (``/v1/traces``, else 404), the method (POST, else 405), the content type
   (``application/x-protobuf`` or ``application/json``, else 415), a ``Content-Length`` (else 411)
   within ``max_body_bytes`` (else 413, unread), ``Content-Encoding`` gzip or none (else 415);
2. the whole body is read, inflated (bounded by the same limit), decoded and every span checked
   (:mod:`.decode`); anything wrong is 400 with the reason, and nothing of the request is recorded;
3. the spans go to :class:`~producers.integrations.genai_spans.SpanDecisions`, which records the
   decisions of every trace now whole; the answer is an empty ``ExportTraceServiceResponse``
   (200) in the request's encoding.

Error bodies are a ``google.rpc.Status`` (code and message) in the request's encoding, as the OTLP
specification asks; an OTLP exporter logs its message.
"""

from __future__ import annotations

import json
import logging
import threading
import zlib
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from consumers.otlp.decode import JSON, PROTOBUF, MalformedRequest, decode_request, spans_of
from producers.integrations.genai_spans import SpanDecisions

__all__ = ["DEFAULT_MAX_BODY_BYTES", "TRACES_PATH", "OtlpReceiver", "ReceiverStats"]

log = logging.getLogger(__name__)

TRACES_PATH = "/v1/traces"
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
_INVALID_ARGUMENT, _INTERNAL = 3, 13  # google.rpc.Code


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
class ReceiverStats:
    requests: int
    rejected: int
    spans: int
    decisions: int


class _Limited(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _inflate(body: bytes, limit: int) -> bytes:
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error as exc:
        raise MalformedRequest(f"Content-Encoding gzip, but the body is not gzip: {exc}") from None
    if len(out) > limit or inflater.unconsumed_tail:
        raise _Limited(413, f"the inflated body is larger than {limit} bytes")
    return out


class OtlpReceiver:
    """See the module docstring. ``serve_forever`` in the caller's thread, or ``start`` a thread;
    ``shutdown`` stops serving and records every trace still held."""

    def __init__(
        self,
        decisions: SpanDecisions,
        *,
        host: str = "127.0.0.1",
        port: int = 4318,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        expire_every: float = 1.0,
    ) -> None:
        self.decisions = decisions
        self.max_body_bytes = max_body_bytes
        self._lock = threading.Lock()
        self._counts = {"requests": 0, "rejected": 0, "spans": 0, "decisions": 0}
        self._server = ThreadingHTTPServer((host, port), _handler_for(self))
        self._server.daemon_threads = True
        self._stop = threading.Event()
        self._expire_every = expire_every
        self._threads: list[threading.Thread] = []

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://{host}:{port}{TRACES_PATH}"

    @property
    def stats(self) -> ReceiverStats:
        with self._lock:
            return ReceiverStats(**self._counts)

    def _count(self, **counts: int) -> None:
        with self._lock:
            for key, value in counts.items():
                self._counts[key] += value

    def _expire_loop(self) -> None:
        while not self._stop.wait(self._expire_every):
            self._count(decisions=len(self.decisions.expire()))

    def serve_forever(self) -> None:
        expiry = threading.Thread(target=self._expire_loop, name="otlp-expire", daemon=True)
        expiry.start()
        self._threads.append(expiry)
        self._server.serve_forever(poll_interval=0.2)

    def start(self) -> OtlpReceiver:
        thread = threading.Thread(target=self.serve_forever, name="otlp-receiver", daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def shutdown(self) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
        for thread in self._threads:
            thread.join(5)
        self._count(decisions=len(self.decisions.drain()))

    # --- one request --------------------------------------------------------------------------------
    def handle(self, *, path: str, headers: Any, read: Any) -> tuple[int, bytes, str]:
        """(status, body, content type) for one POST; ``read(n)`` reads the request body."""
        self._count(requests=1)
        content_type = (headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        answer_type = JSON if content_type == JSON else PROTOBUF
        try:
            if path.split("?", 1)[0] != TRACES_PATH:
                raise _Limited(404, f"no such path {path!r}; OTLP traces go to {TRACES_PATH}")
            if content_type not in (PROTOBUF, JSON):
                raise _Limited(
                    415, f"Content-Type must be {PROTOBUF} or {JSON}, got {content_type or 'none'!r}"
                )
            length_header = headers.get("Content-Length")
            if length_header is None:
                raise _Limited(411, "a Content-Length is required")
            try:
                length = int(length_header)
            except ValueError:
                raise MalformedRequest(f"Content-Length is not a number: {length_header!r}") from None
            if length < 0:
                raise MalformedRequest(f"Content-Length is negative: {length}")
            if length > self.max_body_bytes:
                raise _Limited(413, f"the body ({length} bytes) is larger than {self.max_body_bytes} bytes")
            body = read(length)
            if len(body) != length:
                raise MalformedRequest(f"the body ended after {len(body)} of {length} bytes")
            encoding = (headers.get("Content-Encoding") or "identity").strip().lower()
            if encoding == "gzip":
                body = _inflate(body, self.max_body_bytes)
            elif encoding != "identity":
                raise _Limited(415, f"Content-Encoding {encoding!r} is not supported (gzip or none)")
            spans = spans_of(decode_request(body, content_type))  # the whole request, checked
        except MalformedRequest as exc:
            self._count(rejected=1)
            return 400, status_body(_INVALID_ARGUMENT, str(exc), answer_type), answer_type
        except _Limited as exc:
            self._count(rejected=1)
            return exc.status, status_body(_INVALID_ARGUMENT, str(exc), answer_type), answer_type
        try:
            recorded = self.decisions.add(spans)
        except Exception:  # SpanDecisions records defensively; this is a last line of defence
            log.exception("recording %d spans failed", len(spans))
            return (
                500,
                status_body(_INTERNAL, "the receiver failed to record the spans", answer_type),
                answer_type,
            )
        self._count(spans=len(spans), decisions=len(recorded))
        if answer_type == JSON:
            return 200, b"{}", JSON
        return 200, ExportTraceServiceResponse().SerializeToString(), PROTOBUF


def _handler_for(receiver: OtlpReceiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as exporters pool connections

        def do_POST(self) -> None:
            status, body, content_type = receiver.handle(
                path=self.path, headers=self.headers, read=self.rfile.read
            )
            if status in (411, 413):
                self.close_connection = True  # the body was not read
            self._answer(status, body, content_type)

        def do_GET(self) -> None:
            self._answer(405, b"", "text/plain", allow="POST")

        do_PUT = do_DELETE = do_PATCH = do_GET

        def _answer(self, status: int, body: bytes, content_type: str, *, allow: str | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            if allow is not None:
                self.send_header("Allow", allow)
                self.close_connection = True
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("%s - %s", self.address_string(), format % args)

    return Handler

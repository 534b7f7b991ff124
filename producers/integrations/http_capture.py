"""Capture at the HTTP layer: an ``httpx2`` transport wrapper that records every exchange's bytes.

``openai`` (>= 3) and ``anthropic`` (>= 2) send every model call through an ``httpx2`` client.
:func:`wrap_http_client` puts a pass-through transport around that client's own transports and
hands one :class:`Exchange` per HTTP attempt to a callback: the request body exactly as sent, the
response body exactly as received (a streamed response is teed chunk by chunk while the SDK reads
it, never read ahead), status, timing, and which attempt of one logical call it was.

The contract:

* **Nothing sent or received changes.** The request body is the one the client already holds (a
  body not yet read is teed as the inner transport sends it); every response chunk reaches the SDK
  as the inner transport produced it, in the same order, with the same errors.
* **No credential enters an Exchange.** Headers are kept by allow-list (:data:`SAFE_REQUEST_HEADERS`,
  :data:`SAFE_RESPONSE_HEADERS` and the ``x-stainless-`` / rate-limit prefixes); everything else —
  Authorization, x-api-key, api-key, cookies, proxy credentials, organization and project ids,
  any custom header — is dropped. The query string is kept only when every parameter name is in
  :data:`SAFE_QUERY_PARAMS` (``api-version`` …); the origin never carries userinfo. An error is
  recorded by exception type only, since messages can quote URLs.
* **The caller never pays for a failure here.** The callback runs on the caller's thread (the event
  loop, for async) when the response stream is closed; its exceptions, and any failure of the
  capture itself, are caught, counted (:func:`capture_stats`) and logged, never raised.
* **Retries are attempts of one call.** The SDKs retry from the same thread or asyncio task, with
  the same body to the same URL, and mark the request ``x-stainless-retry-count: n``. An exchange
  continues the previous exchange of its thread/task (same ``call_id``, ``attempt + 1``) when both
  have the same method, origin, path and body bytes and either the request carries a retry count
  > 0, or — without that header (a plain httpx2 client) — the previous attempt failed the way
  clients retry (no response, 408, 409, 429, >= 500). A retry count of 0 always opens a new call,
  so sending the same body twice on purpose is two calls.
"""

from __future__ import annotations

import hashlib
import importlib
import itertools
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from types import TracebackType
from typing import Any, Self, TypeVar

try:
    import httpx2
except ImportError as exc:  # the SDK extras bring it
    raise ImportError(
        "blackbox's HTTP capture needs httpx2: pip install 'agent-blackbox[openai]' "
        "or 'agent-blackbox[anthropic]'"
    ) from exc

from producers.clock import Clock, system_clock

__all__ = [
    "SAFE_QUERY_PARAMS",
    "SAFE_REQUEST_HEADERS",
    "SAFE_RESPONSE_HEADERS",
    "CaptureStats",
    "Exchange",
    "OnExchange",
    "anthropic_async_http_client",
    "anthropic_http_client",
    "capture_stats",
    "openai_async_http_client",
    "openai_http_client",
    "wrap_http_client",
]

log = logging.getLogger(__name__)

SAFE_REQUEST_HEADERS = frozenset(
    {
        "accept",
        "content-type",
        "content-length",
        "user-agent",
        "anthropic-version",
        "anthropic-beta",
        "openai-beta",
        "openai-version",
    }
)
"""Request headers an Exchange keeps, besides the SDKs' ``x-stainless-*`` telemetry."""

SAFE_RESPONSE_HEADERS = frozenset(
    {
        "content-type",
        "content-encoding",
        "content-length",
        "retry-after",
        "retry-after-ms",
        "x-should-retry",
        "x-request-id",
        "request-id",
        "openai-processing-ms",
        "openai-version",
        "openai-model",
    }
)
"""Response headers an Exchange keeps, besides ``x-ratelimit-*`` / ``anthropic-ratelimit-*``."""

SAFE_QUERY_PARAMS = frozenset({"api-version", "beta", "limit", "order", "after", "before", "include[]"})
"""Query parameters that carry no secret; any other name drops the whole query string."""

_SAFE_REQUEST_PREFIXES = ("x-stainless-",)
_SAFE_RESPONSE_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-")
_RETRY_COUNT = "x-stainless-retry-count"
_RETRYABLE_STATUS = frozenset({408, 409, 429})


@dataclass(frozen=True)
class Exchange:
    """One HTTP attempt as it crossed the wire, credentials removed.

    ``request_body`` and ``response_body`` are the exact bytes (the response still content-encoded
    if the server compressed it; :meth:`decoded_response_body` undoes that). For a streamed (SSE)
    response ``response_body`` is the raw event stream as received, for a later step to parse.
    ``eof`` says whether the body was read to its end before the stream closed: the ``openai`` SDK
    stops at ``data: [DONE]`` and closes without reading the end of the chunked body, so a complete
    OpenAI stream may show ``eof=False``; completeness is the parser's call. ``call_id`` is shared
    by every attempt of one logical call (``attempt`` counts from 1).
    """

    call_id: str
    attempt: int
    method: str
    origin: str
    path: str
    query: str
    query_dropped: bool
    request_headers: tuple[tuple[str, str], ...]
    request_body: bytes = field(repr=False)
    status: int | None
    response_headers: tuple[tuple[str, str], ...]
    response_body: bytes = field(repr=False)
    streamed: bool
    eof: bool
    error: str | None
    started_at: datetime
    headers_seconds: float
    total_seconds: float

    # Hashed on first use, so the caller's thread only collects bytes; a recorder hashes on its worker.
    @cached_property
    def request_sha256(self) -> str:
        return _sha256(self.request_body)

    @cached_property
    def response_sha256(self) -> str:
        return _sha256(self.response_body)

    def header(self, name: str, *, response: bool = False) -> str | None:
        """The first kept header of that (case-insensitive) name, or None."""
        wanted = name.lower()
        pairs = self.response_headers if response else self.request_headers
        return next((value for key, value in pairs if key == wanted), None)

    def decoded_response_body(self) -> bytes:
        """The response body with its ``content-encoding`` (gzip, deflate, br, zstd) undone."""
        encoding = self.header("content-encoding", response=True)
        if not encoding:
            return self.response_body
        return httpx2.Response(
            200, headers={"content-encoding": encoding}, content=self.response_body
        ).content


OnExchange = Callable[[Exchange], None]


@dataclass(frozen=True)
class CaptureStats:
    """Counters of one wrapped client since it was wrapped."""

    exchanges: int
    callback_errors: int
    capture_errors: int


@dataclass(frozen=True)
class _Lane:
    """The previous exchange of one thread or asyncio task, to recognise its retries."""

    target: tuple[str, str, str]
    body: bytes
    call_id: str
    attempt: int
    retryable: bool


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _kept_headers(
    raw: list[tuple[bytes, bytes]], names: frozenset[str], prefixes: tuple[str, ...]
) -> tuple[tuple[str, str], ...]:
    kept = []
    for key, value in raw:
        name = key.decode("latin-1").lower()
        if name in names or name.startswith(prefixes):
            kept.append((name, value.decode("latin-1")))
    return tuple(kept)


def _origin(url: httpx2.URL) -> str:
    port = f":{url.port}" if url.port is not None else ""
    return f"{url.scheme}://{url.host}{port}"


def _query(url: httpx2.URL) -> tuple[str, bool]:
    if not url.query:
        return "", False
    if all(name in SAFE_QUERY_PARAMS for name in url.params):
        return url.query.decode("ascii", "replace"), False
    return "", True


def _first(pairs: tuple[tuple[str, str], ...], name: str) -> str | None:
    return next((value for key, value in pairs if key == name), None)


def _retry_count(kept_headers: tuple[tuple[str, str], ...]) -> int | None:
    value = _first(kept_headers, _RETRY_COUNT)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


class _Attempt:
    """One attempt in flight: what was sent, then what came back, then one Exchange delivered."""

    def __init__(self, capture: _Capture, request: httpx2.Request) -> None:
        self._capture = capture
        self._request = request
        self._started_at = capture.clock()
        self._start = time.perf_counter()
        self._headers_at = self._start
        self._status: int | None = None
        self._response_headers: tuple[tuple[str, str], ...] = ()
        self._streamed = False
        self._chunks: list[bytes] = []
        self._eof = False
        self._error: str | None = None
        self._done = False
        self._call: tuple[str, int] | None = None
        self.request_headers = _kept_headers(
            request.headers.raw, SAFE_REQUEST_HEADERS, _SAFE_REQUEST_PREFIXES
        )
        self._body_chunks: list[bytes] | None = None
        try:
            self._body: bytes | None = request.content
        except httpx2.RequestNotRead:
            # A streamed upload: tee it as the transport sends it rather than reading it here.
            self._body = None
            self._body_chunks = []

    @property
    def body_chunks(self) -> list[bytes] | None:
        return self._body_chunks

    @property
    def request(self) -> httpx2.Request:
        return self._request

    def responded(self, response: httpx2.Response) -> None:
        """The inner transport returned a response (its body not read yet); never raises."""
        try:
            self._headers_at = time.perf_counter()
            self._status = response.status_code
            self._response_headers = _kept_headers(
                response.headers.raw, SAFE_RESPONSE_HEADERS, _SAFE_RESPONSE_PREFIXES
            )
            content_type = _first(self._response_headers, "content-type") or ""
            self._streamed = content_type.lower().startswith("text/event-stream")
        except Exception:
            self._capture.count_capture_error("recording a response")
        self._capture.advance_lane(self, retryable=self._retryable())

    def failed(self, exc: BaseException) -> None:
        """Sending, or reading the body, raised ``exc`` (the caller gets it unchanged); never raises."""
        self._error = type(exc).__qualname__
        if self._status is None:
            self._headers_at = time.perf_counter()
            self._capture.advance_lane(self, retryable=True)

    def loaded(self, response: httpx2.Response) -> None:
        """A transport that built its response from bytes (a mock, an in-process app): no stream to tee."""
        try:
            self._chunks.append(response.content)
            self._eof = True
        except Exception:
            self._capture.count_capture_error("reading a loaded response")
        self.finish()

    def chunk(self, data: bytes) -> None:
        self._chunks.append(data)

    def reached_eof(self) -> None:
        self._eof = True

    def _retryable(self) -> bool:
        status = self._status
        return status is None or status >= 500 or status in _RETRYABLE_STATUS

    def body(self) -> bytes:
        if self._body is None:
            self._body = b"".join(self._body_chunks or ())
        return self._body

    def grouped(self, call_id: str, number: int) -> None:
        self._call = (call_id, number)

    def finish(self) -> None:
        """Build the Exchange and deliver it, once; never raises."""
        if self._done:
            return
        self._done = True
        try:
            exchange = self._exchange()
        except Exception:
            self._capture.count_capture_error("building an exchange")
            return
        self._capture.deliver(exchange)

    def _exchange(self) -> Exchange:
        request = self._request
        body = self.body()
        call_id, attempt = self._call if self._call is not None else (self._capture.new_call_id(), 1)
        query, dropped = _query(request.url)
        response_body = b"".join(self._chunks)
        return Exchange(
            call_id=call_id,
            attempt=attempt,
            method=request.method,
            origin=_origin(request.url),
            path=request.url.path,
            query=query,
            query_dropped=dropped,
            request_headers=self.request_headers,
            request_body=body,
            status=self._status,
            response_headers=self._response_headers,
            response_body=response_body,
            streamed=self._streamed,
            eof=self._eof,
            error=self._error,
            started_at=self._started_at,
            headers_seconds=self._headers_at - self._start,
            total_seconds=time.perf_counter() - self._start,
        )


class _Capture:
    """State shared by the sync and async wrappers of one client: callback, counters, lanes."""

    def __init__(self, on_exchange: OnExchange, clock: Clock) -> None:
        self.on_exchange = on_exchange
        self.clock = clock
        self._lock = threading.Lock()
        self._exchanges = 0
        self._callback_errors = 0
        self._capture_errors = 0
        self._call_prefix = uuid.uuid4().hex[:12]
        self._call_numbers = itertools.count(1)
        # Per thread / asyncio task: the previous exchange, whose retries continue its call.
        self._lane: ContextVar[_Lane | None] = ContextVar(f"blackbox_http_lane_{id(self)}", default=None)

    def begin(self, request: httpx2.Request) -> _Attempt | None:
        try:
            return _Attempt(self, request)
        except Exception:
            self.count_capture_error("starting an exchange")
            return None

    def new_call_id(self) -> str:
        return f"{self._call_prefix}-{next(self._call_numbers)}"

    def advance_lane(self, attempt: _Attempt, *, retryable: bool) -> None:
        """Assign the attempt to a call when its outcome is known, before the SDK can retry."""
        try:
            request = attempt.request
            target = (request.method, _origin(request.url), request.url.path)
            body = attempt.body()
            previous = self._lane.get()
            retry_count = _retry_count(attempt.request_headers)
            retried = bool(retry_count) or (
                retry_count is None and previous is not None and previous.retryable
            )
            if previous is not None and retried and previous.target == target and previous.body == body:
                call_id, number = previous.call_id, previous.attempt + 1
            else:
                call_id = self.new_call_id()
                number = retry_count + 1 if retry_count else 1
            attempt.grouped(call_id, number)
            self._lane.set(
                _Lane(target=target, body=body, call_id=call_id, attempt=number, retryable=retryable)
            )
        except Exception:
            self.count_capture_error("grouping attempts")

    def deliver(self, exchange: Exchange) -> None:
        with self._lock:
            self._exchanges += 1
        try:
            self.on_exchange(exchange)
        except Exception:
            with self._lock:
                self._callback_errors += 1
            log.warning(
                "blackbox: the exchange callback raised; the model call was not affected", exc_info=True
            )

    def count_capture_error(self, what: str) -> None:
        with self._lock:
            self._capture_errors += 1
        log.warning(
            "blackbox: HTTP capture failed while %s; the model call was not affected", what, exc_info=True
        )

    def stats(self) -> CaptureStats:
        with self._lock:
            return CaptureStats(
                exchanges=self._exchanges,
                callback_errors=self._callback_errors,
                capture_errors=self._capture_errors,
            )


class _SyncRequestTee(httpx2.SyncByteStream):
    def __init__(self, inner: httpx2.SyncByteStream, sink: list[bytes]) -> None:
        self._inner = inner
        self._sink = sink

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._inner:
            self._sink.append(chunk)
            yield chunk

    def close(self) -> None:
        self._inner.close()


class _AsyncRequestTee(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, sink: list[bytes]) -> None:
        self._inner = inner
        self._sink = sink

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            self._sink.append(chunk)
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class _SyncResponseTee(httpx2.SyncByteStream):
    def __init__(self, inner: httpx2.SyncByteStream, attempt: _Attempt) -> None:
        self._inner = inner
        self._attempt = attempt

    def __iter__(self) -> Iterator[bytes]:
        try:
            for chunk in self._inner:
                self._attempt.chunk(chunk)
                yield chunk
        except GeneratorExit:  # the reader stopped early: not a failure
            raise
        except BaseException as exc:
            self._attempt.failed(exc)
            raise
        self._attempt.reached_eof()

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            self._attempt.finish()


class _AsyncResponseTee(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, attempt: _Attempt) -> None:
        self._inner = inner
        self._attempt = attempt

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                self._attempt.chunk(chunk)
                yield chunk
        except GeneratorExit:
            raise
        except BaseException as exc:
            self._attempt.failed(exc)
            raise
        self._attempt.reached_eof()

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        finally:
            self._attempt.finish()


class CapturingTransport(httpx2.BaseTransport):
    """Wraps a sync transport; see the module docstring for the contract."""

    def __init__(self, inner: httpx2.BaseTransport, capture: _Capture) -> None:
        self.inner = inner
        self.capture = capture

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        attempt = self.capture.begin(request)
        if (
            attempt is not None
            and attempt.body_chunks is not None
            and isinstance(request.stream, httpx2.SyncByteStream)
        ):
            request.stream = _SyncRequestTee(request.stream, attempt.body_chunks)
        try:
            response = self.inner.handle_request(request)
        except BaseException as exc:  # a cancelled or interrupted call is evidence too
            if attempt is not None:
                attempt.failed(exc)
                attempt.finish()
            raise
        if attempt is not None:
            attempt.responded(response)
            if response.is_stream_consumed:
                attempt.loaded(response)
            elif isinstance(response.stream, httpx2.SyncByteStream):
                response.stream = _SyncResponseTee(response.stream, attempt)
        return response

    def __enter__(self) -> Self:
        self.inner.__enter__()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc_value: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> None:
        self.inner.__exit__(exc_type, exc_value, traceback)

    def close(self) -> None:
        self.inner.close()


class AsyncCapturingTransport(httpx2.AsyncBaseTransport):
    """Wraps an async transport; see the module docstring for the contract."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, capture: _Capture) -> None:
        self.inner = inner
        self.capture = capture

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        attempt = self.capture.begin(request)
        if (
            attempt is not None
            and attempt.body_chunks is not None
            and isinstance(request.stream, httpx2.AsyncByteStream)
        ):
            request.stream = _AsyncRequestTee(request.stream, attempt.body_chunks)
        try:
            response = await self.inner.handle_async_request(request)
        except BaseException as exc:  # a cancelled or interrupted call is evidence too
            if attempt is not None:
                attempt.failed(exc)
                attempt.finish()
            raise
        if attempt is not None:
            attempt.responded(response)
            if response.is_stream_consumed:
                attempt.loaded(response)
            elif isinstance(response.stream, httpx2.AsyncByteStream):
                response.stream = _AsyncResponseTee(response.stream, attempt)
        return response

    async def __aenter__(self) -> Self:
        await self.inner.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None = None,
        exc_value: BaseException | None = None,
        traceback: TracebackType | None = None,
    ) -> None:
        await self.inner.__aexit__(exc_type, exc_value, traceback)

    async def aclose(self) -> None:
        await self.inner.aclose()


ClientT = TypeVar("ClientT", httpx2.Client, httpx2.AsyncClient)


def wrap_http_client(client: ClientT, on_exchange: OnExchange, *, clock: Clock = system_clock) -> ClientT:
    """Capture every exchange of ``client``; returns the same client, its transports wrapped in place.

    httpx2 has no public way to swap the transport of a built client, and rebuilding one would lose
    its configuration (timeouts, limits, proxies, verify), so the client's own transport and its
    mounted (proxy) transports are wrapped where they are. Wrapping the same client twice is refused.
    """
    capture = _Capture(on_exchange, clock)
    if isinstance(client, httpx2.AsyncClient):
        if isinstance(client._transport, AsyncCapturingTransport):
            raise ValueError("this httpx2.AsyncClient is already wrapped for capture")
        client._transport = AsyncCapturingTransport(client._transport, capture)
        client._mounts = {
            pattern: None if mounted is None else AsyncCapturingTransport(mounted, capture)
            for pattern, mounted in client._mounts.items()
        }
    elif isinstance(client, httpx2.Client):
        if isinstance(client._transport, CapturingTransport):
            raise ValueError("this httpx2.Client is already wrapped for capture")
        client._transport = CapturingTransport(client._transport, capture)
        client._mounts = {
            pattern: None if mounted is None else CapturingTransport(mounted, capture)
            for pattern, mounted in client._mounts.items()
        }
    else:
        raise TypeError(f"expected an httpx2.Client or httpx2.AsyncClient, got {type(client).__name__}")
    return client


def capture_stats(client: httpx2.Client | httpx2.AsyncClient) -> CaptureStats:
    """Exchanges delivered and errors swallowed by a client given to :func:`wrap_http_client`."""
    transport = client._transport
    if not isinstance(transport, CapturingTransport | AsyncCapturingTransport):
        raise ValueError("this client is not wrapped for capture")
    return transport.capture.stats()


def _sdk(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ImportError(f"the {name} SDK is not installed: pip install 'agent-blackbox[{name}]'") from exc


def openai_http_client(
    on_exchange: OnExchange, *, clock: Clock = system_clock, **kwargs: Any
) -> httpx2.Client:
    """``openai.OpenAI(http_client=openai_http_client(cb))``: the SDK's default client, captured."""
    client: httpx2.Client = _sdk("openai").DefaultHttpxClient(**kwargs)
    return wrap_http_client(client, on_exchange, clock=clock)


def openai_async_http_client(
    on_exchange: OnExchange, *, clock: Clock = system_clock, **kwargs: Any
) -> httpx2.AsyncClient:
    """``openai.AsyncOpenAI(http_client=openai_async_http_client(cb))``."""
    client: httpx2.AsyncClient = _sdk("openai").DefaultAsyncHttpxClient(**kwargs)
    return wrap_http_client(client, on_exchange, clock=clock)


def anthropic_http_client(
    on_exchange: OnExchange, *, clock: Clock = system_clock, **kwargs: Any
) -> httpx2.Client:
    """``anthropic.Anthropic(http_client=anthropic_http_client(cb))``."""
    client: httpx2.Client = _sdk("anthropic").DefaultHttpxClient(**kwargs)
    return wrap_http_client(client, on_exchange, clock=clock)


def anthropic_async_http_client(
    on_exchange: OnExchange, *, clock: Clock = system_clock, **kwargs: Any
) -> httpx2.AsyncClient:
    """``anthropic.AsyncAnthropic(http_client=anthropic_async_http_client(cb))``."""
    client: httpx2.AsyncClient = _sdk("anthropic").DefaultAsyncHttpxClient(**kwargs)
    return wrap_http_client(client, on_exchange, clock=clock)

"""Request bodies, read under limits: sized or chunked, never more than a cap, never waited for forever.

uvicorn reads a body only as a route asks for it and has no body timeout, so the limits are here:

- a declared ``Content-Length`` over the cap is refused (413) before a byte is read; a chunked body
  is refused as soon as it passes the cap;
- every chunk must arrive within ``idle_seconds`` and the whole body within ``total_seconds``
  (else 408): a client that announces 16 MB and sends nothing holds a coroutine and a socket for
  seconds, never a thread;
- a client gone mid-body is :class:`ClientGone` (nothing to answer, nothing logged as an error);
- :func:`inflate` undoes ``gzip`` / ``deflate`` under the same cap and a ratio bound (a bomb is 413).
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from starlette.requests import Request

__all__ = ["BodyLimits", "BodyRefused", "ClientGone", "inflate", "read_body"]


class BodyRefused(Exception):
    """The body is refused: ``status`` (400, 408, 413, 415) and a reason for the sender."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class ClientGone(Exception):
    """The client disconnected before its body arrived."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BodyLimits:
    max_bytes: int
    idle_seconds: float = 10.0  # between two chunks
    total_seconds: float = 60.0  # the whole body
    max_inflation_ratio: int = 200


async def read_body(
    request: Request, limits: BodyLimits, *, take: Callable[[int], None] | None = None
) -> bytes:
    """The whole body of ``request`` (see the module docstring). ``take(n)`` is told of every chunk
    before it is kept (a budget shared by requests; it raises :class:`BodyRefused` when spent)."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.strip().isdigit():
            raise BodyRefused(400, f"Content-Length is not a number: {declared[:40]!r}")
        if int(declared) > limits.max_bytes:
            raise BodyRefused(
                413, f"the body ({int(declared)} bytes) is larger than {limits.max_bytes} bytes"
            )
    try:
        async with asyncio.timeout(limits.total_seconds):
            return await _chunks(request, limits, take)
    except TimeoutError:
        raise BodyRefused(408, f"the body did not arrive within {limits.total_seconds:g}s") from None


async def _chunks(request: Request, limits: BodyLimits, take: Callable[[int], None] | None) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        try:
            message = await asyncio.wait_for(request.receive(), limits.idle_seconds)
        except TimeoutError:
            raise BodyRefused(408, f"no body bytes for {limits.idle_seconds:g}s") from None
        if message["type"] == "http.disconnect":
            raise ClientGone()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limits.max_bytes:
            raise BodyRefused(413, f"the body is larger than {limits.max_bytes} bytes")
        if take is not None:
            take(len(chunk))
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def inflate(body: bytes, encoding: str, limits: BodyLimits) -> bytes:
    """``body`` decoded from ``Content-Encoding`` ``encoding`` (gzip, deflate, identity); at most
    ``max_bytes`` and ``max_inflation_ratio`` times the sent size, else 413; unknown codings 415."""
    coding = encoding.strip().lower() or "identity"
    if coding == "identity":
        return body
    if coding in ("gzip", "x-gzip"):
        wbits = 16 + zlib.MAX_WBITS
    elif coding == "deflate":  # zlib-wrapped, as HTTP says; raw deflate too, as some clients send
        wbits = zlib.MAX_WBITS if body[:1] and (body[0] & 0x0F) == 8 else -zlib.MAX_WBITS
    else:
        raise BodyRefused(415, f"Content-Encoding {coding!r} is not supported (gzip, deflate or none)")
    cap = min(limits.max_bytes, max(len(body), 1) * limits.max_inflation_ratio)
    inflater = zlib.decompressobj(wbits)
    try:
        out = inflater.decompress(body, cap + 1)
    except zlib.error as exc:
        raise BodyRefused(400, f"Content-Encoding {coding}, but the body is not {coding}: {exc}") from None
    if len(out) > cap or inflater.unconsumed_tail:
        raise BodyRefused(
            413,
            f"the inflated body is larger than {cap} bytes (at most {limits.max_bytes} bytes and "
            f"{limits.max_inflation_ratio}x the sent size)",
        )
    if not inflater.eof:
        raise BodyRefused(400, f"Content-Encoding {coding}, but the body ends early")
    return out

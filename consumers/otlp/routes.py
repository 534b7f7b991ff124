"""``POST /v1/traces``: the OTLP/HTTP surface of the one application (protobuf or JSON, sized or
chunked, gzip or deflate).

In order, each refusal a ``google.rpc.Status`` in the request's encoding: the sender
(:mod:`.senders`, 401), the content type (415), the backlog (:meth:`OtlpReceiver.admit`: 429 with
``Retry-After``), the body under its limits and the receiver's byte budget
(:mod:`consumers.web.bodies`: 413, 408, 415; 503 with ``Retry-After``), then
:meth:`OtlpReceiver.accept` in one of ``max_decoding`` worker threads. A refusal whose body was not read closes
the connection. A client gone mid-body gets nothing and costs nothing more.
"""

from __future__ import annotations

from anyio import CapacityLimiter, to_thread
from fastapi import APIRouter, Request
from fastapi.responses import Response

from consumers.otlp.decode import JSON, PROTOBUF
from consumers.otlp.receiver import (
    INVALID_ARGUMENT,
    TRACES_PATH,
    UNAUTHENTICATED,
    UNAVAILABLE,
    Answer,
    OtlpReceiver,
    refusal,
)
from consumers.otlp.senders import SenderAuth, SenderRefused
from consumers.web.bodies import BodyRefused, ClientGone, inflate, read_body

__all__ = ["otlp_router"]


def _response(answer: Answer, *, close: bool = False) -> Response:
    headers = dict(answer.headers)
    if close:
        headers["Connection"] = "close"
    return Response(answer.body, status_code=answer.status, media_type=answer.content_type, headers=headers)


def otlp_router(receiver: OtlpReceiver, *, senders: SenderAuth) -> APIRouter:
    router = APIRouter(tags=["otlp"])
    limiter: list[CapacityLimiter] = []  # made in the event loop, on first use

    def decoding() -> CapacityLimiter:
        if not limiter:
            limiter.append(CapacityLimiter(receiver.max_decoding))
        return limiter[0]

    @router.post(TRACES_PATH, include_in_schema=False)
    async def traces(request: Request) -> Response:
        content_type = (request.headers.get("content-type") or "").split(";", 1)[0].strip().lower()
        peer = request.client.host if request.client else ""
        try:
            sender = senders.identify(request.headers.get("authorization"), peer)
        except SenderRefused as exc:
            answer = refusal(401, UNAUTHENTICATED, str(exc), content_type, **{"WWW-Authenticate": "Bearer"})
            receiver.count(requests=1)
            return _response(receiver.refuse(answer), close=True)
        if content_type not in (PROTOBUF, JSON):
            receiver.count(requests=1)
            why = f"Content-Type must be {PROTOBUF} or {JSON}, got {content_type or 'none'!r}"
            return _response(receiver.refuse(refusal(415, INVALID_ARGUMENT, why, content_type)), close=True)
        busy = receiver.admit(content_type)
        if busy is not None:
            return _response(busy, close=True)
        held = 0

        def take(size: int) -> None:
            nonlocal held
            receiver.take(size)
            held += size

        try:
            limits = receiver.limits
            body = await read_body(request, limits, take=take)
            body = inflate(body, request.headers.get("content-encoding") or "", limits)
            answer = await to_thread.run_sync(receiver.accept, body, content_type, sender, limiter=decoding())
        except BodyRefused as exc:
            answer = refusal(
                exc.status, INVALID_ARGUMENT if exc.status < 500 else UNAVAILABLE, exc.reason, content_type
            )
            if exc.status == 503:
                answer = refusal(503, UNAVAILABLE, exc.reason, content_type, **{"Retry-After": "1"})
            return _response(receiver.refuse(answer), close=True)
        except ClientGone:
            receiver.count(rejected=1)
            return Response(status_code=400)
        finally:
            receiver.release(held)
        return _response(answer)

    return router

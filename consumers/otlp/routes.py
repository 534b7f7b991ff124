"""``POST /v1/traces``: the OTLP/HTTP surface of the one application (protobuf or JSON, sized or
chunked, gzip or deflate).

In order, each refusal a ``google.rpc.Status`` in the request's encoding: the sender
(:mod:`.senders`, 401), the content type (415), a place to receive (:meth:`OtlpReceiver.admit`:
503 / 429 with ``Retry-After``), the body under its limits (:mod:`consumers.web.bodies`: 413, 408,
415), then :meth:`OtlpReceiver.accept` in a worker thread. A refusal whose body was not read closes
the connection. A client gone mid-body gets nothing and costs nothing more.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from consumers.otlp.decode import JSON, PROTOBUF
from consumers.otlp.receiver import (
    INVALID_ARGUMENT,
    TRACES_PATH,
    UNAUTHENTICATED,
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
        try:
            limits = receiver.limits
            body = await read_body(request, limits)
            body = inflate(body, request.headers.get("content-encoding") or "", limits)
            answer = await run_in_threadpool(receiver.accept, body, content_type, sender)
        except BodyRefused as exc:
            code = INVALID_ARGUMENT
            return _response(receiver.refuse(refusal(exc.status, code, exc.reason, content_type)), close=True)
        except ClientGone:
            receiver.count(rejected=1)
            return Response(status_code=400)
        finally:
            receiver.done()
        return _response(answer)

    return router

"""``/metrics``, ``/healthz`` and ``/readyz``: the observability surface of the one HTTP application.

- ``/metrics``: the Prometheus text exposition of a registry (the ingest registry wherever ingest or
  the receiver runs in the process);
- ``/healthz``: is the process doing its work? 200 ``ok: ...``, or 503 with the ingest loop's reason
  (:class:`~.health.Health`) when ingest runs here and is stuck;
- ``/readyz``: can it serve? 200 when every dependency answers (the index, the blob store, the
  transport), else 503 naming which did not. Each check runs off the event loop with a deadline.

Every answer is plain text (``/readyz`` JSON) and names no host, path or credential: these routes
are unauthenticated, for a load balancer and a scraper.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.concurrency import run_in_threadpool

from .health import Health

__all__ = ["Check", "observability_router"]

Check = Callable[[], None]  # raises when the dependency does not answer
CHECK_SECONDS = 5.0


def observability_router(
    *, registry: CollectorRegistry, health: Callable[[], Health | None], checks: Mapping[str, Check]
) -> APIRouter:
    """The three routes over ``registry``; ``health()`` is the running ingest loop's (None: no ingest
    here, the process is healthy while it answers); ``checks`` the dependencies ``/readyz`` asks."""
    router = APIRouter(tags=["observability"])

    @router.get("/metrics", include_in_schema=False)
    async def metrics() -> Response:
        body = await run_in_threadpool(generate_latest, registry)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    @router.get("/healthz", include_in_schema=False)
    async def healthz() -> PlainTextResponse:
        loop = health()
        if loop is None:
            return PlainTextResponse("ok\n")
        status = loop.status()
        return PlainTextResponse(status.reason + "\n", status_code=200 if status.ok else 503)

    @router.get("/readyz", include_in_schema=False)
    async def readyz() -> JSONResponse:
        results = await asyncio.gather(*(_run(check) for check in checks.values()))
        answers = dict(zip(checks, results, strict=True))
        ready = all(answer == "ok" for answer in answers.values())
        return JSONResponse({"ready": ready, "checks": answers}, status_code=200 if ready else 503)

    return router


async def _run(check: Check) -> str:
    try:
        await asyncio.wait_for(run_in_threadpool(check), CHECK_SECONDS)
    except TimeoutError:
        return f"no answer within {CHECK_SECONDS:g}s"
    except Exception as exc:  # any failure is "not ready", named by its kind only
        return f"unavailable ({type(exc).__name__})"
    return "ok"


def dependency_checks(rt: Any, *, index: bool = True) -> dict[str, Check]:
    """``/readyz``'s checks over a runtime: the index answers a query (unless ``index`` is False: a
    process that never opens it, like ``blackbox otlp``), the blob store a lookup, the transport is
    reachable (the spool directory writable, or the Kafka cluster's metadata)."""
    settings = rt.settings

    def index_answers() -> None:
        from consumers.observability.store import index_answers as answers

        answers(rt.index)

    def blob_store() -> None:
        rt.blob_store.exists("readyz/probe")

    def transport() -> None:
        if settings.transport == "spool":
            import os

            spool = settings.resolved_spool_dir
            spool.mkdir(parents=True, exist_ok=True)
            if not os.access(spool, os.W_OK):
                raise PermissionError("the spool directory is not writable")
            return
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": settings.kafka_bootstrap, "log_level": 0})
        if not admin.list_topics(timeout=CHECK_SECONDS - 1).brokers:
            raise ConnectionError("no Kafka broker in the metadata")

    checks: dict[str, Check] = {"index": index_answers} if index else {}
    return {**checks, "blob_store": blob_store, "transport": transport}

"""The one HTTP application, assembled from one runtime: THE place where each surface's router is
included (DESIGN decision 21). A new surface is one line in :func:`http_app`.

``blackbox serve`` includes every enabled surface; ``blackbox otlp`` the receiver and the
observability routes; ``blackbox consume --metrics-listen`` the observability routes alone. All of
them are the same application (:func:`consumers.web.app.build_app`: shared headers, errors and
limits) served by the same server (:mod:`consumers.web.server`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from fastapi import APIRouter, FastAPI

from consumers.web.app import build_app

if TYPE_CHECKING:
    from consumers.app.runtime import Runtime
    from consumers.observability.health import Health
    from consumers.otlp import OtlpService

__all__ = ["Surfaces", "http_app"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Surfaces:
    """Which surfaces one address serves."""

    audit: bool = False
    otlp: bool = False
    observability: bool = True
    index: bool = True  # the process holds the index (``/readyz`` checks it); not ``blackbox otlp``
    console: bool = False  # the browser console (consumers/console/) under /console


def http_app(
    rt: Runtime,
    surfaces: Surfaces,
    *,
    otlp: OtlpService | None = None,
    health: Callable[[], Health | None] = lambda: None,
    clock: Callable[[], datetime] | None = None,
) -> FastAPI:
    """The application serving ``surfaces`` over ``rt``; ``otlp``: the receiver (when ``surfaces.otlp``);
    ``health``: the in-process ingest loop's health, if one runs (``/healthz``)."""
    routers: list[APIRouter] = []
    if surfaces.audit:
        from consumers.audit import audit_router

        routers.append(audit_router(rt, clock=clock))
    if surfaces.otlp:
        if otlp is None:
            raise ValueError("the otlp surface needs its OtlpService")
        routers.append(otlp.router())
    if surfaces.observability:
        from consumers.observability.metrics import INGEST_REGISTRY
        from consumers.observability.routes import dependency_checks, observability_router

        routers.append(
            observability_router(
                registry=INGEST_REGISTRY,
                health=health,
                checks=dependency_checks(rt, index=surfaces.audit or surfaces.index),
            )
        )
    if surfaces.console:
        from consumers.console import console_router

        routers.append(console_router(rt, clock=clock))
    return build_app(routers=routers)

"""``/metrics`` and ``/healthz`` over HTTP, on a daemon thread (``blackbox consume --metrics-listen``).

A small WSGI app on :mod:`wsgiref`: ``/metrics`` is prometheus-client's own exposition app over the
ingest registry; ``/healthz`` answers ``200 ok: ...`` or ``503 <reason>`` from :class:`~.health.Health`.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

from .health import Health
from .metrics import MetricsError

__all__ = ["ListenAddress", "MetricsEndpointError", "MetricsServer", "parse_listen", "serve"]

DEFAULT_HOST = "127.0.0.1"


class MetricsEndpointError(MetricsError):
    """The metrics endpoint's address is malformed, or it cannot listen there."""


@dataclass(frozen=True, slots=True)
class ListenAddress:
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_listen(text: str) -> ListenAddress:
    """``HOST:PORT``, ``[IPv6]:PORT``, or ``PORT`` alone (loopback). Port 0 picks a free one."""
    value = text.strip()
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = DEFAULT_HOST, value
    host = host.removeprefix("[").removesuffix("]") or DEFAULT_HOST
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise MetricsEndpointError(
            f"--metrics-listen wants HOST:PORT (e.g. 127.0.0.1:9464) with a port 0-65535, got {text!r}"
        )
    return ListenAddress(host, int(port))


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes every few seconds are not worth a log line."""


StartResponse = Callable[..., Any]


def wsgi_app(
    *, registry: CollectorRegistry, health: Health
) -> Callable[[dict[str, Any], StartResponse], Iterable[bytes]]:
    """The WSGI app behind :func:`serve`."""
    metrics_app = make_wsgi_app(registry)

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/metrics":
            return metrics_app(environ, start_response)  # type: ignore[no-any-return]
        if path == "/healthz":
            status = health.status()
            code = "200 OK" if status.ok else "503 Service Unavailable"
            return _text(start_response, code, status.reason)
        return _text(start_response, "404 Not Found", "not found: try /metrics or /healthz")

    return app


def _text(start_response: StartResponse, status: str, body: str) -> list[bytes]:
    data = (body + "\n").encode()
    start_response(
        status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(data)))]
    )
    return [data]


class MetricsServer:
    """A running endpoint; :attr:`address` holds the port actually bound. Stop with :meth:`close`."""

    def __init__(self, httpd: WSGIServer) -> None:
        self._httpd = httpd
        host, port = httpd.server_address[:2]
        self.address = ListenAddress(str(host), int(port))
        self._thread = threading.Thread(target=httpd.serve_forever, name="blackbox-metrics", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve(address: ListenAddress, *, registry: CollectorRegistry, health: Health) -> MetricsServer:
    """Start serving ``/metrics`` and ``/healthz`` on ``address``."""
    server_class = _Server6 if ":" in address.host else _Server
    try:
        httpd = make_server(
            address.host,
            address.port,
            wsgi_app(registry=registry, health=health),
            server_class=server_class,
            handler_class=_QuietHandler,
        )
    except OSError as exc:
        raise MetricsEndpointError(f"cannot serve metrics on {address}: {exc.strerror or exc}") from exc
    return MetricsServer(httpd)

"""uvicorn around the one application: in the foreground (``blackbox serve``, ``blackbox otlp``) or in a
thread (``consume --metrics-listen``, tests, benchmarks), on one or several addresses.

The connection limits live here, because only the server sees connections: at most
``limit_concurrency`` at once (more are answered 503 without reaching a route), idle keep-alive
connections closed after ``timeout_keep_alive`` seconds, a connection whose request headers have not
all arrived within ``HEADERS_SECONDS`` closed (uvicorn would wait forever: a few hundred silent
sockets would take every place), and proxy headers ignored (an address is the peer's, never what a
request says it is). A body that stops arriving is the routes' to time out
(:mod:`consumers.web.bodies`): uvicorn has no body timeout of its own.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from schemas.errors import BlackboxError

__all__ = ["Listen", "ListenRefused", "WebServer", "parse_listen", "serve_forever"]

MAX_CONNECTIONS = 512
KEEP_ALIVE_SECONDS = 5
HEADERS_SECONDS = 10.0


class ListenRefused(BlackboxError):
    """A listen address is malformed, or the server cannot listen there."""


@dataclass(frozen=True, slots=True)
class Listen:
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_listen(value: str, *, option: str = "--listen", default_host: str | None = None) -> Listen:
    """``HOST:PORT`` or ``[IPv6]:PORT`` (port 0 picks a free one); ``PORT`` alone when ``default_host``
    is given. :class:`ListenRefused` naming ``option`` otherwise."""
    text = value.strip()
    host, sep, port = text.rpartition(":")
    if not sep and default_host is not None:
        host, port = default_host, text
    host = host.removeprefix("[").removesuffix("]")
    if not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ListenRefused(f"{option} wants HOST:PORT with a port 0-65535, got {value!r}")
    return Listen(host, int(port))


def _headers_deadline(seconds: float) -> type:
    """uvicorn's h11 protocol, closing a connection that has not sent a whole request's headers within
    ``seconds`` of connecting, or of its last answer while more bytes sit half a request."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeadersDeadline(H11Protocol):
        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def _arm(self) -> None:
            self._deadline = self.loop.call_later(seconds, self._check, self.cycle)

        def _check(self, seen: Any) -> None:
            if self.transport.is_closing():
                return
            waiting = self.cycle is None or self.cycle.response_complete
            if waiting and self.cycle is seen and (seen is None or self.conn.trailing_data[0]):
                self.transport.close()  # no request began since the last check: its headers are overdue
                return
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._deadline.cancel()
            super().connection_lost(exc)

    return HeadersDeadline


def _config(
    app: Any, listen: Listen, *, limit_concurrency: int, headers_seconds: float = HEADERS_SECONDS
) -> Any:
    import uvicorn

    return uvicorn.Config(
        app,
        host=listen.host,
        port=listen.port,
        log_level="warning",
        access_log=False,  # the access log that counts is blackbox's own, written by the gate
        server_header=False,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        limit_concurrency=limit_concurrency,
        proxy_headers=False,  # X-Forwarded-For is what a request says about itself
        http=_headers_deadline(headers_seconds),
        h11_max_incomplete_event_size=64 * 1024,  # request line and headers
        lifespan="off",
    )


def bind(listen: Listen) -> socket.socket:
    """A listening socket on ``listen``, bound here so a refusal is an error naming the address (uvicorn
    would log it and exit the process)."""
    family = socket.AF_INET6 if ":" in listen.host else socket.AF_INET
    try:
        return socket.create_server((listen.host, listen.port), family=family, backlog=2048)
    except OSError as exc:
        raise ListenRefused(f"cannot serve HTTP on {listen}: {exc.strerror or exc}") from exc


def _server(
    app: Any, listen: Listen, *, limit_concurrency: int, headers_seconds: float = HEADERS_SECONDS
) -> Any:
    import uvicorn

    class Server(uvicorn.Server):
        @contextmanager
        def capture_signals(self) -> Iterator[None]:  # the command owns SIGINT / SIGTERM (stop_all)
            yield

    return Server(_config(app, listen, limit_concurrency=limit_concurrency, headers_seconds=headers_seconds))


class WebServer:
    """An application served on one address from a thread; :attr:`url` once :meth:`start` returned."""

    def __init__(
        self,
        app: Any,
        listen: Listen | None = None,
        *,
        limit_concurrency: int = MAX_CONNECTIONS,
        headers_seconds: float = HEADERS_SECONDS,
    ) -> None:
        self.listen = listen or Listen("127.0.0.1", 0)
        self._server = _server(
            app, self.listen, limit_concurrency=limit_concurrency, headers_seconds=headers_seconds
        )
        self._socket: socket.socket | None = None
        self._thread = threading.Thread(target=self._run, name="blackbox-http", daemon=True)
        self._error: BaseException | None = None
        self.url = ""

    def _run(self) -> None:
        try:
            asyncio.run(self._server.serve(sockets=[self._socket]))
        except BaseException as exc:  # reported by start(); the thread must not print it
            self._error = exc

    def start(self, timeout: float = 20.0) -> WebServer:
        self._socket = bind(self.listen)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                why = f": {self._error}" if self._error else ""
                raise ListenRefused(f"cannot serve HTTP on {self.listen}{why}")
            time.sleep(0.02)
        host, port = self._server.servers[0].sockets[0].getsockname()[:2]
        self.url = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        if self._socket is not None:
            self._socket.close()

    def __enter__(self) -> WebServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass(frozen=True, slots=True)
class Served:
    """One address and the application it serves."""

    listen: Listen
    app: Any


def serve_forever(served: Sequence[Served], *, stopped: threading.Event, started: Any = None) -> None:
    """Serve every address in this thread until ``stopped`` is set (the command sets it on SIGINT /
    SIGTERM); ``started(urls)`` is called once all listen. :class:`ListenRefused` if one cannot."""
    sockets: list[socket.socket] = []
    try:
        for s in served:
            sockets.append(bind(s.listen))
        servers = [_server(s.app, s.listen, limit_concurrency=MAX_CONNECTIONS) for s in served]
        asyncio.run(_serve(servers, sockets, stopped=stopped, started=started))
    finally:
        for sock in sockets:
            sock.close()


async def _serve(
    servers: list[Any], sockets: list[socket.socket], *, stopped: threading.Event, started: Any
) -> None:
    tasks = [
        asyncio.create_task(srv.serve(sockets=[sock])) for srv, sock in zip(servers, sockets, strict=True)
    ]
    while not all(server.started for server in servers) and not any(task.done() for task in tasks):
        await asyncio.sleep(0.02)
    if started is not None and all(server.started for server in servers):
        started([_url(server) for server in servers])
    while not stopped.is_set() and not any(task.done() for task in tasks):
        await asyncio.sleep(0.1)
    for server in servers:
        server.should_exit = True
    await asyncio.gather(*tasks, return_exceptions=True)


def _url(server: Any) -> str:
    host, port = server.servers[0].sockets[0].getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

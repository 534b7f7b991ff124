"""uvicorn around the audit application: in the foreground (``blackbox serve``) or in a thread (tests,
benchmarks), on a loopback address unless told otherwise."""

from __future__ import annotations

import threading
import time
from typing import Any

from schemas.errors import ContractError

__all__ = ["AuditServer", "parse_listen", "serve"]


def parse_listen(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8700`` for IPv6); :class:`ContractError` naming ``--listen`` otherwise."""
    host, sep, port = value.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ContractError(f"{value!r} is not HOST:PORT", path="--listen")
    return host, int(port)


def _config(app: Any, host: str, port: int) -> Any:
    import uvicorn

    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        access_log=False,  # the access log that counts is blackbox's own, written by the gate
        server_header=False,
        timeout_keep_alive=5,
        limit_concurrency=512,
    )


def serve(app: Any, *, host: str, port: int) -> None:
    """Serve until SIGINT / SIGTERM."""
    import uvicorn

    uvicorn.Server(_config(app, host, port)).run()


class AuditServer:
    """The application served from a thread; :attr:`url` once :meth:`start` returned."""

    def __init__(self, app: Any, *, host: str = "127.0.0.1", port: int = 0) -> None:
        import uvicorn

        self._server = uvicorn.Server(_config(app, host, port))
        self._thread = threading.Thread(target=self._server.run, name="blackbox-audit", daemon=True)
        self.url = ""

    def start(self, timeout: float = 20.0) -> AuditServer:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the audit server did not start")
            time.sleep(0.02)
        host, port = self._server.servers[0].sockets[0].getsockname()[:2]
        self.url = f"http://{host}:{port}"
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)

    def __enter__(self) -> AuditServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

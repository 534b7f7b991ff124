"""The local HTTP endpoints of the replay tests: the scripted model (OpenAI-compatible) and the live
tools (which sandboxed replays must never reach). Real servers on 127.0.0.1, free ports.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from replay_scripted import ScriptedModel, world_tool

GOLDEN = Path(__file__).resolve().parent / "golden"


class _Server:
    """A ThreadingHTTPServer on 127.0.0.1:<free port> answering POSTs with ``respond(path, body)``."""

    def __init__(self, respond: Callable[[str, bytes], tuple[int, dict[str, Any]]]) -> None:
        self.requests: list[tuple[str, bytes]] = []
        self.headers: list[dict[str, str]] = []
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    outer.requests.append((self.path, body))
                    outer.headers.append({k.lower(): v for k, v in self.headers.items()})
                status, payload = respond(self.path, body)
                data = json.dumps(payload).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


class ModelServer(_Server):
    """The scripted model as an OpenAI-compatible endpoint; unknown models get a 404 like vLLM's."""

    def __init__(self, model: ScriptedModel) -> None:
        self.model = model

        def respond(path: str, body: bytes) -> tuple[int, dict[str, Any]]:
            if path != "/v1/chat/completions":
                return 404, {"error": {"message": f"no route {path}"}}
            request = json.loads(body)
            if request.get("model") not in model.served:
                message = f"The model `{request.get('model')}` does not exist."
                return 404, {
                    "error": {"message": message, "type": "NotFoundError", "code": "model_not_found"}
                }
            return 200, model(request)

        super().__init__(respond)

    @property
    def endpoint(self) -> str:
        return self.url + "/v1"

    def bodies(self) -> list[bytes]:
        return [body for _, body in self.requests]


class ToolServer(_Server):
    """The live tools (the real systems). Sandbox replays must never reach it."""

    def __init__(self) -> None:
        def respond(path: str, body: bytes) -> tuple[int, dict[str, Any]]:
            return 200, world_tool(path.rsplit("/", 1)[-1], json.loads(body or b"{}"))

        super().__init__(respond)

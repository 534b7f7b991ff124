"""A real local HTTP server that speaks three model APIs, for tests of the SDK integrations.

``POST /v1/chat/completions`` (OpenAI Chat Completions), ``POST /v1/responses`` (OpenAI Responses)
and ``POST /v1/messages`` (Anthropic Messages), each plain or streamed (``"stream": true`` in the
body) in the provider's own server-sent-event format: Chat Completions sends bare ``data:`` chunks
ending with ``data: [DONE]``; Responses and Messages send ``event:`` + ``data:`` pairs
(``response.created`` … ``response.completed``; ``message_start`` … ``message_stop``, with a ``ping``).

Replies are scripted: :meth:`ProviderServer.script` queues :class:`Reply` values (text and tool
calls); an empty queue answers :attr:`ProviderServer.default_reply`. A tool call's ``arguments`` is
JSON text sent exactly as given — OpenAI's ``function.arguments`` / Responses' ``arguments`` carry
it as a string, Anthropic's ``tool_use.input`` carries it parsed (and its stream sends the text as
``input_json_delta`` pieces). :meth:`ProviderServer.fail_next` answers the next requests with an
error status (and ``retry-after-ms`` so SDK retries are quick) before any scripted reply.

Every request is recorded as :class:`Received`: method, path with query, headers as received, the
exact body bytes (chunked uploads de-framed), and the response status and entity bytes sent back.
Loopback only, a free port, one thread per connection (HTTP/1.1 keep-alive, as the SDKs pool).
"""

from __future__ import annotations

import gzip
import json
import sys
import threading
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

CREATED = 1_767_225_600
"""A fixed timestamp, so two runs of the same script answer byte-identical replies."""

NON_CANONICAL_ARGUMENTS = '{ "city" :"Paris",  "units":"metric" ,"days": [1, 2 ,3]}'
"""Tool arguments with the spacing a model really emits: not what ``json.dumps`` would write."""


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: str = NON_CANONICAL_ARGUMENTS
    id: str = "call_blackbox_1"


@dataclass(frozen=True)
class Reply:
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    gzip: bool = False
    """Compress a plain (non-streamed) reply with ``content-encoding: gzip``."""


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: tuple[tuple[str, str], ...]
    body: bytes
    status: int
    response_body: bytes

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k.lower() == name.lower()), None)


def _pieces(text: str, count: int = 3) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // count))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _json(value: Any) -> bytes:
    return json.dumps(value).encode()


class _Render:
    """One reply in one wire format: a JSON body, or the list of SSE event bytes."""

    def __init__(self, reply: Reply, model: str) -> None:
        self.reply = reply
        self.model = model

    # -- OpenAI Chat Completions -------------------------------------------------------------
    def chat(self) -> bytes:
        message: dict[str, Any] = {"role": "assistant", "content": self.reply.text or None, "refusal": None}
        if self.reply.tool_calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.reply.tool_calls
            ]
        return _json(
            {
                "id": "chatcmpl-blackbox",
                "object": "chat.completion",
                "created": CREATED,
                "model": self.model,
                "choices": [
                    {"index": 0, "message": message, "logprobs": None, "finish_reason": self._chat_finish()}
                ],
                "usage": {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19},
            }
        )

    def _chat_finish(self) -> str:
        return "tool_calls" if self.reply.tool_calls else "stop"

    def chat_stream(self) -> list[bytes]:
        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            body = {
                "id": "chatcmpl-blackbox",
                "object": "chat.completion.chunk",
                "created": CREATED,
                "model": self.model,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            }
            return b"data: " + _json(body) + b"\n\n"

        events = [chunk({"role": "assistant", "content": "", "refusal": None})]
        events += [chunk({"content": piece}) for piece in _pieces(self.reply.text)]
        for index, call in enumerate(self.reply.tool_calls):
            head = {
                "index": index,
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }
            events.append(chunk({"tool_calls": [head]}))
            events += [
                chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                for piece in _pieces(call.arguments)
            ]
        events.append(chunk({}, self._chat_finish()))
        events.append(b"data: [DONE]\n\n")
        return events

    # -- OpenAI Responses --------------------------------------------------------------------
    def _response(self, status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": "resp_blackbox",
            "object": "response",
            "created_at": CREATED,
            "status": status,
            "model": self.model,
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "error": None,
            "incomplete_details": None,
            "instructions": None,
            "metadata": {},
            "temperature": 1.0,
            "top_p": 1.0,
            "usage": None
            if status != "completed"
            else {
                "input_tokens": 12,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 7,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 19,
            },
        }

    def _output_items(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        if self.reply.text:
            items.append(
                {
                    "type": "message",
                    "id": "msg_blackbox",
                    "status": "completed",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": self.reply.text, "annotations": []}],
                }
            )
        for call in self.reply.tool_calls:
            items.append(
                {
                    "type": "function_call",
                    "id": f"fc_{call.id}",
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": call.arguments,
                    "status": "completed",
                }
            )
        return items

    def responses(self) -> bytes:
        return _json(self._response("completed", self._output_items()))

    def responses_stream(self) -> list[bytes]:
        events: list[bytes] = []

        def event(kind: str, **data: Any) -> None:
            body = {"type": kind, "sequence_number": len(events), **data}
            events.append(f"event: {kind}\n".encode() + b"data: " + _json(body) + b"\n\n")

        event("response.created", response=self._response("in_progress", []))
        event("response.in_progress", response=self._response("in_progress", []))
        for index, item in enumerate(self._output_items()):
            if item["type"] == "message":
                event(
                    "response.output_item.added",
                    output_index=index,
                    item={**item, "status": "in_progress", "content": []},
                )
                part = {"type": "output_text", "text": "", "annotations": []}
                ids = {"item_id": item["id"], "output_index": index, "content_index": 0}
                event("response.content_part.added", **ids, part=part)
                for piece in _pieces(self.reply.text):
                    event("response.output_text.delta", **ids, delta=piece, logprobs=[])
                event("response.output_text.done", **ids, text=self.reply.text, logprobs=[])
                event("response.content_part.done", **ids, part=item["content"][0])
            else:
                event(
                    "response.output_item.added",
                    output_index=index,
                    item={**item, "status": "in_progress", "arguments": ""},
                )
                for piece in _pieces(item["arguments"]):
                    event(
                        "response.function_call_arguments.delta",
                        item_id=item["id"],
                        output_index=index,
                        delta=piece,
                    )
                event(
                    "response.function_call_arguments.done",
                    item_id=item["id"],
                    output_index=index,
                    name=item["name"],
                    arguments=item["arguments"],
                )
            event("response.output_item.done", output_index=index, item=item)
        event("response.completed", response=self._response("completed", self._output_items()))
        return events

    # -- Anthropic Messages ------------------------------------------------------------------
    def _blocks(self) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        if self.reply.text:
            blocks.append({"type": "text", "text": self.reply.text})
        for call in self.reply.tool_calls:
            blocks.append(
                {"type": "tool_use", "id": call.id, "name": call.name, "input": json.loads(call.arguments)}
            )
        return blocks

    def _stop(self) -> str:
        return "tool_use" if self.reply.tool_calls else "end_turn"

    def messages(self) -> bytes:
        return _json(
            {
                "id": "msg_blackbox",
                "type": "message",
                "role": "assistant",
                "model": self.model,
                "content": self._blocks(),
                "stop_reason": self._stop(),
                "stop_sequence": None,
                "usage": {"input_tokens": 12, "output_tokens": 7},
            }
        )

    def messages_stream(self) -> list[bytes]:
        events: list[bytes] = []

        def event(kind: str, **data: Any) -> None:
            events.append(f"event: {kind}\n".encode() + b"data: " + _json({"type": kind, **data}) + b"\n\n")

        start: dict[str, Any] = {
            "id": "msg_blackbox",
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 12, "output_tokens": 1},
        }
        event("message_start", message=start)
        for index, block in enumerate(self._blocks()):
            if block["type"] == "text":
                event("content_block_start", index=index, content_block={"type": "text", "text": ""})
                if index == 0:
                    event("ping")
                for piece in _pieces(block["text"]):
                    event("content_block_delta", index=index, delta={"type": "text_delta", "text": piece})
            else:
                event("content_block_start", index=index, content_block={**block, "input": {}})
                arguments = self.reply.tool_calls[index - (1 if self.reply.text else 0)].arguments
                for piece in _pieces(arguments):
                    event(
                        "content_block_delta",
                        index=index,
                        delta={"type": "input_json_delta", "partial_json": piece},
                    )
            event("content_block_stop", index=index)
        event(
            "message_delta",
            delta={"stop_reason": self._stop(), "stop_sequence": None},
            usage={"output_tokens": 7},
        )
        event("message_stop")
        return events


_ENDPOINTS = {
    "/v1/chat/completions": ("chat", "chat_stream"),
    "/v1/responses": ("responses", "responses_stream"),
    "/v1/messages": ("messages", "messages_stream"),
}


def _error_body(path: str, status: int) -> bytes:
    message = f"scripted failure {status}"
    if path == "/v1/messages":
        kind = "rate_limit_error" if status == 429 else "api_error"
        return _json({"type": "error", "error": {"type": kind, "message": message}})
    return _json({"error": {"message": message, "type": "server_error", "param": None, "code": None}})


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client closing its pooled keep-alive connection is normal, not an error to print.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class ProviderServer:
    """Start with ``with ProviderServer() as server:``; see the module docstring."""

    def __init__(self) -> None:
        self.default_reply = Reply(text="Hello from the local provider.")
        self._lock = threading.Lock()
        self._replies: deque[Reply] = deque()
        self._failures: deque[int] = deque()
        self._received: list[Received] = []
        self._http = _QuietServer(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(
            target=self._http.serve_forever,
            kwargs={"poll_interval": 0.02},
            name="provider-server",
            daemon=True,
        )

    @property
    def url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def openai_base_url(self) -> str:
        return self.url + "/v1"

    @property
    def anthropic_base_url(self) -> str:
        return self.url

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self._replies.extend(replies)

    def fail_next(self, status: int = 500, *, times: int = 1) -> None:
        with self._lock:
            self._failures.extend([status] * times)

    @property
    def received(self) -> list[Received]:
        with self._lock:
            return list(self._received)

    def clear(self) -> None:
        with self._lock:
            self._received.clear()

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(timeout=5)

    def _next(self) -> tuple[int | None, Reply]:
        with self._lock:
            if self._failures:
                return self._failures.popleft(), self.default_reply
            return None, self._replies.popleft() if self._replies else self.default_reply

    def _record(self, received: Received) -> None:
        with self._lock:
            self._received.append(received)


def _handler_for(server: ProviderServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # small writes must not wait for the client's delayed ACK

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _body(self) -> bytes:
            if self.headers.get("transfer-encoding", "").lower() == "chunked":
                parts: list[bytes] = []
                while True:
                    size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass
                        return b"".join(parts)
                    parts.append(self.rfile.read(size))
                    self.rfile.readline()
            return self.rfile.read(int(self.headers.get("content-length") or 0))

        def do_POST(self) -> None:
            body = self._body()
            path = self.path.split("?", 1)[0]
            endpoint = _ENDPOINTS.get(path)
            status, reply = server._next() if endpoint else (404, server.default_reply)
            try:
                request = json.loads(body) if body else {}
            except ValueError:
                request = {}
            headers: list[tuple[str, str]] = [("content-type", "application/json")]
            events: list[bytes] | None = None
            if status is not None or endpoint is None:
                status = status or 404
                payload = _error_body(path, status)
                headers.append(("retry-after-ms", "5"))
            else:
                status = 200
                render = _Render(reply, str(request.get("model", "model-x")))
                if request.get("stream"):
                    events = getattr(render, endpoint[1])()
                    payload = b"".join(events)
                else:
                    payload = getattr(render, endpoint[0])()
                    headers.append(("x-request-id", "req_blackbox"))
                    if reply.gzip:
                        payload = gzip.compress(payload, mtime=0)
                        headers.append(("content-encoding", "gzip"))
            # Recorded before answering: the client may return as soon as the last byte arrives.
            server._record(
                Received(
                    method=self.command,
                    path=self.path,
                    headers=tuple(self.headers.items()),
                    body=body,
                    status=status,
                    response_body=payload,
                )
            )
            if events is None:
                self._send_whole(status, headers, payload)
            else:
                self._send_stream(events)

        def _send_whole(self, status: int, headers: list[tuple[str, str]], payload: bytes) -> None:
            self.send_response(status)
            for key, value in headers:
                self.send_header(key, value)
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            self.wfile.flush()

        def _send_stream(self, events: list[bytes]) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream; charset=utf-8")
            self.send_header("cache-control", "no-cache")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for data in events:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    return Handler

"""HTTP capture under the real ``openai`` and ``anthropic`` SDKs, against the local provider server.

Every API (Chat Completions, Responses, Messages) runs sync and async, plain and streamed: the
captured bytes are the bytes the server received and sent, no credential survives into an Exchange,
the SDK yields the same objects with and without the wrapper, a retried call is one call with two
attempts, and a failing callback (or a failing capture) never reaches the caller.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from provider_server import NON_CANONICAL_ARGUMENTS, ProviderServer, Reply, ToolCall

from producers.integrations.http_capture import (
    Exchange,
    anthropic_async_http_client,
    anthropic_http_client,
    capture_stats,
    openai_async_http_client,
    openai_http_client,
    wrap_http_client,
)

SECRET = "sk-test-SECRET-123"
APIS = ("chat", "responses", "messages")
PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}
SYSTEM = "You are a careful travel agent. Prices in EUR — always ☕ first."
USER = "Weather in Paris for three days? (café, naïve, 東京)"
TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "units": {"type": "string"}, "days": {"type": "array"}},
    "required": ["city"],
}
SCRIPT = Reply(text="Checking the forecast now.", tool_calls=(ToolCall("get_weather"),))

OnExchange = Callable[[Exchange], None]


def _sdk_client(
    server: ProviderServer, api: str, *, asynchronous: bool, on_exchange: OnExchange | None, **options: Any
) -> tuple[Any, httpx2.Client | httpx2.AsyncClient | None]:
    """An SDK client for ``api``; captured when ``on_exchange`` is given, else the SDK's own client."""
    options.setdefault("api_key", SECRET)
    http: httpx2.Client | httpx2.AsyncClient | None = None
    if api == "messages":
        if on_exchange is not None:
            http = (anthropic_async_http_client if asynchronous else anthropic_http_client)(on_exchange)
        cls: Any = anthropic.AsyncAnthropic if asynchronous else anthropic.Anthropic
        return cls(base_url=server.anthropic_base_url, http_client=http, **options), http
    if on_exchange is not None:
        http = (openai_async_http_client if asynchronous else openai_http_client)(on_exchange)
    cls = openai.AsyncOpenAI if asynchronous else openai.OpenAI
    return cls(base_url=server.openai_base_url, http_client=http, **options), http


def _arguments(api: str, *, stream: bool) -> dict[str, Any]:
    if api == "chat":
        return {
            "model": "gpt-test",
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}],
            "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": TOOL_SCHEMA}}],
            "stream": stream,
        }
    if api == "responses":
        return {
            "model": "gpt-test",
            "instructions": SYSTEM,
            "input": USER,
            "tools": [
                {"type": "function", "name": "get_weather", "parameters": TOOL_SCHEMA, "strict": False}
            ],
            "stream": stream,
        }
    return {
        "model": "claude-test",
        "max_tokens": 256,
        "system": SYSTEM,
        "messages": [{"role": "user", "content": USER}],
        "tools": [{"name": "get_weather", "input_schema": TOOL_SCHEMA}],
        "stream": stream,
    }


def _endpoint(client: Any, api: str) -> Any:
    return {"chat": lambda: client.chat.completions, "responses": lambda: client.responses}.get(
        api, lambda: client.messages
    )()


def _dump(result: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = result.model_dump()
    return dumped


def call_sdk(
    server: ProviderServer,
    api: str,
    *,
    asynchronous: bool,
    stream: bool,
    on_exchange: OnExchange | None = None,
    calls: int = 1,
    **options: Any,
) -> tuple[list[dict[str, Any]], httpx2.Client | httpx2.AsyncClient | None]:
    """Make ``calls`` calls; return every object the SDK yielded (dumped), and the captured http client."""

    def sync() -> tuple[list[dict[str, Any]], Any]:
        client, http = _sdk_client(server, api, asynchronous=False, on_exchange=on_exchange, **options)
        out: list[dict[str, Any]] = []
        with client:
            for _ in range(calls):
                result = _endpoint(client, api).create(**_arguments(api, stream=stream))
                out += [_dump(event) for event in result] if stream else [_dump(result)]
        return out, http

    async def asynchronous_() -> tuple[list[dict[str, Any]], Any]:
        client, http = _sdk_client(server, api, asynchronous=True, on_exchange=on_exchange, **options)
        out: list[dict[str, Any]] = []
        async with client:
            for _ in range(calls):
                result = await _endpoint(client, api).create(**_arguments(api, stream=stream))
                out += [_dump(event) async for event in result] if stream else [_dump(result)]
        return out, http

    return asyncio.run(asynchronous_()) if asynchronous else sync()


def _tool_arguments(api: str, outputs: list[dict[str, Any]], *, stream: bool) -> Any:
    """The tool arguments as the SDK handed them to the agent."""
    if stream:
        if api == "chat":
            return "".join(
                (call["function"] or {}).get("arguments") or ""
                for chunk in outputs
                for call in chunk["choices"][0]["delta"].get("tool_calls") or []
            )
        if api == "responses":
            return next(
                e["arguments"] for e in outputs if e["type"] == "response.function_call_arguments.done"
            )
        return "".join(
            e["delta"]["partial_json"]
            for e in outputs
            if e["type"] == "content_block_delta" and e["delta"]["type"] == "input_json_delta"
        )
    if api == "chat":
        return outputs[0]["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
    if api == "responses":
        return next(item["arguments"] for item in outputs[0]["output"] if item["type"] == "function_call")
    return next(block["input"] for block in outputs[0]["content"] if block["type"] == "tool_use")


def _cases() -> Iterator[Any]:
    for api in APIS:
        for asynchronous in (False, True):
            for stream in (False, True):
                label = f"{api}-{'async' if asynchronous else 'sync'}-{'stream' if stream else 'plain'}"
                yield pytest.param(api, asynchronous, stream, id=label)


ALL_CASES = list(_cases())


@pytest.mark.parametrize(("api", "asynchronous", "stream"), ALL_CASES)
def test_captured_bytes_are_the_wire_bytes_and_the_sdk_sees_the_same_stream(
    provider_server: ProviderServer, api: str, asynchronous: bool, stream: bool
) -> None:
    provider_server.script(SCRIPT)
    unwrapped, _ = call_sdk(provider_server, api, asynchronous=asynchronous, stream=stream)
    provider_server.clear()

    exchanges: list[Exchange] = []
    provider_server.script(SCRIPT)
    wrapped, http = call_sdk(
        provider_server, api, asynchronous=asynchronous, stream=stream, on_exchange=exchanges.append
    )

    assert wrapped == unwrapped
    expected_arguments: Any = NON_CANONICAL_ARGUMENTS
    if api == "messages" and not stream:
        expected_arguments = {"city": "Paris", "units": "metric", "days": [1, 2, 3]}
    assert _tool_arguments(api, wrapped, stream=stream) == expected_arguments

    [received] = provider_server.received
    [exchange] = exchanges
    assert exchange.request_body == received.body
    assert exchange.request_sha256 == "sha256:" + hashlib.sha256(received.body).hexdigest()
    assert exchange.response_body == received.response_body
    assert exchange.response_sha256 == "sha256:" + hashlib.sha256(received.response_body).hexdigest()
    assert (exchange.method, exchange.path, exchange.status) == ("POST", PATHS[api], 200)
    assert exchange.origin == provider_server.url
    assert (exchange.streamed, exchange.attempt, exchange.error) == (stream, 1, None)
    assert exchange.header("x-stainless-async") == ("async:asyncio" if asynchronous else "false")
    assert 0 <= exchange.headers_seconds <= exchange.total_seconds
    assert http is not None and capture_stats(http).exchanges == 1


def _leaks(exchange: Exchange, secret: str) -> list[str]:
    where = []
    if secret in repr(exchange):
        where.append("repr")
    for name in ("request_body", "response_body"):
        if secret.encode() in getattr(exchange, name):
            where.append(name)
    for key, value in (*exchange.request_headers, *exchange.response_headers):
        if secret in key or secret in value:
            where.append(f"header {key}")
    return where


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize(
    ("api", "credential"),
    [("chat", "api_key"), ("responses", "api_key"), ("messages", "api_key"), ("messages", "auth_token")],
)
def test_no_credential_reaches_an_exchange(
    provider_server: ProviderServer, api: str, credential: str, asynchronous: bool
) -> None:
    exchanges: list[Exchange] = []
    hostile_headers = {
        "Cookie": f"session={SECRET}",
        "Proxy-Authorization": f"Basic {SECRET}",
        "OpenAI-Organization": SECRET,
        "api-key": SECRET,
        "X-Custom-Token": SECRET,
    }
    options: dict[str, Any] = {"default_headers": hostile_headers, "default_query": {"api-key": SECRET}}
    if credential == "auth_token":
        options.update(api_key=None, auth_token=SECRET)
    for stream in (False, True):
        call_sdk(
            provider_server,
            api,
            asynchronous=asynchronous,
            stream=stream,
            on_exchange=exchanges.append,
            **options,
        )

    received = provider_server.received
    assert len(exchanges) == len(received) == 2
    # The secret really went over the wire: as the credential (anthropic 2.x sends its api_key as a
    # bearer token too), in every hostile header, and in the query string.
    for sent in received:
        assert sent.header("authorization") == f"Bearer {SECRET}"
        assert all(SECRET in (sent.header(name) or "") for name in hostile_headers)
        assert SECRET in sent.path
    for exchange in exchanges:
        assert _leaks(exchange, SECRET) == []
        assert (exchange.query, exchange.query_dropped) == ("", True)
        assert {key for key, _ in exchange.request_headers} >= {
            "content-type",
            "user-agent",
            "x-stainless-retry-count",
        }


def test_a_query_without_secrets_is_kept(provider_server: ProviderServer) -> None:
    exchanges: list[Exchange] = []
    call_sdk(
        provider_server,
        "chat",
        asynchronous=False,
        stream=False,
        on_exchange=exchanges.append,
        default_query={"api-version": "2025-04-01-preview"},
    )
    [exchange] = exchanges
    assert (exchange.query, exchange.query_dropped) == ("api-version=2025-04-01-preview", False)


@pytest.mark.parametrize(("api", "asynchronous", "stream"), ALL_CASES)
def test_an_sdk_retry_is_one_call_with_two_attempts(
    provider_server: ProviderServer, api: str, asynchronous: bool, stream: bool
) -> None:
    exchanges: list[Exchange] = []
    provider_server.fail_next(500)
    provider_server.script(SCRIPT)
    outputs, _ = call_sdk(
        provider_server,
        api,
        asynchronous=asynchronous,
        stream=stream,
        on_exchange=exchanges.append,
        max_retries=2,
    )

    assert outputs  # the SDK retried and succeeded
    received = provider_server.received
    assert [r.status for r in received] == [500, 200]
    assert received[0].body == received[1].body
    assert [e.request_body for e in exchanges] == [r.body for r in received]
    assert [(e.attempt, e.status) for e in exchanges] == [(1, 500), (2, 200)]
    assert exchanges[0].call_id == exchanges[1].call_id
    assert [e.header("x-stainless-retry-count") for e in exchanges] == ["0", "1"]


@pytest.mark.parametrize("api", APIS)
def test_a_rate_limited_call_is_one_call_and_a_repeated_call_is_two(
    provider_server: ProviderServer, api: str
) -> None:
    exchanges: list[Exchange] = []
    provider_server.fail_next(429)
    call_sdk(
        provider_server,
        api,
        asynchronous=False,
        stream=False,
        on_exchange=exchanges.append,
        max_retries=2,
        calls=2,
    )

    assert [r.status for r in provider_server.received] == [429, 200, 200]
    assert len({r.body for r in provider_server.received}) == 1
    assert [(e.attempt, e.status) for e in exchanges] == [(1, 429), (2, 200), (1, 200)]
    first, retry, repeat = (e.call_id for e in exchanges)
    assert first == retry != repeat


def test_without_sdk_headers_identical_bodies_group_only_after_a_retryable_failure(
    provider_server: ProviderServer,
) -> None:
    exchanges: list[Exchange] = []
    body = b'{"model":"m","messages":[]}'
    with wrap_http_client(httpx2.Client(base_url=provider_server.url), exchanges.append) as client:
        provider_server.fail_next(503)
        statuses = [client.post("/v1/chat/completions", content=body).status_code for _ in range(3)]

    assert statuses == [503, 200, 200]
    assert [e.attempt for e in exchanges] == [1, 2, 1]
    assert exchanges[0].call_id == exchanges[1].call_id != exchanges[2].call_id


def test_a_streamed_upload_is_captured_as_sent(provider_server: ProviderServer) -> None:
    exchanges: list[Exchange] = []
    parts = [b'{"model":"m",', b'"messages":[{"role":"user","content":"', "héllo".encode(), b'"}]}']
    with wrap_http_client(httpx2.Client(base_url=provider_server.url), exchanges.append) as client:
        response = client.post("/v1/chat/completions", content=iter(parts))

    assert response.status_code == 200
    [received] = provider_server.received
    assert received.header("transfer-encoding") == "chunked"
    assert exchanges[0].request_body == received.body == b"".join(parts)


@pytest.mark.parametrize(("api", "asynchronous", "stream"), ALL_CASES)
def test_a_raising_callback_never_reaches_the_caller(
    provider_server: ProviderServer,
    api: str,
    asynchronous: bool,
    stream: bool,
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider_server.script(SCRIPT)
    unwrapped, _ = call_sdk(provider_server, api, asynchronous=asynchronous, stream=stream)

    def explode(exchange: Exchange) -> None:
        raise RuntimeError("callback bug")

    provider_server.script(SCRIPT)
    with caplog.at_level(logging.WARNING, logger="producers.integrations.http_capture"):
        wrapped, http = call_sdk(
            provider_server, api, asynchronous=asynchronous, stream=stream, on_exchange=explode
        )

    assert wrapped == unwrapped
    assert http is not None
    stats = capture_stats(http)
    assert (stats.exchanges, stats.callback_errors, stats.capture_errors) == (1, 1, 0)
    assert "exchange callback raised" in caplog.text


def test_a_failing_capture_never_reaches_the_caller(provider_server: ProviderServer) -> None:
    def broken_clock() -> Any:
        raise OSError("clock unavailable")

    exchanges: list[Exchange] = []
    http = wrap_http_client(openai.DefaultHttpxClient(), exchanges.append, clock=broken_clock)
    client = openai.OpenAI(api_key=SECRET, base_url=provider_server.openai_base_url, http_client=http)
    result = client.chat.completions.create(**_arguments("chat", stream=False))

    assert result.choices[0].message.content == "Hello from the local provider."
    assert exchanges == []
    assert capture_stats(http).capture_errors == 1


def test_a_transport_error_is_recorded_and_raised_unchanged() -> None:
    with ProviderServer() as server:
        base_url = server.openai_base_url  # the port is free again once the server is gone
    exchanges: list[Exchange] = []
    client = openai.OpenAI(
        api_key=SECRET, base_url=base_url, http_client=openai_http_client(exchanges.append)
    )

    with pytest.raises(openai.APIConnectionError):
        client.with_options(max_retries=1).chat.completions.create(**_arguments("chat", stream=False))

    assert [(e.attempt, e.status, e.error) for e in exchanges] == [
        (1, None, "ConnectError"),
        (2, None, "ConnectError"),
    ]
    assert exchanges[0].call_id == exchanges[1].call_id
    assert exchanges[0].request_body == exchanges[1].request_body != b""


def test_a_stream_closed_early_is_delivered_with_what_was_read(provider_server: ProviderServer) -> None:
    exchanges: list[Exchange] = []
    client = openai.OpenAI(
        api_key=SECRET,
        base_url=provider_server.openai_base_url,
        http_client=openai_http_client(exchanges.append),
    )
    stream = client.chat.completions.create(**_arguments("chat", stream=True))
    first = next(iter(stream))
    stream.close()

    assert first.choices[0].delta.role == "assistant"
    [exchange] = exchanges
    [received] = provider_server.received
    assert not exchange.eof
    assert exchange.response_body and received.response_body.startswith(exchange.response_body)


def test_a_compressed_response_is_kept_as_received_and_decodable(provider_server: ProviderServer) -> None:
    exchanges: list[Exchange] = []
    provider_server.script(Reply(text="zipped", gzip=True))
    outputs, _ = call_sdk(
        provider_server, "messages", asynchronous=False, stream=False, on_exchange=exchanges.append
    )

    [exchange] = exchanges
    [received] = provider_server.received
    assert outputs[0]["content"][0]["text"] == "zipped"
    assert exchange.response_body == received.response_body
    assert exchange.header("content-encoding", response=True) == "gzip"
    assert b'"text": "zipped"' in exchange.decoded_response_body()


def test_wrapping_refuses_a_second_wrap_and_a_foreign_client() -> None:
    client = wrap_http_client(httpx2.Client(), lambda exchange: None)
    with pytest.raises(ValueError, match="already wrapped"):
        wrap_http_client(client, lambda exchange: None)
    with pytest.raises(TypeError, match=r"httpx2\.Client"):
        wrap_http_client(object(), lambda exchange: None)  # type: ignore[type-var]
    with pytest.raises(ValueError, match="not wrapped"):
        capture_stats(httpx2.Client())


def test_a_transport_that_answers_loaded_bytes_is_captured() -> None:
    exchanges: list[Exchange] = []
    transport = httpx2.MockTransport(
        lambda request: httpx2.Response(200, json={"echo": len(request.content)})
    )
    with wrap_http_client(httpx2.Client(transport=transport), exchanges.append) as client:
        response = client.post("http://model.invalid/v1/chat/completions", content=b'{"a": 1}')

    assert response.json() == {"echo": 8}
    [exchange] = exchanges
    assert (exchange.request_body, exchange.response_body, exchange.eof) == (b'{"a": 1}', b'{"echo":8}', True)


def test_a_cancelled_async_call_is_delivered_and_the_cancellation_propagates(
    provider_server: ProviderServer,
) -> None:
    exchanges: list[Exchange] = []

    class Hanging(httpx2.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            await asyncio.sleep(60)
            raise AssertionError("not reached")

    async def scenario() -> None:
        async with wrap_http_client(httpx2.AsyncClient(transport=Hanging()), exchanges.append) as client:
            task = asyncio.create_task(client.post("http://model.invalid/v1/messages", content=b"{}"))
            await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    asyncio.run(scenario())
    [exchange] = exchanges
    assert (exchange.status, exchange.error, exchange.request_body) == (None, "CancelledError", b"{}")

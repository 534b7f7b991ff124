"""``producers.integrations.openai.wrap`` / ``.anthropic.wrap``: real SDKs into the Recorder, byte for byte.

For each API (Chat Completions, Responses, Messages), sync and async, plain and streamed, a
three-step tool loop inside one decision: the capture's model calls hold exactly the bytes the local
server received, the capture verifies (and a tampered request byte fails naming the part), no
credential appears in the encoded capture, tool arguments stay as the API returned them, and each
tool call is paired with the result the agent sent back. Outside any decision, each call is its own
decision. Retries are attempts of one call; concurrent tasks and threads keep their own decisions.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from provider_server import NON_CANONICAL_ARGUMENTS, ProviderServer, Reply, ToolCall
from typer.testing import CliRunner

from producers.evidence import Signer, TrustStore, verify_capture
from producers.integrations import anthropic as anthropic_integration
from producers.integrations import openai as openai_integration
from producers.integrations.http_capture import wrap_http_client
from producers.integrations.recording import ModelCallRouter
from producers.policy import CapturePolicy
from producers.recorder import CaptureFailure, Recorder
from producers.transports.spool.files import read_spool
from producers.transports.spool.sender import SpoolTransport
from schemas.codec import decode
from schemas.errors import ContentHashMismatch, SignatureInvalid

SECRET = "sk-test-SECRET-wrap-42"
SYSTEM = "You are a careful travel agent. Prices in EUR — always ☕ first."
USER = "Weather in Paris? Remember: the customer prefers Celsius, café au lait ☕."
MEMORY = "the customer prefers Celsius, café au lait ☕."
SECOND_ARGUMENTS = '{"tz" :  "Europe/Paris"}'
FINAL = "Sunny, 24 °C in Paris."
SCRIPT = (
    Reply(tool_calls=(ToolCall("get_weather"),)),
    Reply(
        text="One more lookup.", tool_calls=(ToolCall("get_time", SECOND_ARGUMENTS, id="call_blackbox_2"),)
    ),
    Reply(text=FINAL),
)
FORMATS = {
    "chat": "openai.chat.completions",
    "responses": "openai.responses",
    "messages": "anthropic.messages",
}
PARAMETERS = {"type": "object", "properties": {"city": {"type": "string"}}}


@dataclass
class Rig:
    recorder: Recorder
    spool: Path
    trust: TrustStore
    failures: list[CaptureFailure]

    def messages(self) -> list[bytes]:
        assert self.recorder.flush(10)
        return [record.value for record in read_spool(self.spool)]

    def captures(self) -> list[dict[str, Any]]:
        return [decode(data).value for data in self.messages()]


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    signer = Signer(Ed25519PrivateKey.generate(), name="did:test:wrap")
    trust = TrustStore()
    trust.add(signer.public_raw, not_before=datetime(2000, 1, 1, tzinfo=UTC))
    failures: list[CaptureFailure] = []
    recorder = Recorder(
        agent_id="agt_wrap",
        transport=SpoolTransport(tmp_path / "spool", linger_ms=5),
        signer=signer,
        policy=CapturePolicy(sample_one_in=1),  # every routine decision in full: content is compared
        on_error=failures.append,
    )
    yield Rig(recorder, tmp_path / "spool", trust, failures)
    recorder.close(5)


def client_for(server: ProviderServer, api: str, recorder: Recorder, *, asynchronous: bool) -> Any:
    if api == "messages":
        cls: Any = anthropic.AsyncAnthropic if asynchronous else anthropic.Anthropic
        return anthropic_integration.wrap(cls(api_key=SECRET, base_url=server.anthropic_base_url), recorder)
    cls = openai.AsyncOpenAI if asynchronous else openai.OpenAI
    return openai_integration.wrap(cls(api_key=SECRET, base_url=server.openai_base_url), recorder)


# --- one agent loop per API, as an agent writes it with the SDK ---------------------------------------------


async def _resolve(value: Any) -> Any:
    return await value if asyncio.iscoroutine(value) else value


async def _events(result: Any) -> list[Any]:
    if hasattr(result, "__aiter__"):
        return [event async for event in result]
    return list(result)


async def _step(client: Any, api: str, state: list[Any], *, stream: bool) -> list[tuple[str, str, Any]]:
    """One model call; returns the tool calls it asked for as (id, name, arguments as returned)."""
    if api == "chat":
        request = client.chat.completions.create(
            model="gpt-test",
            messages=state,
            tools=[{"type": "function", "function": {"name": "get_weather", "parameters": PARAMETERS}}],
            temperature=0.2,
            stream=stream,
        )
        result = await _resolve(request)
        if not stream:
            return [
                (c.id, c.function.name, c.function.arguments)
                for c in result.choices[0].message.tool_calls or []
            ]
        calls: dict[int, list[Any]] = {}
        for chunk in await _events(result):
            for piece in chunk.choices[0].delta.tool_calls or []:
                call = calls.setdefault(piece.index, [None, None, ""])
                call[0] = piece.id or call[0]
                call[1] = piece.function.name or call[1]
                call[2] += piece.function.arguments or ""
        return [tuple(call) for _, call in sorted(calls.items())]  # type: ignore[misc]
    if api == "responses":
        request = client.responses.create(
            model="gpt-test",
            instructions=SYSTEM,
            input=state,
            tools=[{"type": "function", "name": "get_weather", "parameters": PARAMETERS, "strict": False}],
            stream=stream,
        )
        result = await _resolve(request)
        if stream:
            result = next(e.response for e in await _events(result) if e.type == "response.completed")
        return [(i.call_id, i.name, i.arguments) for i in result.output if i.type == "function_call"]
    request = client.messages.create(
        model="claude-test",
        max_tokens=256,
        system=SYSTEM,
        messages=state,
        tools=[{"name": "get_weather", "input_schema": PARAMETERS}],
        stream=stream,
    )
    result = await _resolve(request)
    if not stream:
        return [(b.id, b.name, b.input) for b in result.content if b.type == "tool_use"]
    uses: dict[int, list[Any]] = {}
    for event in await _events(result):
        if event.type == "content_block_start" and event.content_block.type == "tool_use":
            uses[event.index] = [event.content_block.id, event.content_block.name, ""]
        elif event.type == "content_block_delta" and event.delta.type == "input_json_delta":
            uses[event.index][2] += event.delta.partial_json
    return [(i, n, json.loads(a)) for i, n, a in (uses[k] for k in sorted(uses))]


def _first_state(api: str) -> list[Any]:
    if api == "chat":
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]
    return [{"role": "user", "content": USER}]


def _answer(api: str, state: list[Any], calls: list[tuple[str, str, Any]], step: int) -> None:
    """Append the assistant's tool calls and the agent's results, as each API expects them."""
    result = f"result {step}: 24 °C ☕"
    for call_id, name, arguments in calls:
        if api == "chat":
            state.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": arguments},
                        }
                    ],
                }
            )
            state.append({"role": "tool", "tool_call_id": call_id, "content": result})
        elif api == "responses":
            state.append({"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments})
            state.append({"type": "function_call_output", "call_id": call_id, "output": result})
        else:
            state.append(
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": call_id, "name": name, "input": arguments}],
                }
            )
            state.append(
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": call_id, "content": result}],
                }
            )


async def agent_loop(client: Any, api: str, *, stream: bool) -> list[Any]:
    """Call the model until it stops asking for tools; returns every tool call's arguments as given."""
    state = _first_state(api)
    seen: list[Any] = []
    for step in range(5):
        calls = await _step(client, api, state, stream=stream)
        if not calls:
            break
        seen += [arguments for _, _, arguments in calls]
        _answer(api, state, calls, step)
    return seen


def run_loop(rig: Rig, server: ProviderServer, api: str, *, asynchronous: bool, stream: bool) -> str:
    """The three-step loop inside one decision (with a memory entry); returns the decision id."""

    async def main() -> str:
        client = client_for(server, api, rig.recorder, asynchronous=asynchronous)
        with rig.recorder.decision(consequential=True, request={"user": USER}) as d:
            d.add_memory(entry_id="mem_pref", tier="hot", content=MEMORY)
            d.add_memory(entry_id="mem_unsent", tier="cold", content="never sent to the model")
            d.observe_external(key="weather.station", value={"id": 7})
            arguments = await agent_loop(client, api, stream=stream)
        expected = NON_CANONICAL_ARGUMENTS, SECOND_ARGUMENTS
        if api == "messages":
            expected = tuple(json.loads(a) for a in expected)  # type: ignore[assignment]
        assert tuple(arguments) == expected
        return d.decision_id

    return asyncio.run(main())


def _cases() -> Iterator[Any]:
    for api in FORMATS:
        for asynchronous in (False, True):
            for stream in (False, True):
                label = f"{api}-{'async' if asynchronous else 'sync'}-{'stream' if stream else 'plain'}"
                yield pytest.param(api, asynchronous, stream, id=label)


@pytest.mark.parametrize(("api", "asynchronous", "stream"), list(_cases()))
def test_a_tool_loop_is_one_wire_capture_byte_for_byte(
    provider_server: ProviderServer, rig: Rig, api: str, asynchronous: bool, stream: bool
) -> None:
    provider_server.script(*SCRIPT)
    decision_id = run_loop(rig, provider_server, api, asynchronous=asynchronous, stream=stream)

    [data] = rig.messages()
    capture = decode(data).value
    assert capture["decisionId"] == decision_id and capture["fidelity"] == "wire"
    received = provider_server.received
    calls = capture["executionTrace"]["modelCalls"]
    assert len(calls) == len(received) == 3
    for sequence, (call, sent) in enumerate(zip(calls, received, strict=True), start=1):
        assert call["sequence"] == sequence and call["format"] == FORMATS[api]
        assert call["requestBody"].encode("utf-8") == sent.body  # every request, byte for byte
        assert call["responseBody"].encode("utf-8") == sent.response_body
        assert (call["status"], call["streamed"], call["complete"], call["attempts"]) == (
            200,
            stream,
            True,
            1,
        )
        assert call["path"] == sent.path and call["endpoint"] == provider_server.url

    # The first request is the rendered context; the parts the agent recorded are located in it.
    rendered = capture["renderedContext"]
    assert rendered["format"] == FORMATS[api] and rendered["text"].encode() == received[0].body
    spans = {span["part"]: span for span in rendered["spans"]}
    assert set(spans) == {"system_prompt", "memory:mem_pref"}  # the unsent entry has no span
    body = received[0].body
    assert body[spans["system_prompt"]["start"] : spans["system_prompt"]["end"]] in (
        json.dumps(SYSTEM)[1:-1].encode(),
        json.dumps(SYSTEM, ensure_ascii=False)[1:-1].encode(),
    )
    memory = spans["memory:mem_pref"]
    assert json.loads(b'"' + body[memory["start"] : memory["end"]] + b'"') == MEMORY
    assert all(any(s["part"] == "memory:mem_pref" for s in call["spans"]) for call in calls)

    config = capture["agentConfiguration"]
    assert config["systemPromptText"] == SYSTEM
    assert config["modelIdentifier"] == ("claude-test" if api == "messages" else "gpt-test")
    assert config["toolSchemaJson"] == json.loads(received[0].body)["tools"]
    assert config["modelProviderEndpoint"] == provider_server.url + received[0].path
    if api == "chat":
        assert config["samplingParameters"] == {"temperature": 0.2}
    if api == "messages":
        assert config["samplingParameters"] == {"max_tokens": 256}

    # Tool calls: arguments as the API returned them, paired with what the agent sent back.
    tools = capture["executionTrace"]["toolCalls"]
    assert [(t["sequence"], t["toolName"]) for t in tools] == [(1, "get_weather"), (2, "get_time")]
    if api == "messages":
        assert [t["input"] for t in tools] == [
            json.loads(NON_CANONICAL_ARGUMENTS),
            json.loads(SECOND_ARGUMENTS),
        ]
    else:
        assert [t["input"] for t in tools] == [
            NON_CANONICAL_ARGUMENTS,
            SECOND_ARGUMENTS,
        ]  # strings stay strings
    assert [t["output"] for t in tools] == ["result 0: 24 °C ☕", "result 1: 24 °C ☕"]
    assert capture["executionTrace"]["finalOutputText"] == FINAL
    assert capture["executionTrace"]["stopReason"] == "end_turn"
    assert capture["memoryState"]["workingSetEntries"][0]["renderedContent"] == MEMORY
    assert capture["externalState"]["observableExternals"][0]["capturedValue"] == {"id": 7}

    report = verify_capture(capture, rig.trust)
    assert report.absent_parts == () and report.checked_parts >= 6 + 3 * 2
    assert SECRET.encode() not in data and b"authorization" not in data.lower()
    assert b"x-api-key" not in data.lower()
    assert rig.failures == []


@pytest.mark.parametrize("api", list(FORMATS))
def test_a_tampered_request_byte_fails_naming_the_part(
    provider_server: ProviderServer, rig: Rig, api: str
) -> None:
    provider_server.script(*SCRIPT)
    run_loop(rig, provider_server, api, asynchronous=False, stream=False)
    [capture] = rig.captures()
    verify_capture(capture, rig.trust)

    call = capture["executionTrace"]["modelCalls"][1]
    call["requestBody"] = call["requestBody"].replace("24 °C", "25 °C", 1)
    with pytest.raises(ContentHashMismatch) as failed:
        verify_capture(capture, rig.trust)
    assert failed.value.part == "executionTrace.modelCalls[1].requestBody"

    call["requestBodyHash"] = "sha256:" + "0" * 64  # the hash is signed: changing it too breaks the signature
    with pytest.raises(SignatureInvalid):
        verify_capture(capture, rig.trust)


@pytest.mark.parametrize("api", list(FORMATS))
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_drop_in_each_call_is_its_own_decision(
    provider_server: ProviderServer, rig: Rig, api: str, asynchronous: bool
) -> None:
    provider_server.script(*SCRIPT)

    async def main() -> None:
        client = client_for(provider_server, api, rig.recorder, asynchronous=asynchronous)
        await agent_loop(client, api, stream=False)  # no decision scope anywhere

    asyncio.run(main())
    captures = rig.captures()
    received = provider_server.received
    assert len(captures) == len(received) == 3
    assert len({c["decisionId"] for c in captures}) == 3
    for capture, sent in zip(captures, received, strict=True):
        [call] = capture["executionTrace"]["modelCalls"]
        assert call["requestBody"].encode() == sent.body
        assert capture["fidelity"] == "wire" and capture["renderedContext"]["text"].encode() == sent.body
        verify_capture(capture, rig.trust)
    # A lone call cannot see its tool results: the request stands, the output is absent.
    assert [t["output"] for t in captures[0]["executionTrace"]["toolCalls"]] == [None]
    assert captures[2]["executionTrace"]["finalOutputText"] == FINAL
    assert rig.failures == []


def test_retries_are_attempts_of_one_call_in_a_decision_and_in_drop_in(
    provider_server: ProviderServer, rig: Rig
) -> None:
    client = client_for(provider_server, "chat", rig.recorder, asynchronous=False)
    provider_server.fail_next(500)
    with rig.recorder.decision(consequential=True):
        client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "hi"}])
    provider_server.fail_next(429)
    client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "again"}])

    scoped, dropped = rig.captures()
    for capture in (scoped, dropped):
        [call] = capture["executionTrace"]["modelCalls"]
        assert (call["attempts"], call["status"]) == (2, 200)
        assert capture["executionTrace"]["finalOutputText"] == "Hello from the local provider."
        verify_capture(capture, rig.trust)
    assert len(provider_server.received) == 4


def test_concurrent_tasks_and_threads_keep_their_own_decisions(
    provider_server: ProviderServer, rig: Rig
) -> None:
    async def one(client: Any, name: str) -> str:
        with rig.recorder.decision(consequential=True) as d:
            for _ in range(2):
                await client.chat.completions.create(model=name, messages=[{"role": "user", "content": name}])
                await asyncio.sleep(0)
        return d.decision_id

    async def tasks() -> list[str]:
        client = client_for(provider_server, "chat", rig.recorder, asynchronous=True)
        return list(await asyncio.gather(one(client, "task-a"), one(client, "task-b")))

    def thread(client: Any, name: str, out: list[str]) -> None:
        with rig.recorder.decision(consequential=True) as d:
            for _ in range(2):
                client.chat.completions.create(model=name, messages=[{"role": "user", "content": name}])
        out.append(d.decision_id)

    ids = asyncio.run(tasks())
    client = client_for(provider_server, "chat", rig.recorder, asynchronous=False)
    out: list[str] = []
    threads = [threading.Thread(target=thread, args=(client, f"thread-{n}", out)) for n in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    captures = {c["decisionId"]: c for c in rig.captures()}
    assert set(captures) == {*ids, *out}
    for capture in captures.values():
        models = {
            json.loads(call["requestBody"])["model"] for call in capture["executionTrace"]["modelCalls"]
        }
        assert len(capture["executionTrace"]["modelCalls"]) == 2 and len(models) == 1


def test_wrap_returns_the_same_type_and_leaves_the_given_client_alone(
    provider_server: ProviderServer, rig: Rig
) -> None:
    for plain in (
        openai.OpenAI(api_key=SECRET, base_url=provider_server.openai_base_url),
        openai.AsyncOpenAI(api_key=SECRET, base_url=provider_server.openai_base_url),
    ):
        wrapped = openai_integration.wrap(plain, rig.recorder)
        assert type(wrapped) is type(plain) and wrapped is not plain
    for given in (
        anthropic.Anthropic(api_key=SECRET, base_url=provider_server.anthropic_base_url),
        anthropic.AsyncAnthropic(api_key=SECRET, base_url=provider_server.anthropic_base_url),
    ):
        assert type(anthropic_integration.wrap(given, rig.recorder)) is type(given)
    plain_sync = openai.OpenAI(api_key=SECRET, base_url=provider_server.openai_base_url)
    openai_integration.wrap(plain_sync, rig.recorder)
    plain_sync.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "unrecorded"}])
    assert rig.messages() == []  # the given client was not changed
    with pytest.raises(TypeError, match=r"openai\.OpenAI"):
        openai_integration.wrap(object(), rig.recorder)


class _Garbled:
    """A wire format whose response reader fails: the capture must still keep the exact bytes."""

    FORMAT = "test.garbled"

    @staticmethod
    def parse_request(body: Any) -> Any:
        from producers.wire import openai_chat

        return openai_chat.parse_request(body)

    @staticmethod
    def parse_response(body: str, *, streamed: bool) -> Any:
        raise ValueError("garbled on purpose")


def test_a_response_that_cannot_be_read_is_kept_exactly_and_named(
    provider_server: ProviderServer, rig: Rig
) -> None:
    router = ModelCallRouter(rig.recorder, format_for=lambda _: _Garbled, max_retries=2, consequential=True)
    http = openai.DefaultHttpxClient()
    wrap_http_client(http, router)
    client = openai.OpenAI(api_key=SECRET, base_url=provider_server.openai_base_url, http_client=http)
    client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "hi"}])

    [capture] = rig.captures()
    [call] = capture["executionTrace"]["modelCalls"]
    assert call["requestBody"].encode() == provider_server.received[0].body
    assert call["responseBody"].encode() == provider_server.received[0].response_body
    assert capture["agentConfiguration"]["modelIdentifier"] == "gpt-test"  # the request was readable
    assert "garbled on purpose" in capture["outcome"]["reason"]
    verify_capture(capture, rig.trust)
    [failure] = rig.failures
    assert failure.partial and "model call 1" in str(failure.error)


def test_missing_sdk_names_the_extra() -> None:
    for sdk in ("openai", "anthropic"):
        code = (
            f"import sys; sys.modules[{sdk!r}] = None\n"
            f"try:\n    import producers.integrations.{sdk}\n"
            "except ImportError as exc:\n    print(exc)\n"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        assert f"pip install 'agent-blackbox[{sdk}]'" in out, out


def test_consume_show_and_verify_a_wire_capture(provider_server: ProviderServer, tmp_path: Path) -> None:
    from consumers.cli import app

    data = tmp_path / "bb"
    signer = Signer(Ed25519PrivateKey.generate(), name="did:test:wrap")
    trust = TrustStore()
    trust.add(signer.public_raw, not_before=datetime(2000, 1, 1, tzinfo=UTC))
    trust.save(data / "trust.toml")
    recorder = Recorder(
        agent_id="agt_wrap",
        transport=SpoolTransport(data / "spool", linger_ms=5),
        signer=signer,
        policy=CapturePolicy(sample_one_in=1),
    )
    provider_server.script(*SCRIPT)
    rig = Rig(recorder, data / "spool", trust, [])
    decision_id = run_loop(rig, provider_server, "messages", asynchronous=False, stream=True)
    assert recorder.close(10)

    env = {"BLACKBOX_DATA_DIR": str(data), "BLACKBOX_TRANSPORT": "spool", "BLACKBOX_BLOB": "local"}
    runner = CliRunner()
    consumed = runner.invoke(app, ["consume", "--drain", "--max-wait", "0.1"], env=env)
    assert consumed.exit_code == 0 and "indexed=1" in consumed.output, consumed.output
    shown = runner.invoke(app, ["show", decision_id, "--json"], env=env)
    assert shown.exit_code == 0, shown.output
    view = json.loads(shown.stdout)
    assert view["capture"]["fidelity"] == "wire"
    assert len(view["capture"]["executionTrace"]["modelCalls"]) == 3
    text = runner.invoke(app, ["show", decision_id], env=env)
    assert view["stored"]["fidelity"] == "wire"  # the index row
    assert text.exit_code == 0 and "fidelity=wire" in text.output, text.output
    verified = runner.invoke(app, ["verify", decision_id], env=env)
    assert verified.exit_code == 0, verified.output
    assert SECRET not in shown.stdout

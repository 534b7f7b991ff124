"""The OpenAI Chat Completions wire module: bodies from parts, responses, finish reasons, tool calls."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any, get_args

import pytest

from producers.context import RenderedContext, render_chat_context
from producers.wire.openai_chat import (
    FINISH_TO_STOP,
    PATH,
    ChatRequest,
    ChatResponse,
    ToolCallRequest,
    append_messages,
    parse_tool_calls,
    request_from_capture,
    request_headers,
    schema_for_tools,
    stop_reason_for,
    tool_message,
    tool_message_content,
    tools_from_schema,
)
from schemas.errors import CaptureNotReplayable, ContractError, ModelClientError
from schemas.models import StopReason

# Odd spacing and key order on purpose: the body must carry these bytes, not a re-serialization.
MESSAGES_TEXT = '[ {"role":"system",  "content":"be brief"},\n  {"content":"hi", "role":"user"} ]'
TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


def _completion(message: dict[str, Any], finish: str | None) -> dict[str, Any]:
    return {"model": "m-1", "choices": [{"index": 0, "message": message, "finish_reason": finish}]}


def test_a_body_built_from_parts_round_trips_and_keeps_the_messages_bytes() -> None:
    request = ChatRequest(
        model="acme-support",
        messages_text=MESSAGES_TEXT,
        tools=TOOLS,
        sampling={"temperature": 0.0, "top_p": None, "max_tokens": 64},
    )
    body = request.body()
    assert body.startswith('{"model": "acme-support", "messages": ' + MESSAGES_TEXT + ", ")
    assert json.loads(body) == {
        "model": "acme-support",
        "messages": json.loads(MESSAGES_TEXT),
        "tools": TOOLS,
        "temperature": 0.0,
        "max_tokens": 64,  # a None sampling value is left out, not sent as null
    }
    assert request.to_json() == json.loads(body)
    assert request.messages() == json.loads(MESSAGES_TEXT)


def test_later_turns_append_after_the_verbatim_prefix() -> None:
    request = ChatRequest(model="m", messages_text=MESSAGES_TEXT)
    extra = [{"role": "assistant", "content": "ok"}, tool_message("call_1", {"b": 1})]
    sent = request.to_json(extra)["messages"]
    assert sent == [*json.loads(MESSAGES_TEXT), *extra]
    assert request.body(extra).startswith('{"model": "m", "messages": ' + MESSAGES_TEXT.rstrip()[:-1])
    assert json.loads(append_messages("[ ]", [{"a": 1}])) == [{"a": 1}]
    assert append_messages(MESSAGES_TEXT, []) is MESSAGES_TEXT
    with pytest.raises(ContractError):
        append_messages('{"not": "an array"}', [{"a": 1}])


@pytest.mark.parametrize("arguments", ['{"b":1,  "a":2}', '{ "a" : 2 ,"b":1 }\n', "not json at all", ""])
def test_tool_call_arguments_come_back_exactly_as_the_api_returned_them(arguments: str) -> None:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_7", "type": "function", "function": {"name": "lookup", "arguments": arguments}}
        ],
    }
    response = ChatResponse.from_completion(_completion(message, "tool_calls"))
    (call,) = response.tool_calls
    assert call == ToolCallRequest(id="call_7", name="lookup", arguments=arguments)
    assert type(call.arguments) is str and call.arguments == arguments
    assert response.message["tool_calls"][0]["function"]["arguments"] == arguments
    assert (response.finish_reason, response.model, response.stop_reason) == (
        "tool_calls",
        "m-1",
        "tool_call",
    )


def test_several_tool_calls_keep_their_order_and_a_final_answer_has_none() -> None:
    message = {
        "role": "assistant",
        "tool_calls": [
            {"id": "c1", "function": {"name": "a", "arguments": "{}"}},
            {"id": "c2", "function": {"name": "b"}},
        ],
    }
    assert parse_tool_calls(message) == (
        ToolCallRequest(id="c1", name="a", arguments="{}"),
        ToolCallRequest(id="c2", name="b", arguments=None),
    )
    assert parse_tool_calls({"role": "assistant", "content": "done"}) == ()
    assert parse_tool_calls({"role": "assistant", "content": "done", "tool_calls": None}) == ()


@pytest.mark.parametrize(
    ("finish", "stop"),
    [
        ("stop", "end_turn"),
        ("length", "max_tokens"),
        ("tool_calls", "tool_call"),
        ("function_call", "tool_call"),
        ("content_filter", "error"),
        (None, "end_turn"),  # a server that omits finish_reason answered normally
    ],
)
def test_each_finish_reason_maps_to_the_stop_reason_replay_reports(finish: str | None, stop: str) -> None:
    assert stop_reason_for(finish) == stop
    response = ChatResponse.from_completion(_completion({"role": "assistant", "content": "x"}, finish))
    assert response.stop_reason == stop


def test_every_mapped_stop_reason_is_one_the_capture_contract_names() -> None:
    assert set(FINISH_TO_STOP.values()) <= set(get_args(StopReason))
    assert stop_reason_for("something_new") == "something_new"  # passed through, never guessed
    with pytest.raises(TypeError):
        FINISH_TO_STOP["stop"] = "other"  # type: ignore[index]


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ({"choices": []}, "not a chat completion"),
        ("plain text", "not a chat completion"),
        ({"choices": [{"message": "hi"}]}, "message is not an object"),
    ],
)
def test_something_that_is_not_a_completion_is_a_model_client_error(value: Any, fragment: str) -> None:
    with pytest.raises(ModelClientError, match=fragment):
        ChatResponse.from_completion(value)


def test_tool_messages_carry_strings_as_given_and_values_as_json() -> None:
    assert tool_message_content("already text") == "already text"
    assert tool_message_content({"é": [1, 2]}) == '{"é": [1, 2]}'
    assert tool_message("call_1", {"ok": True}) == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": '{"ok": true}',
    }


def test_http_shape_path_and_headers() -> None:
    assert PATH == "/chat/completions"
    assert request_headers(None) == {"Content-Type": "application/json"}
    assert request_headers("sk-1")["Authorization"] == "Bearer sk-1"


def test_a_capture_maps_to_its_request() -> None:
    rendered = render_chat_context(system_prompt="be brief", memory=[("m1", "note")], user_message="hi")
    config = {
        "modelIdentifier": "acme-support",
        "toolSchemaJson": {"tools": TOOLS, "version": "3"},
        "samplingParameters": {"temperature": 0.2},
        "modelProviderEndpoint": "https://models.example/v1",
    }
    request = request_from_capture(config, rendered)
    assert request == ChatRequest(
        model="acme-support",
        messages_text=rendered.text,
        tools=TOOLS,
        sampling={"temperature": 0.2},
        endpoint="https://models.example/v1",
    )
    assert schema_for_tools(config["toolSchemaJson"], request.tools) == config["toolSchemaJson"]
    assert tools_from_schema(TOOLS) is TOOLS and schema_for_tools(TOOLS, TOOLS) is TOOLS
    assert tools_from_schema(None) is None
    with pytest.raises(ContractError, match="neither a list of tools"):
        tools_from_schema({"functions": []})
    with pytest.raises(ContractError, match="no model identifier"):
        request_from_capture({}, rendered)
    other = RenderedContext(format="text/plain", text="hi", spans=())
    with pytest.raises(CaptureNotReplayable, match="text/plain"):
        request_from_capture(config, other)


def test_the_wire_module_imports_with_the_sdk_dependencies_alone() -> None:
    # Block the server-side packages (and consumers/) so any import of them fails loudly.
    script = textwrap.dedent(
        """
        import importlib.abc, sys

        BLOCKED = {"httpx", "chdb", "typer", "rich", "minio", "pandas", "pyarrow", "consumers"}

        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCKED:
                    raise ImportError(f"blocked: {name}")
                return None

        sys.meta_path.insert(0, Block())
        import producers.wire.openai_chat as wire
        loaded = sorted(n for n in sys.modules if n.split(".")[0] in BLOCKED)
        assert not loaded, loaded
        print(wire.stop_reason_for("length"))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "max_tokens"

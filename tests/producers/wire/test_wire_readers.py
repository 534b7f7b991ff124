"""Reading captured calls: server-sent events, the three formats' requests and responses, span location.

The SDK round trips live in tests/integrations; these pin the edges a real stream shows: CRLF and CR
line ends, comments, multi-line data, a stream cut before its last event, arguments that stay as the
API returned them, stop reasons with no equivalent.
"""

from __future__ import annotations

import json

from producers.integrations.assemble import locate_spans
from producers.wire import anthropic_messages, openai_chat, openai_responses
from producers.wire.sse import SseEvent, parse_events

ARGUMENTS = '{ "city" :"Paris" }'


def test_sse_follows_the_event_stream_grammar() -> None:
    text = ': keep-alive\r\nevent: a\r\ndata: one\r\ndata:two\r\n\r\ndata: {"x": 1}\rid: 7\r\r\n\nevent: cut\ndata: tail'
    assert parse_events(text) == [
        SseEvent("a", "one\ntwo"),
        SseEvent(None, '{"x": 1}'),
        SseEvent("cut", "tail", terminated=False),
    ]
    assert parse_events("event: empty\n\n") == []


def _chunk(delta: dict[str, object], finish: str | None = None) -> str:
    body = {"model": "gpt-x-2026", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return "data: " + json.dumps(body) + "\n\n"


def test_chat_stream_keeps_arguments_exactly_and_knows_when_it_was_cut() -> None:
    head = {"index": 0, "id": "c1", "function": {"name": "get_weather", "arguments": ""}}
    pieces = [ARGUMENTS[:5], ARGUMENTS[5:]]
    stream = _chunk({"role": "assistant", "content": "Hi"}) + _chunk({"tool_calls": [head]})
    stream += "".join(_chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in pieces)
    whole = openai_chat.parse_response(stream + _chunk({}, "tool_calls") + "data: [DONE]\n\n", streamed=True)
    assert whole.tool_calls[0].arguments == ARGUMENTS and whole.text == "Hi"
    assert (whole.stop_reason, whole.complete, whole.model) == ("tool_call", True, "gpt-x-2026")
    cut = openai_chat.parse_response(stream, streamed=True)
    assert cut.complete is False and cut.stop_reason is None and cut.tool_calls[0].arguments == ARGUMENTS


def test_chat_request_reads_system_tools_sampling_and_tool_results() -> None:
    body = {
        "model": "gpt-x",
        "messages": [
            {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
            {"role": "user", "content": "hi"},
            {"role": "tool", "tool_call_id": "c1", "content": "24 °C"},
        ],
        "tools": [{"type": "function"}],
        "temperature": 0,
        "stream": True,
        "max_completion_tokens": 5,
    }
    request = openai_chat.parse_request(body)
    assert (request.model, request.system_prompt, request.tools) == (
        "gpt-x",
        "Be brief.",
        [{"type": "function"}],
    )
    assert request.sampling == {"temperature": 0, "max_completion_tokens": 5}
    assert [(r.id, r.output) for r in request.tool_results] == [("c1", "24 °C")]
    assert openai_chat.parse_request({"messages": [{"role": "user", "content": "x"}]}).system_prompt is None


def test_responses_reads_a_cut_stream_from_the_items_it_delivered() -> None:
    item = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": ARGUMENTS}
    events = [
        ("response.created", {"response": {"model": "gpt-r", "status": "in_progress", "output": []}}),
        ("response.output_item.done", {"item": item}),
    ]
    text = "".join(f"event: {k}\ndata: {json.dumps({'type': k, **v})}\n\n" for k, v in events)
    cut = openai_responses.parse_response(text, streamed=True)
    assert cut.complete is False and cut.model == "gpt-r" and cut.tool_calls[0].arguments == ARGUMENTS
    done = {
        "response": {
            "model": "gpt-r",
            "status": "incomplete",
            "output": [],
            "incomplete_details": {"reason": "max_output_tokens"},
        }
    }
    text += f"event: response.incomplete\ndata: {json.dumps({'type': 'response.incomplete', **done})}\n\n"
    assert openai_responses.parse_response(text, streamed=True).stop_reason == "max_tokens"
    request = openai_responses.parse_request(
        {
            "model": "m",
            "input": [
                {"role": "system", "content": "S"},
                {"type": "function_call_output", "call_id": "c1", "output": "ok"},
            ],
        }
    )
    assert request.system_prompt == "S" and [(r.id, r.output) for r in request.tool_results] == [("c1", "ok")]


def test_anthropic_keeps_what_a_cut_tool_input_delivered_and_maps_stop_reasons() -> None:
    def event(kind: str, **data: object) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"

    stream = event("message_start", message={"model": "claude-x"})
    stream += event(
        "content_block_start",
        index=0,
        content_block={"type": "tool_use", "id": "t1", "name": "f", "input": {}},
    )
    stream += event(
        "content_block_delta", index=0, delta={"type": "input_json_delta", "partial_json": '{"city": "Pa'}
    )
    cut = anthropic_messages.parse_response(stream, streamed=True)
    assert cut.tool_calls[0].arguments == '{"city": "Pa' and cut.complete is False
    message = {
        "model": "claude-x",
        "content": [{"type": "text", "text": "wait"}],
        "stop_reason": "pause_turn",
    }
    assert anthropic_messages.parse_response(json.dumps(message), streamed=False).stop_reason is None
    request = anthropic_messages.parse_request(
        {
            "model": "claude-x",
            "system": [{"type": "text", "text": "Sys"}],
            "max_tokens": 9,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": "t1",
                            "content": [{"type": "text", "text": "r"}],
                            "is_error": True,
                        }
                    ],
                }
            ],
        }
    )
    assert request.system_prompt == "Sys" and request.sampling == {"max_tokens": 9}
    [result] = request.tool_results
    assert result.is_error and result.output == [{"type": "text", "text": "r"}]


def test_spans_are_found_escaped_either_way_and_only_where_the_text_occurs() -> None:
    text = 'Café "quoted"\nline'
    for ensure_ascii in (False, True):
        body = json.dumps({"system": text, "other": "x"}, ensure_ascii=ensure_ascii).encode()
        [span] = locate_spans(body, [("system_prompt", text), ("memory:m", "absent"), ("memory:e", "")])
        assert json.loads(b'"' + body[span["start"] : span["end"]] + b'"') == text
        assert span["encoding"] == "json-string"

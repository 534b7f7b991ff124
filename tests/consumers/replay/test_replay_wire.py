"""Replay by fidelity: wire captures send their recorded bytes (one part spliced for a variation),
sdk and semantic captures are rebuilt from their rendering, and every report says what it can prove.

The end-to-end runs through the real SDKs are in ``tests/integrations/test_wire_replay.py``; here a
wire capture is built by hand around the scripted support capture, and the endpoint is a fake
:class:`WireClient` that answers scripted Chat Completions bodies and keeps what it was sent.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from replay_scripted import record_decision

from consumers.replay import (
    CallableModelClient,
    EndpointNotAllowed,
    EndpointPolicy,
    HttpToolBackend,
    OpenAICompatibleClient,
    Replayer,
    parse_variation,
    replay_with_report,
    report_json,
)
from consumers.replay.wire_client import WireReply
from consumers.replay.wire_request import WireCall
from producers.evidence import Signer, seal
from producers.wire.body import layout
from schemas.errors import CaptureNotReplayable, ContentHashMismatch

SYSTEM = "You are the refund agent. Be exact ☕."
MEMORY = "customer prefers email"
ARGUMENTS = '{ "customer_id" :"cus_0042"}'  # as the API returned it: not json.dumps' spacing
TOOLS = [{"type": "function", "function": {"name": "lookup_customer", "parameters": {"type": "object"}}}]


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _completion(message: dict[str, Any], finish: str) -> bytes:
    choice = {"index": 0, "message": message, "finish_reason": finish}
    return _compact({"id": "c", "object": "chat.completion", "model": "m-1", "choices": [choice]}).encode()


def _tool_reply(count: int = 1) -> bytes:
    calls = [
        {
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": "lookup_customer", "arguments": ARGUMENTS},
        }
        for n in range(count)
    ]
    return _completion({"role": "assistant", "content": None, "tool_calls": calls}, "tool_calls")


FINAL_REPLY = _completion({"role": "assistant", "content": "Refunded $120.00."}, "stop")


def _spans(body: str) -> list[dict[str, Any]]:
    raw = body.encode()
    spans = []
    for part, text in (("system_prompt", SYSTEM), ("memory:mem_00", MEMORY)):
        form = json.dumps(text, ensure_ascii=False)[1:-1].encode()
        start = raw.find(form)
        spans.append({"part": part, "start": start, "end": start + len(form), "encoding": "json-string"})
    return spans


def _model_call(sequence: int, body: str, response: bytes) -> dict[str, Any]:
    return {
        "sequence": sequence,
        "format": "openai.chat.completions",
        "method": "POST",
        "endpoint": "http://127.0.0.1:9",
        "path": "/v1/chat/completions",
        "query": None,
        "requestHeaders": [{"name": "content-type", "value": "application/json"}],
        "requestBody": body,
        "requestBodyEncoding": "utf-8",
        "requestBodyHash": None,
        "status": 200,
        "responseBody": response.decode(),
        "responseBodyEncoding": "utf-8",
        "responseBodyHash": None,
        "responseContentEncoding": None,
        "streamed": False,
        "complete": True,
        "attempts": 1,
        "error": None,
        "startedAt": "2026-07-23T13:00:00.000Z",
        "latencyMs": 5,
        "spans": _spans(body),
    }


def wire_capture(decision_id: str, *, second: str | None = None) -> dict[str, Any]:
    """The scripted support capture, recorded as a two-call wire capture of one tool loop."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"Refund me. Note: {MEMORY}"},
    ]
    first = _compact({"model": "acme-support", "messages": messages, "temperature": 0.2, "tools": TOOLS})
    echo = {
        "role": "assistant",
        "content": None,
        "tool_calls": json.loads(_tool_reply())["choices"][0]["message"]["tool_calls"],
    }
    result = {"role": "tool", "tool_call_id": "call_0", "content": '{"customer_id":"cus_0042"}'}
    later = _compact(
        {"model": "acme-support", "messages": [*messages, echo, result], "temperature": 0.2, "tools": TOOLS}
    )
    capture = record_decision(decision_id=decision_id)
    capture["fidelity"] = "wire"
    capture["memoryState"]["workingSetEntries"] = capture["memoryState"]["workingSetEntries"][:1]
    capture["memoryState"]["workingSetEntries"][0]["renderedContent"] = MEMORY
    for key in ("contextSetHash", "contextSetAlgorithm", "contextSetLeafCount"):
        capture["memoryState"].pop(key, None)
    capture["renderedContext"] = {
        "format": "openai.chat.completions",
        "text": first,
        "spans": _spans(first),
        "hash": None,
    }
    trace = capture["executionTrace"]
    trace["modelCalls"] = [_model_call(1, first, _tool_reply()), _model_call(2, second or later, FINAL_REPLY)]
    trace["toolCalls"] = [
        {
            "sequence": 1,
            "toolName": "lookup_customer",
            "input": ARGUMENTS,
            "inputHash": None,
            "output": '{"customer_id":"cus_0042"}',
            "outputHash": None,
            "latencyMs": None,
            "errorRef": None,
        }
    ]
    trace["finalOutputText"] = "Refunded $120.00."
    trace["stopReason"] = "end_turn"
    return capture


@dataclass
class FakeEndpoint:
    """A wire endpoint answering scripted bodies in order, keeping every body it was sent."""

    replies: list[bytes]
    sent: list[bytes] = field(default_factory=list)

    def destination(self, captured_endpoint: str | None) -> str:
        return "fake endpoint"

    def send(self, call: WireCall, body: bytes, *, captured_endpoint: str | None) -> WireReply:
        self.sent.append(body)
        return WireReply(status=200, body=self.replies.pop(0), streamed=False)


@pytest.fixture
def store(golden_dir: Path, signer: Signer) -> Callable[[dict[str, Any]], str]:
    def put(capture: dict[str, Any]) -> str:
        sealed = seal(capture, signer)
        (golden_dir / f"{capture['decisionId']}.json").write_text(json.dumps(sealed), encoding="utf-8")
        return str(capture["decisionId"])

    return put


def _wire_replayer(
    make_replayer: Callable[..., Replayer], endpoint: FakeEndpoint, **options: Any
) -> Replayer:
    return make_replayer(wire_client=endpoint, **options)


def test_a_wire_capture_sends_its_recorded_bytes_and_reproduces(
    make_replayer: Callable[..., Replayer], store: Callable[[dict[str, Any]], str]
) -> None:
    capture = wire_capture("dec_wire_ok")
    decision_id = store(capture)
    endpoint = FakeEndpoint([_tool_reply(), FINAL_REPLY])
    replayer = _wire_replayer(make_replayer, endpoint)
    report = replay_with_report(replayer, replayer.prepare(decision_id))

    body = report_json(report)
    assert body["fidelity"] == "wire" and "exact request bytes of all 2 model call(s)" in body["fidelityNote"]
    assert [c["part"] for c in body["requestChecks"]] == [
        "renderedContext.text",
        "executionTrace.modelCalls[0].requestBody",
        "executionTrace.modelCalls[1].requestBody",
    ]
    assert all(c["ok"] for c in body["requestChecks"])
    run = body["runs"][0]
    assert run["verdict"] == "reproduces the capture", run
    assert run["toolCalls"][0]["input"] == ARGUMENTS  # compared as the API returned it: a string
    calls = capture["executionTrace"]["modelCalls"]
    assert endpoint.sent == [call["requestBody"].encode() for call in calls]


@pytest.mark.parametrize(
    ("spec", "member", "value"),
    [
        ("model=acme-support-next", "model", "acme-support-next"),
        ("sampling.temperature=0.9", "temperature", 0.9),
        ("sampling.seed=7", "seed", 7),
        ("sampling.temperature=null", "temperature", None),
        ('tool_schema={"tools": []}', "tools", []),
    ],
)
def test_a_field_variation_changes_that_member_and_nothing_else(
    make_replayer: Callable[..., Replayer],
    store: Callable[[dict[str, Any]], str],
    spec: str,
    member: str,
    value: Any,
) -> None:
    capture = wire_capture(f"dec_wire_{member}_{value}".replace(".", "_"))
    decision_id = store(capture)
    endpoint = FakeEndpoint([_tool_reply(), FINAL_REPLY])
    replayer = _wire_replayer(make_replayer, endpoint)
    result = replayer.run(replayer.prepare(decision_id), variation=parse_variation(spec))

    assert result.replay_failure is None and len(endpoint.sent) == 2
    for sent, call in zip(endpoint.sent, capture["executionTrace"]["modelCalls"], strict=True):
        recorded = call["requestBody"].encode()
        expected = {k: v for k, v in json.loads(recorded).items() if k != member}
        if value is not None:
            expected[member] = value
        assert json.loads(sent) == expected
        old = layout(recorded).member(member)
        if old is not None and value is not None:  # replaced in place: the bytes around are the recording's
            new = layout(sent).member(member)
            assert new is not None
            assert sent[: new.start] == recorded[: old.start] and sent[new.end :] == recorded[old.end :]


def test_system_prompt_and_memory_variations_splice_their_recorded_spans(
    make_replayer: Callable[..., Replayer], store: Callable[[dict[str, Any]], str]
) -> None:
    capture = wire_capture("dec_wire_spans")
    decision_id = store(capture)
    recorded = [call["requestBody"].encode() for call in capture["executionTrace"]["modelCalls"]]
    for spec, part, text in (
        ('system_prompt=text:Be "brief" ✓', "system_prompt", 'Be "brief" ✓'),
        ('memory=["customer prefers phone"]', "memory:mem_00", "customer prefers phone"),
    ):
        endpoint = FakeEndpoint([_tool_reply(), FINAL_REPLY])
        replayer = _wire_replayer(make_replayer, endpoint)
        result = replayer.run(replayer.prepare(decision_id), variation=parse_variation(spec))
        assert result.replay_failure is None
        escaped = json.dumps(text, ensure_ascii=False)[1:-1].encode()
        for sent, body, call in zip(
            endpoint.sent, recorded, capture["executionTrace"]["modelCalls"], strict=True
        ):
            span = next(s for s in call["spans"] if s["part"] == part)
            assert sent == body[: span["start"]] + escaped + body[span["end"] :]


def test_a_variation_the_bytes_cannot_take_is_refused_in_one_line(
    make_replayer: Callable[..., Replayer], store: Callable[[dict[str, Any]], str]
) -> None:
    decision_id = store(wire_capture("dec_wire_refused"))
    replayer = _wire_replayer(make_replayer, FakeEndpoint([]))
    prepared = replayer.prepare(decision_id)
    for spec, message in (
        ('memory=["a", "b"]', "locates 1 memory entries"),
        ("sampling.messages=[]", "not a sampling parameter"),
        ("external_state.nope=1", "no external state"),
    ):
        with pytest.raises(Exception, match=message):
            replayer.run(prepared, variation=parse_variation(spec))


def test_a_later_call_not_rebuilt_byte_for_byte_diverges_at_its_model_call(
    make_replayer: Callable[..., Replayer], store: Callable[[dict[str, Any]], str]
) -> None:
    decision_id = store(wire_capture("dec_wire_rebuilt"))
    endpoint = FakeEndpoint([_tool_reply(), FINAL_REPLY])
    replayer = _wire_replayer(make_replayer, endpoint)
    prepared = replayer.prepare(decision_id)
    # What call 2 appends, as the replay would rebuild it, no longer matches the recorded call 2.
    inputs = prepared.inputs
    calls = list(inputs.calls)  # type: ignore[union-attr]
    calls[1] = replace(calls[1], appended=calls[1].appended.replace(b"call_0", b"call_X"))
    tampered = replace(prepared, inputs=replace(inputs, calls=tuple(calls)))  # type: ignore[type-var]

    result = replayer.run(tampered)
    divergence = result.divergence
    assert divergence is not None and divergence.call["modelCall"] == 2  # type: ignore[index]
    assert "model call 2: the request the replay built differs from the recorded request at byte" in str(
        divergence
    )
    assert len(endpoint.sent) == 1  # the differing request was never sent


def test_a_model_asking_for_other_tool_calls_than_recorded_diverges(
    make_replayer: Callable[..., Replayer], store: Callable[[dict[str, Any]], str]
) -> None:
    decision_id = store(wire_capture("dec_wire_two_calls"))
    endpoint = FakeEndpoint([_tool_reply(count=2)])
    result = _wire_replayer(make_replayer, endpoint).replay(decision_id, raise_on_replay_failure=False)
    assert result.divergence is not None and result.divergence.step == 2
    assert "unrecorded tool call #2" in str(result.divergence) and len(endpoint.sent) == 1


def test_a_tampered_recorded_body_is_refused_before_anything_is_sent(
    make_replayer: Callable[..., Replayer], golden_dir: Path, signer: Signer
) -> None:
    sealed = seal(wire_capture("dec_wire_tampered"), signer)
    call = sealed["executionTrace"]["modelCalls"][1]
    call["requestBody"] = call["requestBody"].replace("cus_0042", "cus_0043")
    (golden_dir / "dec_wire_tampered.json").write_text(json.dumps(sealed), encoding="utf-8")
    endpoint = FakeEndpoint([])

    with pytest.raises(ContentHashMismatch) as refused:
        _wire_replayer(make_replayer, endpoint).replay("dec_wire_tampered")
    assert refused.value.part == "executionTrace.modelCalls[1].requestBody"
    unverified = _wire_replayer(make_replayer, endpoint, verifier=None, allow_unverified=True)
    prepared = unverified.prepare("dec_wire_tampered")
    assert [c.part for c in prepared.checks if c.ok is False] == ["executionTrace.modelCalls[1].requestBody"]
    assert endpoint.sent == []


def test_a_wire_capture_needs_a_client_that_sends_bytes_and_no_live_tools(
    make_replayer: Callable[..., Replayer], store: Callable[[dict[str, Any]], str], tool_server: Any
) -> None:
    decision_id = store(wire_capture("dec_wire_callable"))
    callable_client = CallableModelClient(lambda request: {})
    with pytest.raises(CaptureNotReplayable, match="--model-endpoint"):
        make_replayer(client=callable_client).replay(decision_id)
    backend = HttpToolBackend(tool_server.url)
    try:
        live = make_replayer(wire_client=FakeEndpoint([]), live_tools=backend, live_reason="INC-1")
        with pytest.raises(CaptureNotReplayable, match="live tools"):
            live.replay(decision_id)
    finally:
        backend.close()


# -- sdk and semantic captures ------------------------------------------------------------------------------


def _with_string_arguments(capture: dict[str, Any]) -> dict[str, Any]:
    """The hand-instrumented capture an SDK user writes: each tool input exactly as the API returned
    it (the scripted model's ``function.arguments``, a JSON string)."""
    for call in capture["executionTrace"]["toolCalls"]:
        call["input"] = json.dumps(call["input"])
    return capture


@pytest.mark.parametrize("fidelity", ["sdk", "semantic"])
def test_sdk_and_semantic_captures_replay_through_their_rendering_and_say_what_they_prove(
    make_replayer: Callable[..., Replayer], store: Callable[[dict[str, Any]], str], fidelity: str
) -> None:
    capture = _with_string_arguments(record_decision(decision_id=f"dec_{fidelity}_strings"))
    if fidelity == "semantic":
        capture["fidelity"] = "semantic"
    decision_id = store(capture)
    replayer = make_replayer()
    body = report_json(replay_with_report(replayer, replayer.prepare(decision_id)))

    # Arguments recorded as the API returned them (strings) compare as given: no divergence at step 1.
    assert body["runs"][0]["verdict"] == "reproduces the capture", body["runs"][0]
    assert body["fidelity"] == fidelity
    if fidelity == "semantic":
        assert body["fidelityNote"].startswith("semantic capture: rebuilt from OpenTelemetry spans")
        assert "the exact bytes the model received were not captured" in body["fidelityNote"]
        assert "proves behaviour on this reconstruction only" in body["fidelityNote"]
    else:
        assert body["fidelityNote"].startswith("sdk capture: recorded by hand through the Recorder")


def test_the_table_report_states_the_fidelity(
    make_replayer: Callable[..., Replayer], capsys: pytest.CaptureFixture[str]
) -> None:
    from rich.console import Console

    from consumers.replay import render_table

    replayer = make_replayer()
    render_table(replay_with_report(replayer, replayer.prepare("dec_golden_identical")), Console(width=200))
    assert "fidelity: sdk capture: recorded by hand through the Recorder" in capsys.readouterr().out


def test_a_wire_capture_never_chooses_where_replay_connects(
    make_replayer: Callable[..., Replayer], store: Callable[[dict[str, Any]], str]
) -> None:
    decision_id = store(wire_capture("dec_wire_endpoint"))
    client = OpenAICompatibleClient(policy=EndpointPolicy())
    refused = "never dials an endpoint because a capture names it"
    with client, pytest.raises(EndpointNotAllowed, match=refused):
        make_replayer(client=client).replay(decision_id)

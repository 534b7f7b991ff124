"""``producers.integrations.otel.BlackboxSpanExporter``: GenAI spans into semantic captures.

The official GenAI instrumentation (``opentelemetry-instrumentation-genai-openai``) on a real
``openai`` client calling the local provider server, inside an agent span with a retrieval and a
tool execution made by ``opentelemetry-util-genai``: with content capture on, the capture carries the
system instructions, messages, tool definitions, tool calls, memory entries and sampling, fidelity
``semantic``, and verifies; with it off, content is absent (null), never empty. OpenInference
``llm.*`` spans are hand-built (no OpenInference package needed). Then consume → show → verify.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import openai
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Status, StatusCode
from opentelemetry.util.genai.handler import TelemetryHandler
from opentelemetry.util.genai.types import RetrievalDocument
from provider_server import NON_CANONICAL_ARGUMENTS, ProviderServer, Reply, ToolCall
from typer.testing import CliRunner

from producers.context import RenderedContext
from producers.evidence import Signer, TrustStore, verify_capture
from producers.integrations.otel import BlackboxSpanExporter, span_from_sdk
from producers.policy import CapturePolicy
from producers.recorder import CaptureFailure, Recorder
from producers.transports.spool.files import read_spool
from producers.transports.spool.sender import SpoolTransport
from schemas.codec import decode

SYSTEM = "You are a careful travel agent. Prices in EUR — always ☕ first."
DOC = "The customer prefers Celsius, café au lait ☕."
USER = f"Weather in Paris? Context: {DOC}"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
FINAL = "Sunny, 24 °C in Paris."


@dataclass
class Rig:
    recorder: Recorder
    spool: Path
    signer: Signer
    failures: list[CaptureFailure]

    def captures(self) -> list[dict[str, Any]]:
        assert self.recorder.flush(10)
        return [decode(record.value).value for record in read_spool(self.spool)]

    def trust(self) -> TrustStore:
        trust = TrustStore()
        trust.add(self.signer.public_raw, not_before=datetime(2000, 1, 1, tzinfo=UTC))
        return trust


def make_rig(spool: Path) -> Rig:
    signer = Signer(Ed25519PrivateKey.generate(), name="did:test:otel")
    failures: list[CaptureFailure] = []
    recorder = Recorder(
        agent_id="agt_otel",
        transport=SpoolTransport(spool, linger_ms=5),
        signer=signer,
        policy=CapturePolicy(sample_one_in=1),  # routine decisions in full: content is compared
        on_error=failures.append,
    )
    return Rig(recorder, spool, signer, failures)


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    rig = make_rig(tmp_path / "spool")
    yield rig
    rig.recorder.close(5)


def traced(rig: Rig) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": "travel-agent"}))
    provider.add_span_processor(BatchSpanProcessor(BlackboxSpanExporter(rig.recorder)))
    return provider


def run_agent(provider: TracerProvider, server: ProviderServer, *, fail_tool: bool = False) -> None:
    """An agent as a team writes it with the official instrumentation: agent span, retrieval, a chat
    call asking for a tool, the tool, a chat call answering."""
    OpenAIInstrumentor().instrument(tracer_provider=provider)  # reads the content mode now
    try:
        handler = TelemetryHandler(tracer_provider=provider)
        server.script(Reply(tool_calls=(ToolCall("get_weather"),)), Reply(text=FINAL))
        client = openai.OpenAI(api_key="sk-test-otel", base_url=server.openai_base_url)
        with handler.invoke_local_agent(agent_name="travel", request_model="gpt-test"):
            with handler.retrieval(data_source_id="kb") as retrieval:
                retrieval.documents = [  # a mapping carries the text too (util-genai serializes it as given)
                    {"id": "doc_7", "score": 0.92, "content": DOC},
                    RetrievalDocument(id="doc_9", score=0.41),
                ]
            messages: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]
            first = client.chat.completions.create(
                model="gpt-test",
                messages=messages,
                tools=TOOLS,
                temperature=0.2,
                max_tokens=300,
                seed=7,
                stop=["END"],
            )
            call = first.choices[0].message.tool_calls[0]
            with handler.tool("get_weather") as tool:
                tool.tool_call_id = call.id
                tool.arguments = call.function.arguments
                tool.tool_result = {"temp_c": 24}
            messages += [
                first.choices[0].message.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": call.id, "content": '{"temp_c": 24}'},
            ]
            client.chat.completions.create(model="gpt-test", messages=messages, tools=TOOLS, temperature=0.2)
    finally:
        OpenAIInstrumentor().uninstrument()
    provider.force_flush()


def test_an_instrumented_openai_agent_is_one_semantic_capture_with_its_content(
    rig: Rig, provider_server: ProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_only")
    run_agent(traced(rig), provider_server)
    (capture,) = rig.captures()
    verify_capture(capture, rig.trust())
    assert capture["fidelity"] == "semantic"
    config = capture["agentConfiguration"]
    assert config["systemPromptText"] == SYSTEM
    assert config["modelIdentifier"] == "gpt-test" and config["modelVersion"] == "gpt-test"
    assert config["toolSchemaJson"] == TOOLS
    assert config["samplingParameters"] == {"temperature": 0.2, "max_tokens": 300, "stop": ["END"], "seed": 7}
    rendered = RenderedContext.from_json(capture["renderedContext"])
    assert rendered.messages() == [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]
    assert rendered.part_text("system_prompt") == SYSTEM and rendered.part_text("user") == USER
    assert rendered.part_text("memory:doc_7") == DOC  # the retrieved text, located in what was sent
    entries = capture["memoryState"]["workingSetEntries"]
    assert [(e["entryId"], e["retrievalScore"], e["renderedContent"]) for e in entries] == [
        ("doc_7", 0.92, DOC),
        ("doc_9", 0.41, None),  # the span carried no text for it: absent
    ]
    assert all(e["provenance"] == {"writerId": None, "writtenAt": None, "sourceType": None} for e in entries)
    trace = capture["executionTrace"]
    (tool,) = trace["toolCalls"]
    assert tool["toolName"] == "get_weather"
    assert tool["input"] == NON_CANONICAL_ARGUMENTS  # as the tool span carried it: a string stays a string
    assert tool["output"] == '{"temp_c":24}'
    assert trace["finalOutputText"] == FINAL and trace["stopReason"] == "end_turn"
    assert trace["modelCalls"] == []  # spans carry no request bytes: none are invented
    assert capture["externalState"]["observableExternals"] == []
    assert rig.failures == []


def test_with_content_capture_off_the_content_is_absent_not_empty(
    rig: Rig, provider_server: ProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    run_agent(traced(rig), provider_server)
    (capture,) = rig.captures()
    verify_capture(capture, rig.trust())
    config = capture["agentConfiguration"]
    assert config["systemPromptText"] is None and config["toolSchemaJson"] is None
    assert capture["renderedContext"] is None
    trace = capture["executionTrace"]
    assert trace["finalOutputText"] is None
    (tool,) = trace["toolCalls"]
    assert (tool["toolName"], tool["input"], tool["output"]) == ("get_weather", None, None)
    # what is not content is still there: model, sampling, the tool's name
    assert config["modelIdentifier"] == "gpt-test" and config["samplingParameters"]["seed"] == 7
    # util-genai gates even document ids behind content capture: no entries, and the capture says why
    assert capture["memoryState"]["workingSetEntries"] == []
    assert "retrieval span 'retrieval kb' carries no documents" in capture["outcome"]["reason"]


def test_chat_calls_without_an_agent_span_are_a_decision_each(
    rig: Rig, provider_server: ProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_only")
    provider = traced(rig)
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    try:
        client = openai.OpenAI(api_key="sk-test-otel", base_url=provider_server.openai_base_url)
        provider_server.script(Reply(text="one"), Reply(text="two"))
        for text in ("first", "second"):
            client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": text}])
    finally:
        OpenAIInstrumentor().uninstrument()
    provider.force_flush()
    captures = rig.captures()
    assert [c["executionTrace"]["finalOutputText"] for c in captures] == ["one", "two"]
    assert [RenderedContext.from_json(c["renderedContext"]).part_text("user") for c in captures] == [
        "first",
        "second",
    ]
    assert all(c["agentConfiguration"]["systemPromptText"] is None for c in captures)


def _openinference_agent(provider: TracerProvider) -> None:
    tracer = provider.get_tracer("openinference-test")
    with tracer.start_as_current_span(
        "agent",
        attributes={
            "openinference.span.kind": "AGENT",
            "input.value": '{"question": "refund?"}',
            "input.mime_type": "application/json",
            "output.value": "Refunded $120.",
            "session.id": "sess_42",
            "user.id": "cus_42",
        },
    ):
        with tracer.start_as_current_span(
            "retrieve",
            attributes={
                "openinference.span.kind": "RETRIEVER",
                "retrieval.documents.0.document.id": "kb_1",
                "retrieval.documents.0.document.score": 0.8,
                "retrieval.documents.0.document.content": "Refunds under $200 need no approval.",
                "retrieval.documents.0.document.metadata": '{"source": "policy.md"}',
            },
        ):
            pass
        with tracer.start_as_current_span(
            "llm",
            attributes={
                "openinference.span.kind": "LLM",
                "llm.model_name": "gpt-oi",
                "llm.invocation_parameters": '{"temperature": 0.1, "max_tokens": 64, "stop": "END", "model": "gpt-oi"}',
                "llm.input_messages.0.message.role": "system",
                "llm.input_messages.0.message.content": "Be exact.",
                "llm.input_messages.1.message.role": "user",
                "llm.input_messages.1.message.content": "Refund 120? Policy: Refunds under $200 need no approval.",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.tool_calls.0.tool_call.id": "call_1",
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "refund",
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"amount": 120}',
                "llm.tools.0.tool.json_schema": json.dumps(TOOLS[0]),
            },
        ):
            pass
        with tracer.start_as_current_span(
            "refund",
            attributes={
                "openinference.span.kind": "TOOL",
                "tool.name": "refund",
                "input.value": '{"amount": 120}',
                "output.value": '{"ok": true}',
            },
        ) as tool:
            tool.set_status(Status(StatusCode.ERROR, "bank timeout"))


def test_openinference_spans_are_read_too(rig: Rig) -> None:
    provider = traced(rig)
    _openinference_agent(provider)
    provider.force_flush()
    (capture,) = rig.captures()
    verify_capture(capture, rig.trust())
    assert capture["fidelity"] == "semantic"
    assert capture["input"]["requestPayload"] == {"question": "refund?"}
    assert (capture["input"]["originUserId"], capture["input"]["originSessionId"]) == ("cus_42", "sess_42")
    config = capture["agentConfiguration"]
    assert (config["modelIdentifier"], config["systemPromptText"]) == ("gpt-oi", "Be exact.")
    assert config["samplingParameters"] == {"temperature": 0.1, "max_tokens": 64, "stop": ["END"]}
    assert config["toolSchemaJson"] == TOOLS
    rendered = RenderedContext.from_json(capture["renderedContext"])
    assert rendered.part_text("memory:kb_1") == "Refunds under $200 need no approval."
    (entry,) = capture["memoryState"]["workingSetEntries"]
    assert (entry["entryId"], entry["retrievalScore"]) == ("kb_1", 0.8)
    (tool,) = capture["executionTrace"]["toolCalls"]
    assert (tool["toolName"], tool["input"], tool["output"], tool["errorRef"]) == (
        "refund",
        '{"amount": 120}',
        '{"ok": true}',
        "bank timeout",
    )
    assert capture["executionTrace"]["finalOutputText"] == "Refunded $120."


def test_children_exported_before_their_root_wait_for_it_and_the_same_spans_give_the_same_capture(
    tmp_path: Path,
) -> None:

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    _openinference_agent(provider)
    spans = memory.get_finished_spans()
    assert [s.name for s in spans][-1] == "agent"  # children end first
    captures = []
    for run in ("a", "b"):
        rig = make_rig(tmp_path / run)
        exporter = BlackboxSpanExporter(rig.recorder)
        for span in spans:  # one export batch per span, the root last
            exporter.export([span])
            if span.name != "agent":
                assert rig.recorder.stats.enqueued == 0  # held until the root arrives
        assert rig.recorder.close(5)
        (capture,) = [decode(r.value).value for r in read_spool(tmp_path / run)]
        captures.append(capture)
    first, second = captures
    for capture in captures:
        capture.pop("signature")  # two recorders, two keys; everything else is the spans'
    assert first == second
    assert first["decisionId"].startswith("dec_")
    assert span_from_sdk(spans[-1]).local_root


def test_a_trace_whose_root_never_arrives_is_recorded_at_shutdown(rig: Rig) -> None:
    provider = TracerProvider()
    exporter = BlackboxSpanExporter(rig.recorder, hold_seconds=3600)

    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    _openinference_agent(provider)
    children = [s for s in memory.get_finished_spans() if s.name != "agent"]
    exporter.export(children)
    assert rig.recorder.stats.enqueued == 0
    exporter.shutdown()
    (capture,) = rig.captures()
    assert capture["agentConfiguration"]["modelIdentifier"] == "gpt-oi"  # the LLM span became the root


def test_without_the_sdk_the_import_names_the_extra() -> None:
    code = (
        "import sys\n"
        "sys.modules['opentelemetry.sdk'] = None\n"
        "try:\n"
        "    import producers.integrations.otel\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "pip install 'agent-blackbox[otel]'" in out, out


def test_consume_show_and_verify_an_exported_capture(
    provider_server: ProviderServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from consumers.cli import app

    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_only")
    data = tmp_path / "bb"
    rig = make_rig(data / "spool")
    rig.trust().save(data / "trust.toml")
    run_agent(traced(rig), provider_server)
    (decision_id,) = [c["decisionId"] for c in rig.captures()]
    assert rig.recorder.close(10)

    env = {"BLACKBOX_DATA_DIR": str(data), "BLACKBOX_TRANSPORT": "spool", "BLACKBOX_BLOB": "local"}
    runner = CliRunner()
    consumed = runner.invoke(app, ["consume", "--drain", "--max-wait", "0.1"], env=env)
    assert consumed.exit_code == 0 and "indexed=1" in consumed.output, consumed.output
    shown = runner.invoke(app, ["show", decision_id, "--json"], env=env)
    assert shown.exit_code == 0, shown.output
    view = json.loads(shown.stdout)
    assert view["capture"]["fidelity"] == "semantic" and view["stored"]["fidelity"] == "semantic"
    assert view["capture"]["agentConfiguration"]["systemPromptText"] == SYSTEM
    text = runner.invoke(app, ["show", decision_id], env=env)
    assert text.exit_code == 0 and "fidelity=semantic" in text.output, text.output
    verified = runner.invoke(app, ["verify", decision_id], env=env)
    assert verified.exit_code == 0, verified.output

"""``blackbox otlp``: OTLP/HTTP traces (protobuf and JSON) from any runtime into signed semantic captures.

The real ``OTLPSpanExporter`` (opentelemetry-exporter-otlp-proto-http, plain and gzip) and a
hand-written OTLP JSON request are accepted; the captures are signed with the receiver's own key
and delivered to the spool. A malformed body is 400 with the reason and nothing of it is written,
even when only its last span is bad. Then the real command in a subprocess, and consume → show →
verify; and a received tool loop replayed through its semantic rendering (``--model-callable``).
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from google.rpc import status_pb2
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from typer.testing import CliRunner

from consumers.app.settings import load_service_settings
from consumers.otlp import ListenRefused, OtlpService, ReceiverOptions, parse_listen
from producers.evidence import TrustStore, load_signer, verify_capture
from producers.transports.spool.files import read_spool
from schemas.codec import decode

SEED_B64 = base64.b64encode(bytes(range(32))).decode()
SYSTEM = "Answer in French. ☕"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "bb"


@pytest.fixture
def service(data_dir: Path) -> Iterator[OtlpService]:
    settings = load_service_settings(
        data_dir=data_dir, transport="spool", blob="local", signing_key_b64=SEED_B64, capture_sample_one_in=1
    )
    service = OtlpService(
        settings,
        signer=load_signer(b64=SEED_B64),
        options=ReceiverOptions(listen=parse_listen("127.0.0.1:0")),
    )
    service.start()
    yield service
    service.close(10)


def captures(service: OtlpService, data_dir: Path) -> list[dict[str, Any]]:
    assert service.recorders.flush(10)
    return [decode(record.value).value for record in read_spool(data_dir / "spool")]


def trust() -> TrustStore:
    store = TrustStore()
    store.add(load_signer(b64=SEED_B64).public_raw, not_before=datetime(2000, 1, 1, tzinfo=UTC))
    return store


def export_agent(endpoint: str, *, compression: Compression = Compression.NoCompression) -> None:
    """A Python runtime exporting OTLP the ordinary way: an agent span and a chat span with content."""
    provider = TracerProvider(resource=Resource.create({"service.name": "agt_billing"}))
    provider.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint, compression=compression))
    )
    tracer = provider.get_tracer("test")
    with (
        tracer.start_as_current_span(
            "invoke_agent billing", attributes={"gen_ai.operation.name": "invoke_agent"}
        ),
        tracer.start_as_current_span(
            "chat gpt-x",
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "gpt-x",
                "gen_ai.request.temperature": 0.0,
                "gen_ai.system_instructions": json.dumps([{"type": "text", "content": SYSTEM}]),
                "gen_ai.input.messages": json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": "Bonjour?"}]}]
                ),
                "gen_ai.output.messages": json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": "Bonjour !"}]}]
                ),
                "gen_ai.response.finish_reasons": ("stop",),
            },
        ),
    ):
        pass
    provider.shutdown()


def post(url: str, body: bytes, content_type: str, **headers: str) -> tuple[int, bytes]:
    request = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": content_type, **headers}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def json_request(spans: list[dict[str, Any]]) -> bytes:
    return json.dumps(
        {
            "resourceSpans": [
                {
                    "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "agt_go"}}]},
                    "scopeSpans": [{"scope": {"name": "go-genai"}, "spans": spans}],
                }
            ]
        }
    ).encode()


def json_chat_span(span_id: str = "00f067aa0ba902b7", **overrides: Any) -> dict[str, Any]:
    span = {
        "traceId": "4bf92f3577b34da6a3ce929d0e0e4736",
        "spanId": span_id,
        "name": "chat gpt-go",
        "kind": 3,
        "startTimeUnixNano": "1767225600000000000",
        "endTimeUnixNano": "1767225600250000000",
        "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
            {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-go"}},
            {"key": "gen_ai.request.max_tokens", "value": {"intValue": "256"}},
            {
                "key": "gen_ai.request.stop_sequences",
                "value": {"arrayValue": {"values": [{"stringValue": "END"}]}},
            },
            {
                # a structured attribute, as SDKs with complex attribute support send it
                "key": "gen_ai.input.messages",
                "value": {
                    "arrayValue": {
                        "values": [
                            {
                                "kvlistValue": {
                                    "values": [
                                        {"key": "role", "value": {"stringValue": "user"}},
                                        {
                                            "key": "parts",
                                            "value": {
                                                "arrayValue": {
                                                    "values": [
                                                        {
                                                            "kvlistValue": {
                                                                "values": [
                                                                    {
                                                                        "key": "type",
                                                                        "value": {"stringValue": "text"},
                                                                    },
                                                                    {
                                                                        "key": "content",
                                                                        "value": {"stringValue": "Hola"},
                                                                    },
                                                                ]
                                                            }
                                                        }
                                                    ]
                                                }
                                            },
                                        },
                                    ]
                                }
                            }
                        ]
                    }
                },
            },
        ],
        "status": {},
    }
    span.update(overrides)
    return span


def test_a_protobuf_export_from_the_real_exporter_becomes_a_signed_semantic_capture(
    service: OtlpService, data_dir: Path
) -> None:
    export_agent(service.url)
    (capture,) = captures(service, data_dir)
    verify_capture(capture, trust())  # signed with the receiver's own key
    assert capture["agentId"] == "agt_billing"  # the runtime's service.name
    assert capture["fidelity"] == "semantic"
    assert capture["agentConfiguration"]["systemPromptText"] == SYSTEM
    assert capture["agentConfiguration"]["samplingParameters"] == {"temperature": 0.0}
    assert json.loads(capture["renderedContext"]["text"]) == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Bonjour?"},
    ]
    assert capture["executionTrace"]["finalOutputText"] == "Bonjour !"
    assert service.receiver.stats.spans == 2 and service.receiver.stats.decisions == 1


def test_a_gzip_export_is_accepted(service: OtlpService, data_dir: Path) -> None:
    export_agent(service.url, compression=Compression.Gzip)
    assert len(captures(service, data_dir)) == 1


def test_a_json_export_is_accepted(service: OtlpService, data_dir: Path) -> None:
    status, body = post(service.url, json_request([json_chat_span()]), "application/json")
    assert (status, body) == (200, b"{}")
    (capture,) = captures(service, data_dir)
    verify_capture(capture, trust())
    assert capture["agentId"] == "agt_go"
    assert capture["capturedAt"] == "2026-01-01T00:00:00.250Z"  # the root span's end, not the clock
    config = capture["agentConfiguration"]
    assert config["modelIdentifier"] == "gpt-go"
    assert config["samplingParameters"] == {"max_tokens": 256, "stop": ["END"]}
    assert json.loads(capture["renderedContext"]["text"]) == [{"role": "user", "content": "Hola"}]
    assert capture["executionTrace"]["totalLatencyMs"] == 250


@pytest.mark.parametrize(
    ("body", "content_type", "reason"),
    [
        (b"\xff\xff\xff garbage", "application/x-protobuf", "not an OTLP protobuf ExportTraceServiceRequest"),
        (b"{not json", "application/json", "not JSON"),
        (json_request([json_chat_span(traceId="zz")]), "application/json", "spans[0].traceId is not hex"),
        (
            json_request([json_chat_span(), json_chat_span(span_id="0102")]),  # the 2nd of 2 spans is bad
            "application/json",
            "resourceSpans[0].scopeSpans[0].spans[1].spanId must be 8 bytes",
        ),
        (json_request([json_chat_span(startTimeUnixNano="soon")]), "application/json", "startTimeUnixNano"),
    ],
)
def test_a_malformed_body_is_400_with_the_reason_and_nothing_is_written(
    service: OtlpService, data_dir: Path, body: bytes, content_type: str, reason: str
) -> None:
    status, answer = post(service.url, body, content_type)
    assert status == 400
    if content_type == "application/json":
        message = json.loads(answer)["message"]
    else:
        parsed = status_pb2.Status()
        parsed.ParseFromString(answer)
        message = parsed.message
    assert reason in message, message
    assert captures(service, data_dir) == []
    assert service.recorders.agents == []  # not even a recorder was opened
    assert service.receiver.stats.rejected == 1


def test_limits_route_and_content_type(service: OtlpService, data_dir: Path) -> None:
    url = service.url
    service.receiver.max_body_bytes = 100
    assert post(url, b"x" * 101, "application/x-protobuf")[0] == 413
    bomb = gzip.compress(b"\0" * 10_000)
    assert post(url, bomb, "application/x-protobuf", **{"Content-Encoding": "gzip"})[0] == 413
    assert post(url, b"{}", "text/plain")[0] == 415
    assert post(url.replace("/v1/traces", "/v1/logs"), b"{}", "application/json")[0] == 404
    assert post(url, b"{}", "application/json", **{"Content-Encoding": "br"})[0] == 415
    assert captures(service, data_dir) == []


def test_the_receiver_listens_on_loopback_unless_told_otherwise() -> None:
    assert parse_listen("127.0.0.1:4318").loopback and parse_listen("[::1]:4318").loopback
    with pytest.raises(ListenRefused, match="not a loopback address"):
        parse_listen("0.0.0.0:4318")
    assert not parse_listen("0.0.0.0:4318", allow_remote=True).loopback
    with pytest.raises(ListenRefused, match="HOST:PORT"):
        parse_listen("4318x")
    from consumers.cli import app

    result = CliRunner().invoke(app, ["otlp", "--listen", "0.0.0.0:4318"])
    assert result.exit_code != 0 and isinstance(result.exception, ListenRefused)


def test_the_otlp_command_then_consume_show_and_verify(data_dir: Path) -> None:
    from consumers.cli import app

    data_dir.mkdir(parents=True)
    trust().save(data_dir / "trust.toml")
    env = {
        **os.environ,
        "BLACKBOX_DATA_DIR": str(data_dir),
        "BLACKBOX_TRANSPORT": "spool",
        "BLACKBOX_BLOB": "local",
        "BLACKBOX_SIGNING_KEY_B64": SEED_B64,
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from consumers.cli import main; main()",
            "otlp",
            "--listen",
            "127.0.0.1:0",
            "--consequential",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        if line.startswith("the data directory is readable beyond its owner"):  # made by this test, 0755
            line = proc.stderr.readline()
        assert line.startswith("receiving OTLP traces on http://127.0.0.1:"), line
        export_agent(line.split(" on ", 1)[1].strip())
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "spans=2 decisions=1 agents=agt_billing delivered=all" in out, out

    runner = CliRunner()
    cli_env = {k: env[k] for k in ("BLACKBOX_DATA_DIR", "BLACKBOX_TRANSPORT", "BLACKBOX_BLOB")}
    records = list(read_spool(data_dir / "spool"))  # read first: ingest deletes it once consumed
    consumed = runner.invoke(app, ["consume", "--drain", "--max-wait", "0.1"], env=cli_env)
    assert consumed.exit_code == 0 and "indexed=1" in consumed.output, consumed.output
    assert len(records) == 1, records
    decision_id = decode(records[0].value).value["decisionId"]
    shown = runner.invoke(app, ["show", decision_id, "--json"], env=cli_env)
    assert shown.exit_code == 0, shown.output
    view = json.loads(shown.stdout)
    assert view["capture"]["fidelity"] == "semantic" and view["capture"]["consequential"]["flagged"] is True
    verified = runner.invoke(app, ["verify", decision_id], env=cli_env)
    assert verified.exit_code == 0, verified.output


TOOL_DEFINITIONS = [
    {
        "type": "function",
        "function": {
            "name": "get_invoice",
            "description": "An invoice by id",
            "parameters": {"type": "object", "properties": {"invoice_id": {"type": "string"}}},
        },
    }
]
INVOICE = '{"invoice_id":"inv_9","total":"120.00 €"}'
REPLAY_FINAL = "La facture inv_9 est de 120,00 €."
REPLAY_REQUESTS: list[dict[str, Any]] = []


def replay_model(request: dict[str, Any]) -> dict[str, Any]:
    """The in-process model of the replay below (``--model-callable test_receiver:replay_model``):
    asks for the invoice tool until it has its answer, then answers."""
    REPLAY_REQUESTS.append(request)
    answered = any(m["role"] == "tool" for m in request["messages"])
    message: dict[str, Any] = {"role": "assistant", "content": REPLAY_FINAL if answered else None}
    if not answered:
        message["tool_calls"] = [
            {
                "id": "call_inv",
                "type": "function",
                "function": {"name": "get_invoice", "arguments": '{"invoice_id": "inv_9"}'},
            }
        ]
    return {
        "id": "chatcmpl-replay",
        "object": "chat.completion",
        "created": 0,
        "model": request["model"],
        "choices": [{"index": 0, "message": message, "finish_reason": "stop" if answered else "tool_calls"}],
    }


def export_tool_agent(endpoint: str) -> None:
    """An agent exporting OTLP with a tool loop: chat asks for a tool, the tool runs, chat answers."""
    provider = TracerProvider(resource=Resource.create({"service.name": "agt_billing"}))
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    tracer = provider.get_tracer("test")
    system = json.dumps([{"type": "text", "content": SYSTEM}])
    user = {"role": "user", "parts": [{"type": "text", "content": "Invoice inv_9?"}]}
    call = {
        "type": "tool_call",
        "id": "call_inv",
        "name": "get_invoice",
        "arguments": {"invoice_id": "inv_9"},
    }
    answer = {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": "call_inv", "response": INVOICE}],
    }
    chat: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-x",
        "gen_ai.request.temperature": 0.0,
        "gen_ai.system_instructions": system,
        "gen_ai.tool.definitions": json.dumps(TOOL_DEFINITIONS),
    }
    with tracer.start_as_current_span(
        "invoke_agent billing", attributes={"gen_ai.operation.name": "invoke_agent"}
    ):
        with tracer.start_as_current_span(
            "chat gpt-x",
            attributes={
                **chat,
                "gen_ai.input.messages": json.dumps([user]),
                "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [call]}]),
                "gen_ai.response.finish_reasons": ("tool_calls",),
            },
        ):
            pass
        with tracer.start_as_current_span(
            "execute_tool get_invoice",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_invoice",
                "gen_ai.tool.call.id": "call_inv",
                "gen_ai.tool.call.arguments": '{"invoice_id": "inv_9"}',
                "gen_ai.tool.call.result": INVOICE,
            },
        ):
            pass
        with tracer.start_as_current_span(
            "chat gpt-x",
            attributes={
                **chat,
                "gen_ai.input.messages": json.dumps([user, {"role": "assistant", "parts": [call]}, answer]),
                "gen_ai.output.messages": json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": REPLAY_FINAL}]}]
                ),
                "gen_ai.response.finish_reasons": ("stop",),
            },
        ):
            pass
    provider.shutdown()


def test_a_received_capture_replays_through_its_semantic_rendering(
    service: OtlpService, data_dir: Path
) -> None:
    from consumers.cli import app

    export_tool_agent(service.url)
    (capture,) = captures(service, data_dir)
    trust().save(data_dir / "trust.toml")
    env = {"BLACKBOX_DATA_DIR": str(data_dir), "BLACKBOX_TRANSPORT": "spool", "BLACKBOX_BLOB": "local"}
    runner = CliRunner()
    consumed = runner.invoke(app, ["consume", "--drain", "--max-wait", "0.1"], env=env)
    assert consumed.exit_code == 0 and "indexed=1" in consumed.output, consumed.output
    assert runner.invoke(app, ["verify", capture["decisionId"]], env=env).exit_code == 0

    REPLAY_REQUESTS.clear()
    replayed = runner.invoke(
        app,
        ["replay", capture["decisionId"], "--model-callable", "test_receiver:replay_model", "--json"],
        env=env,
    )
    assert replayed.exit_code == 0, replayed.output
    report = json.loads(replayed.stdout)
    assert report["verified"] is True and all(check["ok"] for check in report["requestChecks"])
    assert report["fidelity"] == "semantic"
    assert "the exact bytes the model received were not captured" in report["fidelityNote"]
    assert "proves behaviour on this reconstruction only" in report["fidelityNote"]
    (run,) = report["runs"]
    assert run["error"] is None and run["verdict"] == "reproduces the capture", run
    assert run["finalOutput"] == REPLAY_FINAL and run["toolCallsEqual"]
    assert [c["source"] for c in run["toolCalls"]] == ["recorded"]  # never a live call
    first, second = REPLAY_REQUESTS
    # What the spans carried: system instructions, the user's message, tool definitions, sampling.
    assert first["messages"] == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Invoice inv_9?"},
    ]
    assert first["tools"] == TOOL_DEFINITIONS and first["model"] == "gpt-x" and first["temperature"] == 0.0
    # The tool is answered from the recording: the execute_tool span's result goes back to the model.
    assert second["messages"][:2] == first["messages"]
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "call_inv", "content": INVOICE}

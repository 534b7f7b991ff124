"""A Go agent exporting GenAI spans with the OpenTelemetry Go SDK's ``otlptracehttp`` exporter
(protobuf, gzip; from the Go module proxy, built by the test command) to ``blackbox serve``: an
agent span around a tool loop. The decision comes out of ``show --json`` whole and verifies.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from interop_world import HERE, Serving, ingested, installed
from typer.testing import CliRunner

from consumers.cli import app as cli

SYSTEM = "You are the billing assistant. Answer in one sentence."


@pytest.mark.timeout(240)
def test_a_go_otel_sdk_agent_is_recorded_whole_and_verifies(
    serve: Serving, blackbox_env: dict[str, str]
) -> None:
    exporter = installed(
        HERE / "go" / "bin" / "exporter", "cd tests/interop/go && go build -o bin/exporter ."
    )
    ran = subprocess.run(
        [str(exporter), f"{serve.url}/v1/traces", "agt_go"], capture_output=True, text=True, timeout=120
    )
    assert ran.returncode == 0 and ran.stdout.strip() == "exported", ran.stderr
    (decision_id,) = ingested(serve, blackbox_env, 1)  # serve stopped: the CLI opens the index

    runner = CliRunner()
    shown = runner.invoke(cli, ["show", decision_id, "--json"], env=blackbox_env)
    assert shown.exit_code == 0, shown.output
    view = json.loads(shown.stdout)
    assert view["verification"]["verdict"] == "verified"
    capture = view["capture"]
    config = capture["agentConfiguration"]
    assert capture["agentId"] == "agt_go" and capture["fidelity"] == "semantic"
    assert config["systemPromptText"] == SYSTEM
    assert config["modelIdentifier"] == "gpt-go" and config["samplingParameters"] == {"temperature": 0.3}
    assert json.loads(capture["renderedContext"]["text"]) == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "How much is invoice inv_9?"},
    ]
    (call,) = capture["executionTrace"]["toolCalls"]
    assert call["toolName"] == "getInvoice" and json.loads(call["input"]) == {"invoiceId": "inv_9"}
    assert json.loads(call["output"]) == {"invoiceId": "inv_9", "total": "120.00 EUR"}
    assert capture["executionTrace"]["finalOutputText"] == "Invoice inv_9 totals 120.00 EUR."
    assert runner.invoke(cli, ["verify", decision_id], env=blackbox_env).exit_code == 0

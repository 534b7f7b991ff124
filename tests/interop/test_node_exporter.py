"""A TypeScript agent on the Vercel AI SDK 7 exporting to blackbox (issue 25, item 4; README
"OpenTelemetry"): ``ai`` + ``@ai-sdk/otel`` + the OpenTelemetry JS SDK, a mock model from
``ai/test`` driving a two-step tool loop under a system prompt, exported with the official OTLP
exporters (protobuf and JSON over HTTP; the JS exporters send chunked bodies) to ``blackbox serve``.
The decision comes out of ``show --json`` whole and verifies.
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid

import pytest
from interop_world import HERE, Serving, ingested, installed, which
from typer.testing import CliRunner

from consumers.cli import app as cli

NODE_DIR = HERE / "node"


@pytest.mark.parametrize("encoding", ["proto", "json"])
@pytest.mark.timeout(240)
def test_a_vercel_ai_sdk_agent_is_recorded_whole_and_verifies(
    serve: Serving, blackbox_env: dict[str, str], encoding: str
) -> None:
    installed(NODE_DIR / "node_modules" / "ai", "npm ci --prefix tests/interop/node")
    agent = f"agt_node_{encoding}"
    ran = subprocess.run(
        [which("node"), "agent.mjs", f"{serve.url}/v1/traces", encoding, agent],
        cwd=NODE_DIR,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == {"text": "Invoice inv_9 totals 120.00 EUR.", "steps": 2}
    (decision_id,) = ingested(serve, blackbox_env, 1)

    runner = CliRunner()
    shown = runner.invoke(cli, ["show", decision_id, "--json"], env=blackbox_env)
    assert shown.exit_code == 0, shown.output
    view = json.loads(shown.stdout)
    assert view["verification"]["verdict"] == "verified"
    capture = view["capture"]
    config = capture["agentConfiguration"]
    assert capture["agentId"] == agent and capture["fidelity"] == "semantic"
    assert config["systemPromptText"] == "You are the billing assistant. Answer in one sentence."
    assert config["modelIdentifier"] == "mock-invoice-model"
    assert config["samplingParameters"] == {"temperature": 0.3}
    assert [t["function"]["name"] for t in config["toolSchemaJson"]] == ["getInvoice"]
    assert json.loads(capture["renderedContext"]["text"]) == [
        {"role": "system", "content": "You are the billing assistant. Answer in one sentence."},
        {"role": "user", "content": "How much is invoice inv_9?"},
    ]
    (call,) = capture["executionTrace"]["toolCalls"]
    assert call["toolName"] == "getInvoice"
    assert json.loads(call["input"]) == {"invoiceId": "inv_9"}
    assert json.loads(call["output"]) == {"invoiceId": "inv_9", "total": "120.00 EUR"}
    assert capture["executionTrace"]["finalOutputText"] == "Invoice inv_9 totals 120.00 EUR."
    verified = runner.invoke(cli, ["verify", decision_id], env=blackbox_env)
    assert verified.exit_code == 0, verified.output


@pytest.mark.timeout(240)
def test_the_readme_node_example_runs_against_blackbox_serve(
    serve: Serving, blackbox_env: dict[str, str]
) -> None:
    """README "OpenTelemetry": its JavaScript block, as written, with the agent of the tests above in
    place of ``runYourAgent()`` and this serve's address in place of the default one."""
    readme = (HERE.parents[1] / "README.md").read_text(encoding="utf-8")
    section = re.split(r"\n##+ ", readme.split("\n### OpenTelemetry\n", 1)[1], maxsplit=1)[0]
    (block,) = re.findall(r"```js\n(.*?)```", section, flags=re.S)
    assert "await runYourAgent();" in block and "http://127.0.0.1:8700/v1/traces" in block
    program = block.replace(
        "await runYourAgent();", "const { billingAgent } = await import('./loop.mjs');\nawait billingAgent();"
    ).replace("http://127.0.0.1:8700/v1/traces", f"{serve.url}/v1/traces")
    script = NODE_DIR / f".readme-{uuid.uuid4().hex[:8]}.mjs"  # beside node_modules, so its imports resolve
    script.write_text(program, encoding="utf-8")
    try:
        ran = subprocess.run(
            [which("node"), script.name], cwd=NODE_DIR, capture_output=True, text=True, timeout=120
        )
    finally:
        script.unlink()
    assert ran.returncode == 0, ran.stderr
    (decision_id,) = ingested(serve, blackbox_env, 1)  # serve stopped: the CLI opens the index
    shown = CliRunner().invoke(cli, ["show", decision_id, "--json"], env=blackbox_env)
    view = json.loads(shown.stdout)
    assert view["verification"]["verdict"] == "verified" and view["capture"]["agentId"] == "agt_billing"
    (call,) = view["capture"]["executionTrace"]["toolCalls"]
    assert call["toolName"] == "getInvoice"

"""Wire captures from a Node agent on the real ``@anthropic-ai/sdk`` client (Messages, plain and
streamed) through ``captureFetch``: Python consumes and verifies them, the request bytes are what
the scripted server received, tool inputs are the objects the API returned, no key is recorded."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from node_sdk import build_package, node
from typer.testing import CliRunner

from producers.evidence import TrustStore, load_signer

sys.path.append(str(Path(__file__).resolve().parents[2] / "integrations"))
from provider_server import ProviderServer, Reply, ToolCall

SEED_B64 = (Path(__file__).resolve().parents[1] / "evidence" / "golden" / "test-key.seed").read_text().strip()
SECRET = "sk-ant-node-SECRET-3"


@pytest.fixture
def server() -> Iterator[ProviderServer]:
    with ProviderServer() as running:
        yield running


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_node_anthropic_capture_ingests_and_verifies(
    server: ProviderServer, tmp_path: Path, stream: bool
) -> None:
    build_package()
    data = tmp_path / "bb"
    data.mkdir()
    trust = TrustStore()
    trust.add(load_signer(b64=SEED_B64).public_raw, not_before=datetime(2000, 1, 1, tzinfo=UTC))
    trust.save(data / "trust.toml")
    server.script(Reply(tool_calls=(ToolCall("get_weather"),)), Reply(text="Sunny, 24 °C."))
    done = node(
        ["dist/examples/anthropic-agent.js", *(["stream"] if stream else [])],
        env={
            "BLACKBOX_SPOOL_DIR": str(data / "spool"),
            "BLACKBOX_SIGNING_KEY_B64": SEED_B64,
            "MODEL_BASE_URL": server.anthropic_base_url,
            "MODEL_API_KEY": SECRET,
        },
    )
    assert done.returncode == 0, done.stderr
    ran = json.loads(done.stdout)
    assert ran["problems"] == [] and ran["stats"]["failed"] == 0
    env = {"BLACKBOX_DATA_DIR": str(data), "BLACKBOX_TRANSPORT": "spool", "BLACKBOX_BLOB": "local"}
    from consumers.cli import app

    runner = CliRunner()
    consumed = runner.invoke(app, ["consume", "--drain", "--max-wait", "0.1"], env=env)
    assert consumed.exit_code == 0 and "indexed=1" in consumed.output, consumed.output
    assert runner.invoke(app, ["verify", ran["id"]], env=env).exit_code == 0
    capture = json.loads(runner.invoke(app, ["show", ran["id"], "--json"], env=env).stdout)["capture"]
    calls = capture["executionTrace"]["modelCalls"]
    assert [c["format"] for c in calls] == ["anthropic.messages"] * 2
    assert [c["requestBody"].encode() for c in calls] == [r.body for r in server.received]
    assert all(c["streamed"] is stream and c["complete"] for c in calls)
    trace = capture["executionTrace"]
    assert trace["finalOutputText"] == "Sunny, 24 °C." and trace["stopReason"] == "end_turn"
    (tool,) = trace["toolCalls"]
    assert tool["toolName"] == "get_weather" and tool["input"] == {
        "city": "Paris",
        "units": "metric",
        "days": [1, 2, 3],
    }
    assert capture["agentConfiguration"]["systemPromptText"].startswith("You are a careful travel agent")
    assert {s["part"] for s in calls[0]["spans"]} == {"system_prompt", "memory:mem_pref"}
    headers = {h["name"] for c in calls for h in c["requestHeaders"]}
    assert "anthropic-version" in headers and "x-api-key" not in headers
    assert SECRET not in json.dumps(capture)

"""Wire captures from a Node agent on the real ``openai`` client and the Vercel AI SDK.

The agent (``producers/typescript/examples/openai-agent.ts``) talks to the integration tests'
scripted provider server through ``captureFetch``: a three-step tool loop in one decision (plain or
streamed, one retried attempt after a 500) and one ``@ai-sdk/openai`` call outside any decision.
Python consumes, verifies and replays them: the recorded request bytes are what the server received,
no credential is recorded, and ``blackbox replay --vary memory.drop=...`` changes only the memory
span of each call's bytes.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from node_sdk import build_package, node
from typer.testing import CliRunner

from producers.evidence import TrustStore, load_signer

sys.path.append(str(Path(__file__).resolve().parents[2] / "integrations"))
from provider_server import ProviderServer, Reply, ToolCall

SEED_B64 = (Path(__file__).resolve().parents[1] / "evidence" / "golden" / "test-key.seed").read_text().strip()
SECRET = "sk-node-SECRET-wire-7"
MEMORY = "the customer prefers Celsius, café au lait ☕."
NEW_MEMORY = "the customer prefers Fahrenheit ☃."
FINAL = "Sunny, 24 °C in Paris."
SCRIPT = (
    Reply(tool_calls=(ToolCall("get_weather"),)),
    Reply(
        text="One more lookup.", tool_calls=(ToolCall("get_time", '{"tz" :  "Europe/Paris"}', id="call_2"),)
    ),
    Reply(text=FINAL),
)


@pytest.fixture(scope="module")
def package() -> Path:
    return build_package()


@pytest.fixture
def server() -> Iterator[ProviderServer]:
    with ProviderServer() as running:
        yield running


def _cli(env: dict[str, str], *args: str) -> Any:
    result = CliRunner().invoke(_app(), list(args), env=env)
    assert result.exit_code == 0, result.output
    return result


def _app() -> Any:
    from consumers.cli import app

    return app


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_node_wire_captures_ingest_verify_and_replay(
    package: Path, server: ProviderServer, tmp_path: Path, stream: bool
) -> None:
    data = tmp_path / "bb"
    data.mkdir()
    trust = TrustStore()
    trust.add(load_signer(b64=SEED_B64).public_raw, not_before=datetime(2000, 1, 1, tzinfo=UTC))
    trust.save(data / "trust.toml")
    env = {"BLACKBOX_DATA_DIR": str(data), "BLACKBOX_TRANSPORT": "spool", "BLACKBOX_BLOB": "local"}
    server.fail_next(500)  # the first attempt fails; the openai client retries it
    server.script(*SCRIPT, Reply(text="Drizzle."))
    done = node(
        ["dist/examples/openai-agent.js", *(["stream"] if stream else [])],
        env={
            "BLACKBOX_SPOOL_DIR": str(data / "spool"),
            "BLACKBOX_SIGNING_KEY_B64": SEED_B64,
            "MODEL_BASE_URL": server.openai_base_url,
            "MODEL_API_KEY": SECRET,
        },
    )
    assert done.returncode == 0, done.stderr
    ran = json.loads(done.stdout)
    assert ran["vercelText"] == "Drizzle." and ran["stats"]["failed"] == 0
    received = server.received
    assert len(received) == 5 and all(r.header("authorization") == f"Bearer {SECRET}" for r in received)

    assert "indexed=2" in _cli(env, "consume", "--drain", "--max-wait", "0.1").output
    capture = json.loads(_cli(env, "show", ran["loop"], "--json").stdout)["capture"]
    _cli(env, "verify", ran["loop"])
    calls = capture["executionTrace"]["modelCalls"]
    assert capture["fidelity"] == "wire" and [c["attempts"] for c in calls] == [2, 1, 1]
    assert [c["requestBody"].encode() for c in calls] == [r.body for r in received[1:4]]
    assert all(c["streamed"] is stream and c["complete"] for c in calls)
    trace = capture["executionTrace"]
    assert trace["finalOutputText"] == FINAL and trace["stopReason"] == "end_turn"
    assert [t["toolName"] for t in trace["toolCalls"]] == ["get_weather", "get_time"]
    assert trace["toolCalls"][1]["input"] == '{"tz" :  "Europe/Paris"}'  # exactly as the API returned it
    assert capture["renderedContext"]["text"] == calls[0]["requestBody"]
    assert {s["part"] for s in calls[0]["spans"]} == {"system_prompt", "memory:mem_pref"}
    stored = json.dumps(capture) + "".join(
        p.read_bytes().decode("utf-8", "replace") for p in (data / "blobs").rglob("*") if p.is_file()
    )
    assert SECRET not in stored and "authorization" not in stored.lower()

    # replay with the memory entry dropped: only its span changes in each call's bytes
    server.clear()
    server.script(*SCRIPT, *SCRIPT)
    report = json.loads(
        _cli(
            env,
            "replay",
            ran["loop"],
            "--model-endpoint",
            server.url,
            "--model-api-key",
            "sk-operator-1",
            "--vary",
            "memory=" + json.dumps([NEW_MEMORY], ensure_ascii=False),
            "--json",
        ).stdout
    )
    assert report["fidelity"] == "wire" and report["verified"] is True
    control, varied = report["runs"]
    assert control["verdict"] == "reproduces the capture", control
    assert varied["variable"] == "memory"
    sent = server.received
    assert [r.body for r in sent[:3]] == [c["requestBody"].encode() for c in calls]
    escaped = json.dumps(NEW_MEMORY, ensure_ascii=False)[1:-1].encode()
    for call, body in zip(calls, [r.body for r in sent[3:]], strict=True):
        span = next(s for s in call["spans"] if s["part"] == "memory:mem_pref")
        recorded = call["requestBody"].encode()
        assert body == recorded[: span["start"]] + escaped + recorded[span["end"] :]

    # the Vercel AI SDK call outside any decision: a wire decision of its own
    rows = json.loads(_cli(env, "query", "SELECT decision_id FROM decisions", "--json").stdout)
    (vercel_id,) = {row["decision_id"] for row in rows} - {ran["loop"]}
    _cli(env, "verify", vercel_id)
    vercel = json.loads(_cli(env, "show", vercel_id, "--json").stdout)["capture"]
    (call,) = vercel["executionTrace"]["modelCalls"]
    assert vercel["fidelity"] == "wire" and call["requestBody"].encode() == received[4].body
    assert vercel["executionTrace"]["finalOutputText"] == "Drizzle."
    assert vercel["agentConfiguration"]["systemPromptText"].startswith("You are a careful travel agent")

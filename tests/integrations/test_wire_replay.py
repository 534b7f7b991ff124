"""Replay of wire captures, end to end: a real SDK's tool loop → consume → show → verify → replay.

For Chat Completions, Responses and Messages (plain and streamed), a three-step tool loop recorded
through the wrapped client is consumed from the embedded spool, shown, verified and replayed with
``blackbox replay --model-endpoint`` against the same local server: the decision reproduces (same
final output, same tool calls, arguments compared as the API returned them), the server receives
exactly the recorded bytes of every call, and the operator's key travels in the format's own header.
A ``--vary system_prompt=@file`` changes exactly the system span of each call's bytes. No credential
reaches a stored segment or an index row.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from provider_server import ProviderServer
from test_sdk_wrap import FINAL, FORMATS, SCRIPT, SECRET, Rig, run_loop
from typer.testing import CliRunner

from consumers.cli import app
from consumers.storage.segments import iter_frames
from producers.evidence import Signer, TrustStore
from producers.policy import CapturePolicy
from producers.recorder import Recorder
from producers.transports.spool.sender import SpoolTransport

OPERATOR_KEY = "sk-operator-REPLAY-7"
NEW_SYSTEM = 'Answer in one line. Units: "°F" ☃.'
INDEX_TABLES = ("decisions", "tool_calls", "memory_entries", "replay_runs", "access_log")


def _record(server: ProviderServer, data: Path, api: str, *, stream: bool) -> str:
    signer = Signer(Ed25519PrivateKey.generate(), name="did:test:wire-replay")
    trust = TrustStore()
    trust.add(signer.public_raw, not_before=datetime(2000, 1, 1, tzinfo=UTC))
    trust.save(data / "trust.toml")
    recorder = Recorder(
        agent_id="agt_wire_replay",
        transport=SpoolTransport(data / "spool", linger_ms=5),
        signer=signer,
        policy=CapturePolicy(sample_one_in=1),
    )
    server.script(*SCRIPT)
    decision_id = run_loop(
        Rig(recorder, data / "spool", trust, []), server, api, asynchronous=False, stream=stream
    )
    assert recorder.close(10)
    return decision_id


def _cli(env: dict[str, str], *args: str) -> Any:
    result = CliRunner().invoke(app, list(args), env=env)
    assert result.exit_code == 0, result.output
    return result


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("api", list(FORMATS))
def test_record_consume_verify_and_replay_a_wire_capture(
    provider_server: ProviderServer, tmp_path: Path, api: str, stream: bool
) -> None:
    data = tmp_path / "bb"
    env = {"BLACKBOX_DATA_DIR": str(data), "BLACKBOX_TRANSPORT": "spool", "BLACKBOX_BLOB": "local"}
    decision_id = _record(provider_server, data, api, stream=stream)
    recorded = [sent.body for sent in provider_server.received]

    assert "indexed=1" in _cli(env, "consume", "--drain", "--max-wait", "0.1").output
    capture = json.loads(_cli(env, "show", decision_id, "--json").stdout)["capture"]
    calls = capture["executionTrace"]["modelCalls"]
    assert capture["fidelity"] == "wire" and [c["requestBody"].encode() for c in calls] == recorded
    _cli(env, "verify", decision_id)

    # As captured: the recorded bytes go out unchanged, and the decision reproduces.
    provider_server.clear()
    provider_server.script(*SCRIPT, *SCRIPT)
    system_file = tmp_path / "system.txt"
    system_file.write_text(NEW_SYSTEM, encoding="utf-8")
    replayed = _cli(
        env,
        "replay",
        decision_id,
        "--model-endpoint",
        provider_server.url,
        "--model-api-key",
        OPERATOR_KEY,
        "--vary",
        f"system_prompt=@{system_file}",
        "--json",
    )
    report = json.loads(replayed.stdout)
    assert report["fidelity"] == "wire" and "exact request bytes" in report["fidelityNote"]
    assert report["verified"] is True and all(check["ok"] for check in report["requestChecks"])
    control, varied = report["runs"]
    assert control["verdict"] == "reproduces the capture", control
    assert control["finalOutput"] == FINAL and control["finalOutputEqual"] and control["toolCallsEqual"]
    assert [c["toolName"] for c in control["toolCalls"]] == ["get_weather", "get_time"]
    assert [c["input"] for c in control["toolCalls"]] == [
        t["input"] for t in capture["executionTrace"]["toolCalls"]
    ]
    received = provider_server.received
    assert len(received) == 6
    assert [sent.body for sent in received[:3]] == recorded  # every call, byte for byte

    key_header = "x-api-key" if api == "messages" else "authorization"
    for sent in received:
        assert sent.header(key_header) == (OPERATOR_KEY if api == "messages" else f"Bearer {OPERATOR_KEY}")
        assert sent.path == calls[0]["path"]
    if api == "messages":
        assert received[0].header("anthropic-version") == next(
            h["value"] for h in calls[0]["requestHeaders"] if h["name"] == "anthropic-version"
        )

    # The variation: in each call's bytes only the recorded system span differs.
    assert varied["variable"] == "system_prompt"
    assert varied["verdict"].startswith("no change → system_prompt cleared for 1 value tried (")
    for call, sent in zip(calls, received[3:], strict=True):
        span = next(s for s in call["spans"] if s["part"] == "system_prompt")
        body = call["requestBody"].encode()
        escaped = json.dumps(NEW_SYSTEM, ensure_ascii=False)[1:-1].encode()
        assert sent.body == body[: span["start"]] + escaped + body[span["end"] :]
        assert json.loads(sent.body) != json.loads(body)

    # No credential anywhere at rest: segments (decompressed) and every index row.
    stored = b"".join(path.read_bytes() for path in (data / "blobs").rglob("*") if path.is_file())
    frames = b"".join(
        frame for path in (data / "blobs").rglob("*.seg") for _, frame in iter_frames(path.read_bytes())
    )
    assert decision_id.encode() in frames and calls[0]["requestBody"].encode() in frames  # segments read
    stored += frames
    rows = "".join(_cli(env, "query", f"SELECT * FROM {table}", "--json").stdout for table in INDEX_TABLES)
    assert decision_id in rows
    for text in (stored.decode("utf-8", "replace"), rows):
        for secret in (SECRET, OPERATOR_KEY):
            assert secret not in text
        assert "authorization" not in text.lower() and "x-api-key" not in text.lower()

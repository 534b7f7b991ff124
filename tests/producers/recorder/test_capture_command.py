"""``blackbox capture FILE.json``: good files are sealed and emitted; bad ones name the problem, emit nothing."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import typer
from recorder_testdata import new_signer, trust_for
from typer.testing import CliRunner

from consumers.commands.capture import register
from producers.evidence import Signer, seal, verify_capture
from producers.evidence.dsse import b64encode
from producers.spool import read_spool
from schemas.codec import decode

EXAMPLE = Path(__file__).resolve().parents[3] / "schemas" / "examples" / "capture.unsealed.json"


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:  # a group, so the command is invoked by name as in the real CLI
        pass

    register(app)
    return app


@pytest.fixture
def signer() -> Signer:
    return new_signer(None)


@pytest.fixture
def env(tmp_path: Path, signer: Signer) -> dict[str, str]:
    return {
        "BLACKBOX_DATA_DIR": str(tmp_path / "bb"),
        "BLACKBOX_TRANSPORT": "spool",
        "BLACKBOX_SIGNING_KEY_B64": b64encode(signer.seed()),
        "BLACKBOX_SIGNING_KEY": "",
    }


def _example() -> dict[str, Any]:
    capture = json.loads(EXAMPLE.read_text("utf-8"))
    capture["signature"]["publicKeyRef"] = None  # the example names no key; ours is filled in
    return capture


def _write(tmp_path: Path, capture: Any, name: str = "capture.json") -> Path:
    path = tmp_path / name
    path.write_text(
        capture if isinstance(capture, str) else json.dumps(capture, indent=2, ensure_ascii=False), "utf-8"
    )
    return path


def _spooled(tmp_path: Path) -> list[dict[str, Any]]:
    return [decode(r.value).value for r in read_spool(tmp_path / "bb" / "spool")]


def _invoke(args: list[str], env: dict[str, str]) -> Any:
    env = {k: v for k, v in env.items() if v}
    return CliRunner().invoke(_app(), args, env=env)


def test_good_file_is_sealed_emitted_and_its_id_printed(
    tmp_path: Path, env: dict[str, str], signer: Signer
) -> None:
    path = _write(tmp_path, _example())
    result = _invoke(["capture", str(path)], env)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "dec_01J9Z8K2V6XAMPLE"
    [capture] = _spooled(tmp_path)
    report = verify_capture(capture, trust_for(signer))
    assert report.absent_parts == ()
    assert capture["input"]["requestPayload"] == _example()["input"]["requestPayload"]


def test_supplied_correct_hashes_are_accepted(tmp_path: Path, env: dict[str, str], signer: Signer) -> None:
    sealed = seal(_example(), signer)
    path = _write(tmp_path, sealed)
    result = _invoke(["capture", str(path)], env)
    assert result.exit_code == 0, result.output
    assert _spooled(tmp_path)[0]["signature"] == sealed["signature"]  # ed25519 is deterministic


def test_structured_only_file_is_emitted_without_content(
    tmp_path: Path, env: dict[str, str], signer: Signer
) -> None:
    capture = _example()
    capture["captureLevel"] = "structured-only"
    result = _invoke(["capture", str(_write(tmp_path, capture))], env)
    assert result.exit_code == 0, result.output
    [emitted] = _spooled(tmp_path)
    assert emitted["renderedContext"]["text"] is None and emitted["renderedContext"]["hash"]
    verify_capture(emitted, trust_for(signer))


def test_invalid_json_names_line_and_column(tmp_path: Path, env: dict[str, str]) -> None:
    path = _write(tmp_path, '{\n  "version": "replay/v1",\n  "decisionId": oops\n}')
    result = _invoke(["capture", str(path)], env)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {path}: invalid JSON at line 3 column 17")
    assert _spooled(tmp_path) == []


def test_contract_error_names_the_field_path(tmp_path: Path, env: dict[str, str]) -> None:
    capture = _example()
    capture["executionTrace"]["toolCalls"][1]["sequence"] = "two"
    result = _invoke(["capture", str(_write(tmp_path, capture))], env)
    assert result.exit_code == 2
    assert result.stderr.startswith("error: executionTrace.toolCalls[1].sequence: ")
    assert _spooled(tmp_path) == []


def test_supplied_hash_that_disagrees_is_refused_with_its_path(
    tmp_path: Path, env: dict[str, str], signer: Signer
) -> None:
    capture = seal(_example(), signer)
    capture["memoryState"]["workingSetEntries"][1]["renderedContent"] += " (edited)"
    result = _invoke(["capture", str(_write(tmp_path, capture))], env)
    assert result.exit_code == 2
    assert result.stderr.startswith("error: memoryState.workingSetEntries[1].renderedContentHash: ")
    assert _spooled(tmp_path) == []


def test_missing_signing_key_says_how_to_create_one(tmp_path: Path, env: dict[str, str]) -> None:
    env = dict(env, BLACKBOX_SIGNING_KEY_B64="")
    result = _invoke(["capture", str(_write(tmp_path, _example()))], env)
    assert result.exit_code == 2
    assert "error: signing_key: " in result.stderr and "blackbox keys generate" in result.stderr
    assert _spooled(tmp_path) == []


def test_missing_file(tmp_path: Path, env: dict[str, str]) -> None:
    result = _invoke(["capture", str(tmp_path / "nope.json")], env)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {tmp_path / 'nope.json'}: cannot read")


def test_registered_in_the_blackbox_cli() -> None:
    from consumers.cli import app

    assert "capture" in {c.name for c in app.registered_commands}


@pytest.mark.kafka
def test_capture_through_kafka(tmp_path: Path, env: dict[str, str], kafka_bootstrap: str) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    topic = f"test.capture-cli.{uuid.uuid4().hex[:8]}"
    env = dict(
        env, BLACKBOX_TRANSPORT="kafka", BLACKBOX_KAFKA_BOOTSTRAP=kafka_bootstrap, BLACKBOX_TOPIC=topic
    )
    result = _invoke(["capture", str(_write(tmp_path, _example())), "--timeout", "20"], env)
    assert result.exit_code == 0, result.output
    consumer = Consumer(
        {"bootstrap.servers": kafka_bootstrap, "group.id": topic, "enable.auto.commit": False}
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        messages: list[Any] = []
        for _ in range(40):
            messages += [m for m in consumer.consume(10, 0.5) if m.error() is None]
            if messages:
                break
    finally:
        consumer.close()
    assert [decode(m.value()).value["decisionId"] for m in messages] == ["dec_01J9Z8K2V6XAMPLE"]

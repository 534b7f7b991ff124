"""``blackbox capture FILE.json``: good files are sealed and emitted; bad ones name the problem, emit nothing."""

from __future__ import annotations

import base64
import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import typer
from recorder_testdata import new_signer, trust_for
from typer.testing import CliRunner

from consumers.commands.capture import MAX_DOCUMENT_DEPTH, register
from producers.evidence import Signer, TrustStore, seal, verify_capture
from producers.evidence.dsse import b64encode
from producers.privacy.identifiers import is_commitment
from producers.transports.spool.files import read_spool
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
    capture = _example()
    # a person's ids are committed under a fresh salt before sealing (DESIGN 16), so the signature
    # is reproducible only for a capture that names nobody; the committed case is the next check
    capture["input"]["originUserId"] = capture["input"]["originSessionId"] = None
    sealed = seal(capture, signer)
    path = _write(tmp_path, sealed)
    result = _invoke(["capture", str(path)], env)
    assert result.exit_code == 0, result.output
    assert _spooled(tmp_path)[0]["signature"] == sealed["signature"]  # ed25519 is deterministic

    named = seal(_example(), signer)
    assert named["input"]["originUserId"]
    result = _invoke(["capture", str(_write(tmp_path, named, "named.json"))], env)
    assert result.exit_code == 0, result.output
    emitted = _spooled(tmp_path)[-1]
    assert is_commitment(emitted["input"]["originUserId"])
    verify_capture(emitted, trust_for(signer))


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


# --- issue 8, items 9 and 11: limits, and the article's own form ----------------------------------

ARTICLE = Path(__file__).resolve().parent / "golden" / "article_replay_v1.json"
GOLDEN_SEED = Path(__file__).resolve().parents[1] / "evidence" / "golden" / "test-key.seed"


def _golden_signer() -> Signer:
    seed = base64.b64decode(GOLDEN_SEED.read_text().strip())
    return Signer.from_seed(seed, name="did:armalo:agent:agt_support_1")


@pytest.mark.parametrize("depth", [300, 100_000])
def test_deeply_nested_json_is_a_clear_error(tmp_path: Path, env: dict[str, str], depth: int) -> None:
    path = _write(tmp_path, "[" * depth + "]" * depth)
    result = _invoke(["capture", str(path)], env)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {path if depth > 1000 else '[0]'}")
    assert f"JSON nested deeper than {MAX_DOCUMENT_DEPTH} levels (the limit)" in result.stderr
    assert "Traceback" not in result.output + result.stderr
    assert _spooled(tmp_path) == []


def test_a_file_above_the_size_limit_is_refused(tmp_path: Path, env: dict[str, str]) -> None:
    path = _write(tmp_path, _example())
    size = path.stat().st_size
    result = _invoke(["capture", str(path), "--max-bytes", str(size - 1)], env)
    assert result.exit_code == 2
    assert (
        result.stderr
        == f"error: {path}: larger than {size - 1} bytes, the limit (raise it with --max-bytes)\n"
    )
    assert _invoke(["capture", str(path), "--max-bytes", str(size)], env).exit_code == 0


@pytest.mark.parametrize("source", ["/dev/zero", "-"])
def test_a_stream_is_read_only_up_to_the_limit(tmp_path: Path, env: dict[str, str], source: str) -> None:
    endless = b"0" * 50_000  # stdin stands for a pipe; /dev/zero never ends
    result = CliRunner().invoke(
        _app(), ["capture", source, "--max-bytes", "4096"], env=env, input=endless if source == "-" else None
    )
    assert result.exit_code == 2
    assert (
        result.stderr == f"error: {source}: larger than 4096 bytes, the limit (raise it with --max-bytes)\n"
    )


@pytest.mark.parametrize("signature", ["as in the article", "absent"])
def test_the_articles_own_form_is_accepted_as_is(tmp_path: Path, env: dict[str, str], signature: str) -> None:
    document = json.loads(ARTICLE.read_text("utf-8"))
    assert not {"captureLevel", "consequential", "outcome"} & set(document)
    if signature == "absent":
        del document["signature"]
    signer = _golden_signer()
    env = dict(env, BLACKBOX_SIGNING_KEY_B64=b64encode(signer.seed()), BLACKBOX_CAPTURE_SAMPLE_ONE_IN="1")
    result = _invoke(["capture", str(_write(tmp_path, document))], env)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "dec_01J9Z8K2V6ARTICLE"
    [capture] = _spooled(tmp_path)
    verify_capture(capture, trust_for(signer))
    assert capture["captureLevel"] == "sampled"  # the policy's choice (one in 1)
    assert capture["consequential"] == {"flagged": False, "reason": None}
    assert capture["outcome"] == {"status": "unknown", "reason": None}
    assert capture["input"]["requestPayloadHash"] == document["input"]["requestPayloadHash"]


def test_the_article_form_gets_the_policy_level_structured_only_for_a_routine_turn(
    tmp_path: Path, env: dict[str, str]
) -> None:
    document = json.loads(ARTICLE.read_text("utf-8"))
    del document["signature"]
    env = dict(env, BLACKBOX_CAPTURE_SAMPLE_ONE_IN="0")
    assert _invoke(["capture", str(_write(tmp_path, document))], env).exit_code == 0
    [capture] = _spooled(tmp_path)
    assert capture["captureLevel"] == "structured-only"
    assert capture["input"]["requestPayload"] is None and capture["input"]["requestPayloadHash"]


def _trust_store(env: dict[str, str], signer: Signer, **window: datetime) -> None:
    store = TrustStore()
    store.add(signer.public_raw, **window)
    store.save(Path(env["BLACKBOX_DATA_DIR"]) / "trust.toml")


@pytest.mark.parametrize(
    ("window", "why"),
    [
        ({"not_before": datetime(2027, 1, 1, tzinfo=UTC)}, "is not yet valid at the signing time"),
        (
            {"not_before": datetime(2025, 1, 1, tzinfo=UTC), "not_after": datetime(2026, 1, 1, tzinfo=UTC)},
            "had expired at the signing time",
        ),
    ],
)
def test_captured_at_outside_the_keys_window_is_refused(
    tmp_path: Path, env: dict[str, str], signer: Signer, window: dict[str, datetime], why: str
) -> None:
    _trust_store(env, signer, **window)
    result = _invoke(["capture", str(_write(tmp_path, _example()))], env)
    assert result.exit_code == 2
    assert result.stderr.startswith(
        "error: capturedAt: 2026-07-23T13:00:00.456Z lies outside what the signing key may sign"
    )
    assert why in result.stderr and signer.key_id in result.stderr
    assert result.stdout == "" and _spooled(tmp_path) == []


def test_captured_at_inside_the_keys_window_is_accepted(
    tmp_path: Path, env: dict[str, str], signer: Signer
) -> None:
    _trust_store(
        env, signer, not_before=datetime(2026, 1, 1, tzinfo=UTC), not_after=datetime(2027, 1, 1, tzinfo=UTC)
    )
    result = _invoke(["capture", str(_write(tmp_path, _example()))], env)
    assert result.exit_code == 0, result.output

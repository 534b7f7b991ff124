"""``blackbox keys`` and ``blackbox verify`` (registered on a fresh typer app)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
import typer
from conftest import GOLDEN, KEY_WINDOW_START, golden_signer
from typer.testing import CliRunner

from consumers.commands import keys as keys_command
from consumers.commands import verify as verify_command
from producers.evidence import TrustStore, load_signer, seal
from schemas.errors import BlackboxError


@pytest.fixture
def app() -> typer.Typer:
    app = typer.Typer()
    keys_command.register(app)
    verify_command.register(app)
    return app


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # settings also read a .env from the working directory
    monkeypatch.setenv("BLACKBOX_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("BLACKBOX_TRUST_STORE", raising=False)
    return tmp_path


def _trust_golden(env: Path) -> Path:
    store = TrustStore()
    store.add(golden_signer().public_raw, not_before=KEY_WINDOW_START)
    path = env / "data" / "trust.toml"
    store.save(path)
    return path


def test_keys_generate_writes_the_pair_and_trusts_it(app: typer.Typer, env: Path) -> None:
    result = CliRunner().invoke(
        app, ["keys", "generate", "--dir", str(env / "k"), "--not-before", "2026-01-01T00:00:00Z"]
    )
    assert result.exit_code == 0, result.output
    private = next((env / "k").glob("*.key"))
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    signer = load_signer(private)
    assert f"key id:      {signer.key_id}" in result.output
    store = TrustStore.load(env / "data" / "trust.toml")
    assert signer.key_id in store
    sealed = seal(json.loads((GOLDEN / "capture.signed.json").read_text()) | {"signature": None}, signer)
    capture_file = env / "mine.json"
    capture_file.write_text(json.dumps(sealed))
    result = CliRunner().invoke(app, ["verify", "--file", str(capture_file)])
    assert result.exit_code == 0, result.output
    listed = CliRunner().invoke(app, ["keys", "list"])
    assert signer.key_id in listed.output
    revoked = CliRunner().invoke(app, ["keys", "revoke", signer.key_id])
    assert revoked.exit_code == 0 and "revoked" in revoked.output
    result = CliRunner().invoke(app, ["verify", "--file", str(capture_file)])
    assert result.exit_code == 1 and "part=key" in result.output


def test_keys_trust_adds_a_public_key_file(app: typer.Typer, env: Path) -> None:
    pub = env / "other.pub"
    from cryptography.hazmat.primitives import serialization

    pub.write_bytes(
        golden_signer().public_key.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    result = CliRunner().invoke(app, ["keys", "trust", str(pub), "--not-before", "2026-01-01T00:00:00Z"])
    assert result.exit_code == 0, result.output
    assert golden_signer().key_id in TrustStore.load(env / "data" / "trust.toml")


def test_verify_file_ok(app: typer.Typer, env: Path) -> None:
    _trust_golden(env)
    result = CliRunner().invoke(app, ["verify", "--file", str(GOLDEN / "capture.signed.json")])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == (
        f"verified: dec_01J9Z8K2V6XAMPLE key={golden_signer().key_id} (13 parts)"
    )


def test_verify_file_tampered(app: typer.Typer, env: Path) -> None:
    _trust_golden(env)
    result = CliRunner().invoke(app, ["verify", "--file", str(GOLDEN / "capture.tampered.json")])
    assert result.exit_code == 1
    assert "NOT VERIFIED: dec_01J9Z8K2V6XAMPLE part=executionTrace.toolCalls[1].output" in result.output
    assert "ContentHashMismatch" in result.output


def test_verify_reports_absent_parts(app: typer.Typer, env: Path) -> None:
    _trust_golden(env)
    capture = json.loads((GOLDEN / "capture.signed.json").read_text())
    capture["renderedContext"]["text"] = None
    path = env / "compacted.json"
    path.write_text(json.dumps(capture))
    result = CliRunner().invoke(app, ["verify", "--file", str(path)])
    assert result.exit_code == 0, result.output
    assert "(12 parts)" in result.output and "renderedContext.text" in result.output


def test_verify_needs_exactly_one_of_id_or_file(app: typer.Typer, env: Path) -> None:
    # (verify DECISION_ID against a stored capture runs in tests/consumers/demo and tests/consumers/ingest)
    _trust_golden(env)
    result = CliRunner().invoke(app, ["verify"])
    assert isinstance(
        result.exception, BlackboxError
    ) and "give one of DECISION_ID, --file FILE.json, --bundle FILE or --record FILE" in str(result.exception)
    both = ["verify", "dec_01J9Z8K2V6XAMPLE", "--file", str(GOLDEN / "capture.signed.json")]
    result = CliRunner().invoke(app, both)
    assert isinstance(result.exception, BlackboxError)


def test_verify_without_trust_store_is_an_error(app: typer.Typer, env: Path) -> None:
    result = CliRunner().invoke(app, ["verify", "--file", str(GOLDEN / "capture.signed.json")])
    assert isinstance(result.exception, BlackboxError) and "no trust store" in str(result.exception)

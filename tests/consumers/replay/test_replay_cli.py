"""``blackbox replay`` / ``bisect`` / ``regress`` end to end: real HTTP model, real chdb index, goldens."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from replay_scripted import system_prompt
from typer.testing import CliRunner

from consumers.cli import app
from consumers.index import ChdbIndex
from producers.evidence import TrustStore
from schemas.errors import AccessDenied, ContentHashMismatch


@pytest.fixture
def cli(tmp_path: Path, model_server: Any, trust: TrustStore, chdb_root: Path) -> Callable[..., Any]:
    trust_path = tmp_path / "trust.toml"
    trust.save(trust_path)
    caller = f"cli-{uuid.uuid4().hex[:8]}"
    env = {
        "BLACKBOX_DATA_DIR": str(tmp_path / "bb"),
        "BLACKBOX_CHDB_PATH": str(chdb_root),
        "BLACKBOX_TRUST_STORE": str(trust_path),
        "BLACKBOX_MODEL_ENDPOINT": model_server.endpoint,
        "BLACKBOX_CALLER": caller,
        "COLUMNS": "240",
    }

    def invoke(*args: str) -> Any:
        result = CliRunner().invoke(app, list(args), env=env, catch_exceptions=True)
        result.caller = caller  # type: ignore[attr-defined]
        return result

    return invoke


def _access_rows(chdb_root: Path, caller: str) -> list[dict[str, Any]]:
    index = ChdbIndex(chdb_root, database="blackbox")
    try:
        return index.query(
            "SELECT scope, decision_id, action, outcome FROM access_log WHERE caller = {c:String} ORDER BY at",
            {"c": caller},
        )
    finally:
        index.close()


def test_cli_replay_json_with_variations(
    cli: Callable[..., Any], golden_dir: Path, tmp_path: Path, chdb_root: Path
) -> None:
    prompt = tmp_path / "v4.6.txt"
    prompt.write_text(system_prompt("v4.6"), encoding="utf-8")
    result = cli(
        "replay",
        "--file",
        str(golden_dir / "replay-identical.json"),
        "--json",
        "--vary",
        f"system_prompt=@{prompt}",
        "--vary",
        "sampling.top_p=0.5",
        "--reason",
        "INC-4711",
    )
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert body["verified"] is True and body["decisionId"] == "dec_golden_identical"
    verdicts = [run["verdict"] for run in body["runs"]]
    assert verdicts == [
        "reproduces the capture",
        "outcome changed → system_prompt is implicated",
        "no change → sampling.top_p cleared for 1 value tried (sampling.top_p=0.5; 1 run)",
    ]
    assert _access_rows(chdb_root, result.caller) == [
        {"scope": "operator", "decision_id": "dec_golden_identical", "action": "replay", "outcome": "allowed"}
    ]
    index = ChdbIndex(chdb_root, database="blackbox")
    try:
        runs = index.query(
            "SELECT kind, variable, verdict FROM replay_runs WHERE decision_id = 'dec_golden_identical' "
            "AND variation_value LIKE '%top_p=0.5' ORDER BY at DESC LIMIT 1"
        )
    finally:
        index.close()
    assert runs == [
        {
            "kind": "variation",
            "variable": "sampling.top_p",
            "verdict": "no change → sampling.top_p cleared for 1 value tried (sampling.top_p=0.5; 1 run)",
        }
    ]


def test_cli_replay_table_and_runs(cli: Callable[..., Any], golden_dir: Path) -> None:
    result = cli(
        "replay",
        "--file",
        str(golden_dir / "replay-identical.json"),
        "--vary",
        "sampling.temperature=0.9",
        "--runs",
        "6",
    )
    assert result.exit_code == 0, result.output
    assert "reproduces the capture" in result.stdout
    assert "6 runs" in result.stdout and "distinct outcome" in result.stdout


def test_cli_refuses_tampered_unless_allowed(cli: Callable[..., Any], golden_dir: Path) -> None:
    tampered = str(golden_dir / "replay-tampered.json")
    refused = cli("replay", "--file", tampered, "--json")
    assert refused.exit_code != 0 and isinstance(refused.exception, ContentHashMismatch)

    allowed = cli("replay", "--file", tampered, "--json", "--allow-unverified")
    assert allowed.exit_code == 0, allowed.output
    body = json.loads(allowed.stdout)
    assert body["verified"] is False and body["verificationNote"].startswith("UNVERIFIED")


def test_cli_denied_scope_is_refused_and_logged(
    cli: Callable[..., Any], golden_dir: Path, chdb_root: Path
) -> None:
    result = cli("replay", "--file", str(golden_dir / "replay-identical.json"), "--scope", "counterparty")
    assert isinstance(result.exception, AccessDenied)
    assert _access_rows(chdb_root, result.caller) == [
        {
            "scope": "counterparty",
            "decision_id": "dec_golden_identical",
            "action": "replay",
            "outcome": "denied",
        }
    ]


def test_cli_diverging_golden(cli: Callable[..., Any], golden_dir: Path) -> None:
    result = cli("replay", "--file", str(golden_dir / "replay-diverging.json"), "--json")
    assert result.exit_code == 0, result.output
    run = json.loads(result.stdout)["runs"][0]
    assert run["divergence"]["step"] == 3 and run["divergence"]["call"]["toolName"] == "issue_refund"


def test_cli_bisect(cli: Callable[..., Any], golden_dir: Path, tmp_path: Path) -> None:
    args = ["bisect", "--file", str(golden_dir / "replay-identical.json"), "--json"]
    for n in range(1, 8):
        path = tmp_path / f"v4.{n}.txt"
        path.write_text(system_prompt(f"v4.{n}"), encoding="utf-8")
        args += ["--candidate", f"system_prompt=@{path}"]
    result = cli(*args)
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert body["first"].endswith("v4.7.txt") and body["replays"] <= 3


def test_cli_regress_over_a_directory(cli: Callable[..., Any], golden_dir: Path, tmp_path: Path) -> None:
    prompt = tmp_path / "v4.6.txt"
    prompt.write_text(system_prompt("v4.6"), encoding="utf-8")
    config = tmp_path / "new.toml"
    config.write_text(f'system_prompt = "@{prompt.name}"\n', encoding="utf-8")
    result = cli("regress", "--dir", str(golden_dir), "--config", str(config), "--json", "--workers", "2")
    # The tampered golden cannot be replayed: the run does not pass, and says which decision and why.
    assert result.exit_code == 1, result.output
    body = json.loads(result.stdout)
    assert body["replayed"] == 3 and body["passed"] is False
    assert body["counts"] == {"unchanged": 0, "changed": 0, "diverged": 2, "not_replayed": 1}
    refused = next(d for d in body["decisions"] if d["status"] == "not_replayed")
    assert refused["decisionId"] == "dec_golden_tampered" and "ContentHashMismatch" in refused["reason"]

    table = cli("regress", "--dir", str(golden_dir), "--config", str(config), "--workers", "2")
    assert table.exit_code == 1
    assert "dec_golden_tampered" in table.stdout and "not replayed: ContentHashMismatch" in table.stdout
    assert "FAIL: 0 regressed, 0 failing check(s), 1 not replayed" in table.stdout


def test_cli_live_needs_authorization(cli: Callable[..., Any], golden_dir: Path) -> None:
    result = cli("replay", "--file", str(golden_dir / "replay-identical.json"), "--live")
    assert result.exit_code != 0 and "--authorize" in str(result.exception)


def test_cli_replay_table_shows_hostile_output_as_text(
    cli: Callable[..., Any], golden_dir: Path, tmp_path: Path
) -> None:
    """Issue 24: ``[/INST]`` in a capture's output crashed the table (MarkupError), ESC reached the
    terminal. Now it is printed literally, escaped, with the UNVERIFIED note."""
    capture = json.loads((golden_dir / "replay-identical.json").read_text(encoding="utf-8"))
    capture["executionTrace"]["finalOutputText"] = "[/INST]\x1b[2J\u202e[link=x]y"
    capture["agentId"] = "agt[/b]\x1b[1A"
    hostile = tmp_path / "hostile.json"
    hostile.write_text(json.dumps(capture), encoding="utf-8")
    result = cli("replay", "--file", str(hostile), "--allow-unverified")
    assert result.exit_code == 0, repr(result.exception)
    out = result.stdout
    assert "[/INST]\\x1b[2JU+202E[link=x]y" in out and "agt[/b]\\x1b[1A" in out and "UNVERIFIED" in out
    assert "\x1b" not in out and "\u202e" not in out

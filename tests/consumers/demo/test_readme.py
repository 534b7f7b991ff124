"""The README cannot rot: its settings table, its commands, its SDK example, its retention snippet and
its ClickHouse cookbook are all checked against the code (the cookbook runs on the demo's index)."""

from __future__ import annotations

import base64
import os
import re
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest
from demo_cli import run

from consumers.cli import app
from producers.evidence import TrustStore, load_signer, verify_capture
from producers.settings import BlackboxSettings
from producers.spool import read_spool
from schemas.codec import decode

ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.DOTALL)


def test_every_setting_is_documented_and_every_documented_setting_exists() -> None:
    documented = set(re.findall(r"^\| `(BLACKBOX_[A-Z0-9_]+)` \|", README, flags=re.MULTILINE))
    fields = {f"BLACKBOX_{name.upper()}" for name in BlackboxSettings.model_fields}
    assert documented == fields


def test_every_command_the_readme_names_exists() -> None:
    import typer.main

    group = typer.main.get_command(app)
    registered = set(group.commands)  # type: ignore[attr-defined]
    named = set(re.findall(r"`blackbox ([a-z]+)", README)) | set(
        re.findall(r"^blackbox ([a-z]+)", README, re.M)
    )
    assert named, "the README shows commands"
    assert named <= registered, f"README names commands that do not exist: {named - registered}"
    assert set(re.findall(r"`(release|hold) DECISION_ID", README)) <= registered


def test_the_sdk_example_runs_and_its_capture_verifies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (example,) = [b for b in blocks("python") if "Recorder.from_settings" in b]
    seed = bytes(range(32))
    monkeypatch.setenv("BLACKBOX_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("BLACKBOX_SIGNING_KEY_B64", base64.b64encode(seed).decode())
    for name in [k for k in os.environ if k.startswith("BLACKBOX_")]:
        if name not in ("BLACKBOX_DATA_DIR", "BLACKBOX_SIGNING_KEY_B64"):
            monkeypatch.delenv(name)
    namespace = {
        "payload": {"message": "I was charged twice, please refund one.", "channel": "chat"},
        "PROMPT": "You are the support agent.\nPolicy version v4.7.\n",
        "TOOLS": {"tools": [{"type": "function", "function": {"name": "get_balance", "parameters": {}}}]},
        "note": "Customer cus_42 disputed a $120.00 charge.",
    }
    exec(compile(textwrap.dedent(example), "README.md", "exec"), namespace)

    signer = load_signer(b64=base64.b64encode(seed).decode())
    trust = TrustStore()
    trust.add(
        signer.public_raw,
        not_before=datetime(2000, 1, 1, tzinfo=UTC),
    )
    records = list(read_spool(tmp_path / "spool"))
    assert len(records) == 1
    capture = decode(records[0].value).value
    verify_capture(capture, trust)
    assert capture["agentConfiguration"]["systemPromptText"] == namespace["PROMPT"]
    assert capture["executionTrace"]["toolCalls"][0]["output"] == {"balance": 880}


def test_the_retention_snippet_is_a_valid_policy(tmp_path: Path) -> None:
    from consumers.retention.policy import load_policy

    (snippet,) = [b for b in blocks("toml") if "content_days" in b]
    path = tmp_path / "policy.toml"
    path.write_text(snippet, encoding="utf-8")
    policy = load_policy(path)
    assert policy.routine.content_days == 14
    assert policy.consequential.retention_days == 365  # everything else stays the default


def test_the_cookbook_queries_run_on_the_demo_index(demo: tuple[Path, str]) -> None:
    data_dir, _ = demo
    (cookbook,) = blocks("sql")
    queries = [line for line in cookbook.splitlines() if line.strip() and not line.startswith("--")]
    assert len(queries) >= 5
    outputs = [run(["query", q, "--json"], env={"BLACKBOX_DATA_DIR": str(data_dir)}) for q in queries]
    assert "v4.7" in outputs[0]  # the failure-rate query sees the demo's failure cluster
    assert "issue_refund" in outputs[2]

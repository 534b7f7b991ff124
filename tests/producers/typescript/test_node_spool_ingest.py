"""Python ingests and verifies what the TypeScript SDK wrote through the spool.

A Node agent (``producers/typescript/examples/spool-agent.ts``) records a consequential decision,
a routine one that it flags afterwards (its full content comes from the flight recorder) and one
holding a value JavaScript cannot record (a bigint); then ``blackbox consume`` indexes the spool,
and ``blackbox show`` / ``verify`` check each capture against the trust store.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from node_sdk import build_package, node
from typer.testing import CliRunner

from producers.evidence import TrustStore, load_signer, verify_capture
from producers.transports.spool.files import read_spool
from schemas.codec import decode

SEED_B64 = (Path(__file__).resolve().parents[1] / "evidence" / "golden" / "test-key.seed").read_text().strip()


@pytest.fixture(scope="module")
def package() -> Path:
    return build_package()


def _env(data_dir: Path) -> dict[str, str]:
    return {"BLACKBOX_DATA_DIR": str(data_dir), "BLACKBOX_TRANSPORT": "spool", "BLACKBOX_BLOB": "local"}


@pytest.mark.parametrize("threads", ["0", "2"], ids=["on-the-loop", "seal-threads"])
def test_node_captures_are_ingested_shown_and_verified(package: Path, tmp_path: Path, threads: str) -> None:
    from consumers.cli import app

    data_dir = tmp_path / "bb"
    data_dir.mkdir()
    trust = TrustStore()
    trust.add(load_signer(b64=SEED_B64).public_raw, not_before=datetime(2000, 1, 1, tzinfo=UTC))
    trust.save(data_dir / "trust.toml")
    done = node(
        ["dist/examples/spool-agent.js"],
        env={
            "BLACKBOX_SPOOL_DIR": str(data_dir / "spool"),
            "BLACKBOX_SIGNING_KEY_B64": SEED_B64,
            "BLACKBOX_SEAL_THREADS": threads,
        },
    )
    assert done.returncode == 0, done.stderr
    ran = json.loads(done.stdout)
    assert ran["flagged"] is True
    assert (
        ran["stats"] | {"submitted": 3, "delivered": 5, "dropped": 0, "failed": 0, "unrecordable": 1}
        == ran["stats"]
    )

    # every message decodes and verifies here, before ingest touches it
    messages = [decode(record.value) for record in read_spool(data_dir / "spool")]
    assert [m.kind for m in messages].count("flag") == 1
    captures = [m.value for m in messages if m.kind == "capture"]
    assert len(captures) == 4
    for capture in captures:
        verify_capture(capture, trust)
    levels = {(c["decisionId"], c["captureLevel"]) for c in captures}
    assert levels == {
        (ran["full"], "full"),
        (ran["routine"], "structured-only"),
        (ran["routine"], "full"),
        (ran["odd"], "structured-only"),
    }

    runner = CliRunner()
    consumed = runner.invoke(app, ["consume", "--drain", "--max-wait", "0.1"], env=_env(data_dir))
    assert consumed.exit_code == 0, consumed.output
    for decision_id in (ran["full"], ran["routine"], ran["odd"]):
        verified = runner.invoke(app, ["verify", decision_id], env=_env(data_dir))
        assert verified.exit_code == 0, verified.output
    shown = runner.invoke(app, ["show", ran["routine"], "--json"], env=_env(data_dir))
    assert shown.exit_code == 0, shown.output
    routine: dict[str, Any] = json.loads(shown.stdout)["capture"]
    # the flag brought the full content in: ingest upgraded the structured-only record
    assert routine["captureLevel"] == "full"
    assert routine["consequential"] == {"flagged": True, "reason": "refund disputed"}
    assert routine["memoryState"]["workingSetEntries"][0]["renderedContent"] == "prefers email"
    shown = runner.invoke(app, ["show", ran["full"], "--json"], env=_env(data_dir))
    full = json.loads(shown.stdout)["capture"]
    assert full["memoryState"]["workingSetEntries"][0]["renderedContent"].endswith("日本語 ✓ 𝄞")
    assert full["executionTrace"]["toolCalls"][0]["output"] == {"balance": 880, "currency": "EUR"}
    assert full["agentConfiguration"]["samplingParameters"] == {"temperature": 0.2, "max_tokens": 512}
    odd = next(c for c in captures if c["decisionId"] == ran["odd"])
    assert "bigint" in odd["outcome"]["reason"]

"""The access gate in front of replay: scopes, grants, the access log, refusal when it cannot log."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from consumers.access import (
    AccessGate,
    AccessLogUnavailable,
    Caller,
    Grants,
    IndexAccessLog,
    JsonlAccessLog,
)
from consumers.index import ChdbIndex
from consumers.replay import Replayer
from producers.evidence import Signer, seal
from schemas.errors import AccessDenied


def test_allowed_replay_is_logged(
    make_replayer: Callable[..., Replayer], access_log_rows: Callable[[], list[dict[str, Any]]]
) -> None:
    make_replayer().replay("dec_golden_identical")
    rows = access_log_rows()
    assert rows == [
        {
            "caller": "sre-oncall",
            "scope": "operator",
            "decision_id": "dec_golden_identical",
            "action": "replay",
            "reason": "INC-4711 wrong refund",
            "outcome": "allowed",
            "detail": "",
        }
    ]


def test_denied_scope_is_refused_and_logged(
    make_replayer: Callable[..., Replayer],
    access_log_rows: Callable[[], list[dict[str, Any]]],
    model_server: Any,
) -> None:
    counterparty = Caller(identity="acme-merchant", scope="counterparty", reason="dispute D-9")
    with pytest.raises(AccessDenied, match="admits scope operator"):
        make_replayer(caller=counterparty).replay("dec_golden_identical")

    (row,) = access_log_rows()
    assert row["outcome"] == "denied" and row["scope"] == "counterparty" and row["caller"] == "acme-merchant"
    assert row["decision_id"] == "dec_golden_identical" and "admits scope operator" in row["detail"]
    assert model_server.requests == []  # nothing was replayed


def test_regulator_needs_a_grant(
    make_replayer: Callable[..., Replayer],
    golden_dir: Path,
    index: ChdbIndex,
    tmp_path: Path,
    signer: Signer,
    access_log_rows: Callable[[], list[dict[str, Any]]],
) -> None:
    path = golden_dir / "replay-identical.json"
    capture = json.loads(path.read_text(encoding="utf-8"))
    capture["replayPolicy"]["replayAccessScope"] = "operator | regulator"  # signed: re-seal below
    capture["signature"]["signatureBytes"] = None
    path.write_text(json.dumps(seal(capture, signer)), encoding="utf-8")
    regulator = Caller(identity="finreg-auditor", scope="regulator", reason="audit 2026-Q3")

    with pytest.raises(AccessDenied, match="no grant"):
        make_replayer(caller=regulator).replay("dec_golden_identical")

    grants = tmp_path / "grants.toml"
    grants.write_text(
        '[[grant]]\ncaller = "finreg-*"\nscope = "regulator"\nagents = ["agt_support_*"]\n', encoding="utf-8"
    )
    gate = AccessGate(log=IndexAccessLog(index), grants=Grants.load(grants))
    result = make_replayer(caller=regulator, gate=gate).replay("dec_golden_identical")
    assert result.replay_failure is None
    assert [r["outcome"] for r in access_log_rows()] == ["denied", "allowed"]


def test_expired_grant_denies(tmp_path: Path) -> None:
    grants = tmp_path / "grants.toml"
    grants.write_text(
        '[[grant]]\ncaller = "*"\nscope = "operator"\nexpires = 2026-01-01T00:00:00Z\n', encoding="utf-8"
    )
    log = JsonlAccessLog(tmp_path / "access.jsonl")
    gate = AccessGate(log=log, grants=Grants.load(grants), clock=lambda: datetime(2026, 6, 1, tzinfo=UTC))
    capture = {"decisionId": "d1", "agentId": "a1", "replayPolicy": {"replayAccessScope": "operator"}}
    with pytest.raises(AccessDenied, match="no grant"):
        gate.authorize(Caller(identity="me", scope="operator"), capture)
    assert [r["outcome"] for r in log.read()] == ["denied"]


def test_unwritable_access_log_refuses_the_read(
    make_replayer: Callable[..., Replayer], tmp_path: Path, model_server: Any
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the log directory should be", encoding="utf-8")
    gate = AccessGate(log=JsonlAccessLog(blocker / "access.jsonl"))

    with pytest.raises(AccessLogUnavailable, match="access log could not be written"):
        make_replayer(gate=gate).replay("dec_golden_identical")
    assert model_server.requests == []


def test_index_down_refuses_the_read(
    make_replayer: Callable[..., Replayer], chdb_root: Path, model_server: Any
) -> None:
    broken = ChdbIndex(chdb_root, database="replay_closed")
    broken.ensure_schema()
    broken.close()  # every insert now fails
    with pytest.raises(AccessDenied):
        make_replayer(gate=AccessGate(log=IndexAccessLog(broken))).replay("dec_golden_identical")
    assert model_server.requests == []


def test_replay_many_keeps_refusals_per_decision(
    make_replayer: Callable[..., Replayer], access_log_rows: Callable[[], list[dict[str, Any]]]
) -> None:
    results = make_replayer().replay_many(
        ["dec_golden_identical", "dec_golden_tampered", "dec_golden_diverging", "dec_missing"]
    )
    failures = results.replay_failures
    assert set(failures) == {"dec_golden_tampered", "dec_golden_diverging", "dec_missing"}
    assert type(failures["dec_golden_tampered"]).__name__ == "ContentHashMismatch"
    assert type(failures["dec_golden_diverging"]).__name__ == "ReplayDivergence"
    assert type(failures["dec_missing"]).__name__ == "CaptureNotFound"
    assert results.results["dec_golden_identical"].replay_failure is None
    assert len(access_log_rows()) == 3  # one row per capture read (the missing one was never read)


def test_replay_is_audit_only(make_replayer: Callable[..., Replayer], golden_dir: Path) -> None:
    before = {p.name: p.read_bytes() for p in golden_dir.iterdir()}
    make_replayer().replay("dec_golden_identical")
    assert {p.name: p.read_bytes() for p in golden_dir.iterdir()} == before  # nothing promoted or rewritten

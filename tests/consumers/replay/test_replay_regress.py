"""Regression replay over a sample of past captures; every result lands in replay_runs."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from replay_scripted import memory_entries, record_decision, system_prompt

from consumers.index import ChdbIndex
from consumers.replay import FileCaptureSource, IndexReplayRunLog, Replayer, parse_variation, regress
from producers.evidence import Signer, seal


def _write_history(directory: Path, signer: Signer) -> dict[str, str]:
    """12 past decisions: v4.7 with big and small working sets, some v4.6; one tampered."""
    expected: dict[str, str] = {}
    for n in range(12):
        version = "v4.6" if n % 4 == 3 else "v4.7"
        big = n % 2 == 0
        entries = memory_entries(count=10 if big else 3)
        capture = seal(
            record_decision(decision_id=f"dec_hist_{n:02d}", version=version, entries=entries), signer
        )
        if n == 5:
            capture["executionTrace"]["toolCalls"][0]["output"]["name"] = "Someone Else"
            expected[capture["decisionId"]] = "not_replayed"
        else:
            # Under the v4.6 prompt only v4.7-with-big-memory decisions change (the refund amount is fixed).
            expected[capture["decisionId"]] = "diverged" if (version == "v4.7" and big) else "unchanged"
        (directory / f"{capture['decisionId']}.json").write_text(json.dumps(capture), encoding="utf-8")
    return expected


def test_regress_reports_changed_decisions_and_records_every_run(
    make_replayer: Callable[..., Replayer], signer: Signer, tmp_path: Path, index: ChdbIndex
) -> None:
    history = tmp_path / "history"
    history.mkdir()
    expected = _write_history(history, signer)
    prompt = tmp_path / "v4.6.txt"
    prompt.write_text(system_prompt("v4.6"), encoding="utf-8")
    source = FileCaptureSource(history)
    replayer = make_replayer(source=source)

    ids = source.sample(since=datetime(2026, 1, 1, tzinfo=UTC), agent="agt_support_1", n=100)
    assert sorted(ids) == sorted(expected)
    result = regress(
        replayer,
        ids,
        configuration=[parse_variation(f"system_prompt=@{prompt}")],
        workers=3,
        run_log=IndexReplayRunLog(index),
        progress=False,
    )

    assert result.status == {d: expected[d] for d in ids}
    assert result.counts == {"unchanged": 5, "changed": 0, "diverged": 6, "not_replayed": 1}
    assert sorted(result.changed) == sorted(d for d, s in expected.items() if s == "diverged")
    assert not result.passed  # a decision that could not be replayed fails the gate
    body = result.to_json()
    shown = {entry["decisionId"]: entry for entry in body["decisions"]}
    assert all(entry["firstDivergentStep"] == 3 for entry in shown.values() if entry["status"] == "diverged")
    assert "ContentHashMismatch" in shown["dec_hist_05"]["reason"]

    rows = index.query(
        "SELECT decision_id, kind, variable, verdict, outcome_changed FROM replay_runs WHERE run_id = {r:String}",
        {"r": result.run_id},
    )
    assert len(rows) == 12
    assert {r["kind"] for r in rows} == {"regress"} and {r["variable"] for r in rows} == {"system_prompt"}
    assert {r["decision_id"]: r["verdict"] for r in rows} == {
        d: v.summary() for d, v in result.verdicts.items()
    }
    assert {r["verdict"] for r in rows if expected[r["decision_id"]] == "diverged"} == {"diverged at step 3"}
    access = index.query("SELECT count() AS n FROM access_log")
    assert access[0]["n"] == 12


def test_sample_filters_by_agent_and_time(signer: Signer, tmp_path: Path) -> None:
    for n, agent in enumerate(["agt_a", "agt_b", "agt_a"]):
        capture = record_decision(decision_id=f"dec_s{n}", agent_id=agent)
        (tmp_path / f"x{n}.json").write_text(json.dumps(capture), encoding="utf-8")
    source = FileCaptureSource(tmp_path)
    assert sorted(source.sample(since=None, agent="agt_a", n=10)) == ["dec_s0", "dec_s2"]
    assert source.sample(since=datetime(2027, 1, 1), agent=None, n=10) == []
    assert len(source.sample(since=None, agent=None, n=2)) == 2
    assert source.load("dec_s1")["agentId"] == "agt_b"  # found by content, not by file name

"""``blackbox record AGENT``: the behavioural record's figures equal a hand count on the pact world's
300 demo decisions, and the score is the Wilson lower bound written in consumers/pacts/record.py."""

from __future__ import annotations

import json

import pytest
from pact_world import PactWorld, blackbox

from consumers.pacts.record import wilson_lower


def test_the_score_formula_bounds_a_short_record() -> None:
    assert wilson_lower(10, 10) == pytest.approx(1 / (1 + 1.96**2 / 10))  # p = 1: 0.7225, not 1.0
    assert wilson_lower(1000, 1000) == pytest.approx(1 / (1 + 1.96**2 / 1000))
    assert wilson_lower(0, 0) == 0.0
    assert wilson_lower(5, 10) < 0.5 < wilson_lower(500, 1000) + 0.05
    assert wilson_lower(9, 10) < wilson_lower(900, 1000)


def test_the_record_equals_a_hand_count(pact_world: PactWorld) -> None:
    out = blackbox(
        ["record", "agt_support", "--since", "2000-01-01T00:00:00Z", "--json"], env=pact_world.env()
    )
    doc = json.loads(out.stdout)
    runs = pact_world.runs
    wrong = pact_world.wrong
    assert doc["decisions"] == len(runs) == 300
    # consequential at capture by the agent, or flagged by the refund pact at ingest
    assert doc["consequential"] == len({r.decision_id for r in runs if r.consequential} | wrong)
    assert doc["failures"] == len(wrong)  # the demo's only failures are the planted wrong refunds
    assert doc["clean"] == 300 - len(wrong)
    by_rule = {v["rule"]: v for v in doc["violations"]}
    assert set(by_rule) == {"refund_within_disputed_charge"}  # the other rules hold or only error
    assert by_rule["refund_within_disputed_charge"]["decisions"] == len(wrong)
    assert by_rule["refund_within_disputed_charge"]["per_1000"] == round(1000 * len(wrong) / 300, 1)
    assert by_rule["refund_within_disputed_charge"]["pact_versions"] == [""]  # the local pacts file
    assert doc["score"] == round(wilson_lower(300 - len(wrong), 300), 4)
    assert doc["gates"] == {"passed": 0, "failed": 0} and doc["pact_versions"] == []

    table = blackbox(
        ["record", "agt_support", "--since", "2000-01-01T00:00:00Z"], env=pact_world.env()
    ).stdout
    assert "refund_within_disputed_charge" in table and str(doc["score"]) in table

    empty = json.loads(blackbox(["record", "agt_nobody", "--json"], env=pact_world.env()).stdout)
    assert empty["decisions"] == 0 and empty["score"] == 0.0
    bad = blackbox(["record", "agt_support", "--since", "yesterday"], env=pact_world.env(), ok=False)
    assert bad.returncode != 0 and "--since" in bad.stderr + bad.stdout and "Traceback" not in bad.stderr


def test_the_agent_record_trend_sums_to_the_record_and_scores_each_day(pact_world: PactWorld) -> None:
    env = pact_world.env()
    doc = json.loads(
        blackbox(["record", "agt_support", "--since", "2000-01-01T00:00:00Z", "--json"], env=env).stdout
    )
    rows = json.loads(
        blackbox(
            ["trends", "agent_record", "--since", "2000-01-01", "--until", "2100-01-01", "--json"], env=env
        ).stdout
    )
    assert rows and {r["agent_id"] for r in rows} == {"agt_support"}
    for name in ("decisions", "failures", "clean"):
        assert sum(int(r[name]) for r in rows) == doc[name], name
    assert sum(int(r["violating"]) for r in rows) == len(pact_world.wrong)  # the refund rule's violations
    for r in rows:
        assert r["score"] == pytest.approx(wilson_lower(int(r["clean"]), int(r["decisions"])), abs=1e-4)

"""Pacts through the real pipeline: the demo's planted failure is flagged at ingest by a CEL rule, every
planted failure and no success; an evaluation error is counted and never stops ingest; a pact file
with a rule that does not compile stops ``consume`` before it reads anything, naming the rule."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

from pact_world import PactWorld, blackbox

from consumers.pacts.store import FLAG_PREFIX


def test_the_refund_pact_flags_every_planted_failure_and_no_success(pact_world: PactWorld) -> None:
    wrong = pact_world.wrong
    assert len(wrong) >= 5, "the recorded world must hold planted failures"
    violated = pact_world.query(
        "SELECT decision_id, rule FROM pact_violations FINAL WHERE kind = 'violation' ORDER BY decision_id"
    )
    assert {r["decision_id"] for r in violated if r["rule"] == "refund_within_disputed_charge"} == wrong
    assert {r["rule"] for r in violated} == {"refund_within_disputed_charge"}  # the others always hold

    # The violation went the flags path: a failure flag naming the rule, the decision consequential,
    # kept retentionDays, and failed_any counts it.
    flags = pact_world.query(
        f"SELECT decision_id, reason FROM flags WHERE startsWith(reason, '{FLAG_PREFIX}')"
    )
    assert {f["decision_id"] for f in flags} == wrong
    assert {f["reason"] for f in flags} == {"pact violated: refund_within_disputed_charge"}
    rows = pact_world.query(
        "SELECT decision_id, failed_any, consequential, retention_class, retention_days FROM decisions_current"
    )
    assert len(rows) == len(pact_world.runs)
    for row in rows:
        if row["decision_id"] in wrong:
            assert row["failed_any"] and row["consequential"], row
            assert (row["retention_class"], row["retention_days"]) == ("consequential", 365), row
    assert int(pact_world.consume_stats["pact_violations"]) == len(wrong)


def test_an_evaluation_error_is_counted_and_never_stops_ingest(pact_world: PactWorld) -> None:
    stats = pact_world.consume_stats
    assert int(stats["indexed"]) == len(pact_world.runs)  # every decision indexed
    structured = pact_world.query(
        "SELECT decision_id FROM decisions_current WHERE capture_level = 'structured-only'"
    )
    errors = pact_world.query(
        "SELECT decision_id, rule, detail FROM pact_violations FINAL WHERE kind = 'error'"
    )
    assert structured and {e["decision_id"] for e in errors} == {s["decision_id"] for s in structured}
    assert {e["rule"] for e in errors} == {"final_output_present"}
    assert {e["detail"] for e in errors} == {"no such key: 'final_output'"}
    assert int(stats["pact_errors"]) == len(errors)
    # an error never flags: the only failures are the planted ones
    failed = pact_world.query("SELECT decision_id FROM decisions_current WHERE failed_any")
    assert {f["decision_id"] for f in failed} == pact_world.wrong


def test_the_pact_violations_trend_counts_per_rule_per_day(pact_world: PactWorld) -> None:
    rows = blackbox(["trends", "pact_violations", "--since", "10d", "--json"], env=pact_world.env()).stdout
    trend = json.loads(rows)
    assert trend and list(trend[0]) == ["day", "rule", "decisions", "violations", "errors", "incidence"]
    per_rule: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    for row in trend:
        per_rule[row["rule"]] += row["violations"]
        errors[row["rule"]] += row["errors"]
        assert row["incidence"] == round(row["violations"] / row["decisions"], 4)
    assert per_rule["refund_within_disputed_charge"] == len(pact_world.wrong)
    assert per_rule["final_output_present"] == 0 and errors["final_output_present"] > 0
    assert sum(row["decisions"] for row in trend if row["rule"] == "final_output_present") == len(
        pact_world.runs
    )  # every day has structured-only decisions; decisions is the day's total

    split = json.loads(
        blackbox(
            ["trends", "pact_violations", "--since", "10d", "--by", "prompt_version", "--json"],
            env=pact_world.env(),
        ).stdout
    )
    by_prompt: dict[str, int] = defaultdict(int)
    for row in split:
        if row["rule"] == "refund_within_disputed_charge":
            by_prompt[row["prompt_version"]] += row["violations"]
    assert dict(by_prompt) == {"v4.7": len(pact_world.wrong)}  # the planted failure needs v4.7


def test_a_pact_that_does_not_compile_stops_consume_naming_it(tmp_path: Path) -> None:
    pacts = tmp_path / "pacts.toml"
    pacts.write_text(
        "[pact.fine]\nrule = 'true'\n\n[pact.broken_refund]\nrule = 'decision.tool_calls.filter(t, t.name == '\n",
        encoding="utf-8",
    )
    env = {"BLACKBOX_DATA_DIR": str(tmp_path / "data"), "BLACKBOX_PACTS": str(pacts)}
    out = blackbox(["consume", "--drain"], env=env, ok=False)
    assert out.returncode == 2, out.stderr
    assert "error: pact 'broken_refund' does not compile:" in out.stderr
    assert "Syntax error" in out.stderr and "Traceback" not in out.stderr

    pacts.write_text("[pact.typo]\nrule = 'decison.failed'\n", encoding="utf-8")
    out = blackbox(["consume", "--drain"], env=env, ok=False)
    assert out.returncode == 2 and "pact 'typo': Undefined variable or function: 'decison'" in out.stderr

    env["BLACKBOX_PACTS"] = str(tmp_path / "missing.toml")  # named explicitly, so it must exist
    out = blackbox(["consume", "--drain"], env=env, ok=False)
    assert out.returncode == 2 and "missing.toml does not exist" in out.stderr

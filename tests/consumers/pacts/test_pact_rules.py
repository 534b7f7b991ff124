"""The pact file, the ``decision`` view and ``evaluate`` (the API replay and regress use on replayed
outputs), on the contract's example capture: a refund against the balance the agent observed."""

from __future__ import annotations

import copy
import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from consumers.pacts import (
    PactInvalid,
    Rule,
    decision_view,
    evaluate,
    evaluate_capture,
    load_pacts,
    parse_pacts,
)
from producers.policy import strip_content

ROOT = Path(__file__).resolve().parents[3]
# The example: a refund never exceeds the balance the agent observed.
WITHIN_BALANCE = Rule(
    "refund_within_observed_balance",
    'decision.tool_calls.filter(t, t.name == "issue_refund")'
    '.all(t, t.input.amount <= decision.externals["customer.balance"].amount)',
)


def example() -> dict[str, Any]:
    return json.loads((ROOT / "schemas" / "examples" / "capture.unsealed.json").read_text(encoding="utf-8"))


def test_a_refund_over_the_observed_balance_is_a_violation_and_one_within_holds() -> None:
    capture = example()
    assert evaluate([WITHIN_BALANCE], decision_view(capture)).holds
    capture["executionTrace"]["toolCalls"][1]["input"]["amount"] = 1000.0  # balance observed: 880
    outcome = evaluate([WITHIN_BALANCE], decision_view(capture))
    assert outcome.violated == ("refund_within_observed_balance",)
    assert outcome.errors == () and outcome.evaluated == 1


def test_absent_content_is_left_out_of_the_view_so_reading_it_is_an_error_not_false() -> None:
    full = decision_view(example())
    assert full["tool_calls"][1]["input"] == {"customer_id": "cus_42", "amount": 120.0}
    assert full["externals"]["customer.balance"]["amount"] == 880.0
    assert full["memory_bytes"] > 0 and full["final_output"].startswith("I've refunded")
    stripped = strip_content(copy.deepcopy(example()))
    view = decision_view(stripped)
    assert "input" not in view["tool_calls"][1] and "final_output" not in view and "memory_bytes" not in view
    assert view["externals"] == {} and view["tool_calls"][1]["name"] == "issue_refund"
    outcome = evaluate(
        [WITHIN_BALANCE, Rule("guarded", "decision.tool_calls.all(t, !has(t.input) || t.input.size() > 0)")],
        view,
    )
    assert [(r.rule, r.kind) for r in outcome.results] == [("refund_within_observed_balance", "error")]
    assert "no such key" in outcome.errors[0].detail


def test_every_rule_runs_even_when_one_errors_and_a_non_bool_is_an_error() -> None:
    rules = [
        Rule("divides", "1 / (decision.tool_calls.size() - 2) == 1"),  # division by zero here
        Rule("not_bool", "decision.agent"),
        Rule("stop", 'decision.stop_reason != "end_turn"'),
    ]
    outcome = evaluate(rules, decision_view(example()))
    assert [(r.rule, r.kind) for r in outcome.results] == [
        ("divides", "error"),
        ("not_bool", "error"),
        ("stop", "violation"),
    ]
    assert "not a bool" in outcome.results[1].detail
    # a capture the view cannot read errors every rule, it never raises
    broken = evaluate_capture(rules, {"executionTrace": {"toolCalls": [{"sequence": "x"}]}})
    assert {r.kind for r in broken.results} == {"error"} and len(broken.results) == 3


def test_the_view_reads_names_versions_outcome_and_time() -> None:
    view = decision_view(example())
    rule = Rule(
        "shape",
        'decision.prompt_version == "v4.7" && decision.model.version == "2026-06-01" && '
        '!decision.failed && decision.outcome.status == "unknown" && decision.consequential && '
        'decision.captured_at > timestamp("2026-01-01T00:00:00Z") && decision.memory.size() == 2 && '
        'decision.memory[0].tier == "hot" && decision.request.channel == "chat"',
    )
    assert evaluate([rule], view).holds


def test_a_pact_file_with_a_rule_that_does_not_compile_is_refused_naming_the_rule() -> None:
    text = "[pact.ok]\nrule = 'true'\n\n[pact.bad_refund]\nrule = 'decision.tool_calls.all(t, t.input.amount <'\n"
    with pytest.raises(PactInvalid, match=r"pact 'bad_refund' does not compile: .*Syntax error"):
        parse_pacts(text)
    with pytest.raises(PactInvalid, match=r"pact 'typo': Undefined variable or function: 'decison'"):
        parse_pacts("[pact.typo]\nrule = 'decison.failed'\n")
    with pytest.raises(PactInvalid, match=r"pact 'no_rule' has no rule"):
        parse_pacts("[pact.no_rule]\ndescription = 'x'\n")
    with pytest.raises(PactInvalid, match=r"unknown key\(s\) rules"):
        parse_pacts("[pact.plural]\nrules = 'true'\n")
    with pytest.raises(PactInvalid, match="not valid TOML"):
        parse_pacts("[pact.x\n")
    with pytest.raises(PactInvalid, match="unknown top-level key"):
        parse_pacts("[pacts.x]\nrule = 'true'\n")


def test_the_default_pact_file_may_be_missing_a_named_one_may_not(tmp_path: Path) -> None:
    assert not load_pacts(tmp_path / "pacts.toml")
    with pytest.raises(PactInvalid, match="does not exist"):
        load_pacts(tmp_path / "pacts.toml", missing_ok=False)
    (tmp_path / "pacts.toml").write_text(
        "[pact.a]\nrule = 'true'\ndescription = 'always'\n", encoding="utf-8"
    )
    book = load_pacts(tmp_path / "pacts.toml")
    assert [(r.name, r.source, r.description) for r in book] == [("a", "true", "always")]


def test_rules_and_verdicts_cross_process_boundaries() -> None:
    # ingest's worker processes get rules (programs do not pickle) and send verdicts back
    rules = pickle.loads(pickle.dumps((WITHIN_BALANCE,)))
    outcome = evaluate_capture(rules, example())
    assert pickle.loads(pickle.dumps(outcome)) == outcome

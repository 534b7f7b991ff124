"""Findings on the recorded demo world: ``finding add`` pins the decisions its rule matches among those
given (and those of a replay run), ``finding list`` / ``show`` read them back, and
``trends finding:NAME`` shows the rule's incidence per day, before and after the prompt change."""

from __future__ import annotations

import json
from collections import defaultdict

from pact_world import PactWorld, blackbox

# True on a decision that shows the problem: a refund above the disputed charge.
WRONG_REFUND = (
    'decision.tool_calls.exists(t, t.name == "issue_refund" && t.input.amount > '
    'decision.tool_calls.filter(l, l.name == "lookup_customer")[0].output.disputed_charge)'
)


def _right_refund(world: PactWorld) -> str:
    return next(r.decision_id for r in world.runs if r.consequential and not r.wrong_refund)


def test_finding_add_pins_what_the_rule_matches_and_list_and_show_read_it(pact_world: PactWorld) -> None:
    wrong = sorted(pact_world.wrong)
    right = _right_refund(pact_world)
    env = pact_world.env()
    blackbox(["replay", wrong[0], "--model-callable", "consumers.demo.model:ScriptedSupportModel"], env=env)
    run_id = pact_world.query(f"SELECT any(run_id) AS run FROM replay_runs WHERE decision_id = '{wrong[0]}'")[
        0
    ]["run"]
    out = blackbox(
        [
            "finding", "add", "wrong-refund", "--rule", WRONG_REFUND, "--from-replay", run_id,
            "--decision", wrong[1], "--decision", right, "--description", "v4.7 refunds the balance",
        ],
        env=env,
    ).stdout  # fmt: skip
    assert f"pinned 2 decision(s): {wrong[1]}, {wrong[0]}" in out
    assert f"not pinned {right}: the rule is false on it" in out

    listed = json.loads(blackbox(["finding", "list", "--json"], env=env).stdout)
    assert [(f["name"], f["pinned"], f["from_replay"]) for f in listed] == [("wrong-refund", 2, run_id)]
    shown = json.loads(blackbox(["finding", "show", "wrong-refund", "--json"], env=env).stdout)
    assert shown["rule"] == WRONG_REFUND and shown["description"] == "v4.7 refunds the balance"
    assert {(d["decision_id"], d["source"], d["failed"]) for d in shown["decisions"]} == {
        (wrong[0], "replay", True),
        (wrong[1], "decision", True),
    }
    text = blackbox(["finding", "show", "wrong-refund"], env=env).stdout
    assert "rule: " + WRONG_REFUND in text and wrong[0] in text

    # every capture the rule read was a logged access
    logged = pact_world.query(
        f"SELECT decision_id FROM access_log WHERE action = 'evaluate' AND decision_id = '{right}'"
    )
    assert logged


def test_finding_add_refuses_what_it_cannot_record(pact_world: PactWorld) -> None:
    env = pact_world.env()
    right = _right_refund(pact_world)
    cases = [
        (["--rule", "decision.tool_calls.exists(t, ", "--decision", right], "finding 'f' does not compile"),
        (["--rule", WRONG_REFUND, "--decision", right], "matches none of the 1 decision(s) given"),
        (["--rule", WRONG_REFUND, "--decision", "dec_nope"], "not in the index: dec_nope"),
        (["--rule", WRONG_REFUND, "--from-replay", "no-such-run"], "no replay run 'no-such-run'"),
        (["--rule", WRONG_REFUND], "needs the decisions that showed it"),
    ]
    for args, message in cases:
        out = blackbox(["finding", "add", "f", *args], env=env, ok=False)
        assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr, (args, out)
    assert all(f["name"] != "f" for f in json.loads(blackbox(["finding", "list", "--json"], env=env).stdout))
    out = blackbox(["finding", "show", "f"], env=env, ok=False)
    assert out.returncode == 2 and "no finding 'f'" in out.stderr


def test_trends_finding_shows_its_incidence_before_and_after_the_prompt_change(pact_world: PactWorld) -> None:
    env = pact_world.env()
    wrong = sorted(pact_world.wrong)
    blackbox(
        ["finding", "add", "wrong-refund-trend", "--rule", WRONG_REFUND, "--decision", wrong[0]], env=env
    )
    rows = json.loads(
        blackbox(
            ["trends", "finding:wrong-refund-trend", "--since", "10d", "--by", "prompt_version", "--json"],
            env=env,
        ).stdout
    )
    assert rows and list(rows[0]) == ["day", "prompt_version", "decisions", "matched", "errors", "incidence"]
    matched: dict[str, int] = defaultdict(int)
    for row in rows:
        matched[row["prompt_version"]] += row["matched"]
        assert row["errors"] == 0  # exists() on tool names only reads input where a refund was made
    assert sum(r["decisions"] for r in rows) == len(pact_world.runs)
    assert dict(matched) == {"v4.5": 0, "v4.6": 0, "v4.7": len(pact_world.wrong)}

    out = blackbox(["trends", "finding:nope"], env=env, ok=False)
    assert out.returncode == 2 and "no finding 'nope'" in out.stderr
    out = blackbox(["trends", "finding:wrong-refund-trend", "--by", "nonsense"], env=env, ok=False)
    assert out.returncode == 2 and "cannot be split by 'nonsense'" in out.stderr

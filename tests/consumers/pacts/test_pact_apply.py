"""``blackbox pact apply``: the gate judges the findings' suites and recent decisions under the applied
and the new version, refuses a change that hides a finding's decisions, and ``--force --reason``
applies it anyway, logged as forced. Runs on its own pact world (300 demo decisions)."""

from __future__ import annotations

import json
from pathlib import Path

from pact_world import PACTS, blackbox, make_world
from test_pact_versions import _operator, _propose

LOOSE = """
[pact.final_output_present]
rule = 'decision.final_output.size() > 0'
"""


def test_the_gate_refuses_a_loosening_and_reports_what_a_tightening_flags(tmp_path: Path) -> None:
    data = tmp_path / "data"
    pact_world = make_world(data)  # its own world: this test moves the applied version
    env = _operator(data)
    wrong = sorted(pact_world.wrong)
    assert len(wrong) >= 2
    refund_rule = PACTS.split("rule = '")[1].split("'\n")[0]
    blackbox(
        [
            "finding",
            "add",
            "wrong_refund",
            "--rule",
            f"!({refund_rule})",
            "--decision",
            wrong[0],
            "--decision",
            wrong[1],
        ],
        env=env,
    )

    loose = _propose(env, tmp_path, LOOSE, "drop the refund rules")
    strict = _propose(env, tmp_path, PACTS, "the refund rules back")

    # From the local file's rules to LOOSE: the finding's pinned decisions would no longer be flagged.
    out = blackbox(["pact", "apply", loose, "--sample", "1000", "--json"], env=env, ok=False)
    assert out.returncode == 1, out.stderr
    report = json.loads(out.stdout)
    assert not report["passed"] and not report["applied"]
    assert {r for r in report["reasons"] if "no longer be flagged" in r} == {
        f"finding's pinned decision {d} would no longer be flagged" for d in wrong[:2]
    }
    cleared = {r["rule"]: set(r["cleared"]) for r in report["rules"]}
    assert cleared["refund_within_disputed_charge"] == set(wrong)  # hand count: every planted failure
    history = json.loads(blackbox(["pact", "history", "--json"], env=env).stdout)
    assert not any(r["applied"] for r in history)

    out = blackbox(["pact", "apply", loose, "--force"], env=env, ok=False)
    assert out.returncode != 0 and "--reason" in out.stderr + out.stdout and "Traceback" not in out.stderr

    out = blackbox(["pact", "apply", loose, "--force", "--reason", "incident 42 hotfix"], env=env)
    assert "gate failed; applied" in out.stdout
    forced = json.loads(
        blackbox(
            ["query", "SELECT version, forced, reason, gate FROM pact_applications FINAL", "--json"], env=env
        ).stdout
    )
    assert len(forced) == 1 and forced[0]["version"] == loose and forced[0]["forced"] in (True, 1)
    assert forced[0]["reason"] == "incident 42 hotfix" and forced[0]["gate"].startswith("failed: ")

    # Back to the refund rules: the gate passes and flags exactly the planted failures.
    report = json.loads(blackbox(["pact", "apply", strict, "--sample", "1000", "--json"], env=env).stdout)
    assert report["passed"] and report["applied"]
    flagged = {r["rule"]: set(r["flagged"]) for r in report["rules"]}
    assert flagged["refund_within_disputed_charge"] == set(wrong)
    history = json.loads(blackbox(["pact", "history", "--json"], env=env).stdout)
    assert [r["version"] for r in history if r["applied"]] == [strict]

    # The record lists both applies as the versions in force (the forced one marked).
    record = json.loads(
        blackbox(["record", "agt_support", "--since", "2000-01-01T00:00:00Z", "--json"], env=env).stdout
    )
    assert [(v["version"], v["forced"]) for v in record["pact_versions"]] == [(loose, True), (strict, False)]

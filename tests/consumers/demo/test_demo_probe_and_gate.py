"""On the demo's planted failure (prompt v4.7 with a working set over 8 KB): a probe maps the
working-set boundary, a finding pins the failures, and ``regress --suite`` gates a change by exit code."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from demo_cli import BLACKBOX, run
from headless_browser import dump_dom

from consumers.demo.model import WORKING_SET_LIMIT

MODEL = ["--model-callable", "consumers.demo.model:ScriptedSupportModel"]
FINDING_RULE = (
    'decision.tool_calls.exists(t, t.name == "issue_refund" && t.input.amount > '
    'decision.tool_calls.filter(l, l.name == "lookup_customer")[0].output.disputed_charge)'
)
PACTS = """
[pact.refund_at_most_balance]
description = "A refund never exceeds the balance the agent observed."
rule = '''
decision.tool_calls.filter(t, t.name == "issue_refund").all(t,
  t.input.amount <= decision.tool_calls.filter(b, b.name == "get_balance")[0].output.balance)
'''
"""


def _exit_code(args: list[str], env: dict[str, str]) -> int:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("BLACKBOX_")}
    return subprocess.run(
        [*BLACKBOX, *args], capture_output=True, env={**clean, **env}, timeout=300
    ).returncode


def _failed_decision(output: str) -> str:
    found = re.search(r"blackbox show (dec_\w+)", output)
    assert found, output
    return found.group(1)


def test_a_probe_finds_the_working_set_boundary_within_one_step(demo: tuple[Path, str]) -> None:
    data_dir, output = demo
    env = {"BLACKBOX_DATA_DIR": str(data_dir)}
    did = _failed_decision(output)
    args = [
        "probe",
        did,
        *MODEL,
        "--sweep",
        "memory.truncate=0..16KB/1KB",
        "--sweep",
        "system_prompt=versions",
    ]
    body = json.loads(run([*args, "--json"], env=env))

    boundaries = {b["series"]: b for b in body["boundaries"]}
    v47 = boundaries["v4.7"]
    assert v47["kind"] == "above"
    assert v47["passesUpTo"] <= WORKING_SET_LIMIT < v47["failsFrom"]
    assert v47["passesUpTo"] >= WORKING_SET_LIMIT - 1024 and v47["failsFrom"] <= WORKING_SET_LIMIT + 1024
    assert boundaries["v4.5"]["kind"] == boundaries["v4.6"]["kind"] == "never"
    assert body["summary"].startswith("fails when the working set exceeds ")
    assert "never fails with v4.5, v4.6" in body["summary"]

    table = run(args, env=env)
    assert "boundary: fails when the working set exceeds" in table.replace("\n", " ")

    page = data_dir / "probe-report.html"
    run(["report", "--out", str(page)], env=env)
    dom = dump_dom(page)
    assert 'data-rendered="7"' in dom and "Failure boundary (latest probe)" in dom
    assert dom.count('class="point"') == 17 * 3


def test_regress_suite_gates_a_change_by_exit_code(demo: tuple[Path, str], tmp_path: Path) -> None:
    data_dir, _ = demo
    pacts = tmp_path / "pacts.toml"
    pacts.write_text(PACTS, encoding="utf-8")
    env = {
        "BLACKBOX_DATA_DIR": str(data_dir),
        "BLACKBOX_PACTS": str(pacts),
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]),
    }
    rows = json.loads(
        run(
            [
                "query",
                "SELECT decision_id FROM decisions_current WHERE failed_any AND content_state = 'full' "
                "ORDER BY decision_id LIMIT 4",
                "--json",
            ],
            env=env,
        )
    )
    failed = [r["decision_id"] for r in rows]
    assert len(failed) == 4
    add = ["finding", "add", "wrong-refund-gate", "--rule", FINDING_RULE]
    for did in failed:
        add += ["--decision", did]
    assert "pinned 4 decision(s)" in run(add, env=env)

    model = ["--model-callable", "regressing_model:RegressingModel"]
    gate = ["regress", "--suite", "wrong-refund-gate", *model, "--json"]

    # As captured, nothing is fixed: the finding still shows on every pinned decision.
    assert _exit_code(gate, env) == 1
    unchanged = json.loads(run(gate, env=env, ok=False))
    assert unchanged["passed"] is False and unchanged["counts"]["unchanged"] == 4
    assert {f["decisionId"] for f in unchanged["failures"]} == set(failed)

    # The fix: prompt v4.6, named by its version. Every pinned decision is fixed; exit 0.
    fixed = json.loads(run([*gate, "--vary", "system_prompt=v4.6"], env=env))  # run() asserts exit 0
    assert fixed["passed"] is True and fixed["counts"]["fixed"] == 4 and not fixed["failures"]
    assert fixed["checks"] == ["refund_at_most_balance", "finding:wrong-refund-gate"]

    # A planted regression: a candidate model that refunds more than the balance. Exit 1, and the
    # decisions and the rule are named.
    candidate = ["regress", "--suite", "wrong-refund-gate", *model, "--vary", "model=acme-support-next"]
    assert _exit_code(candidate, env) == 1
    table = run(candidate, env=env, ok=False)
    assert "FAIL: 4 regressed" in table
    for did in failed:
        assert f"FAILED {did}: refund_at_most_balance violated" in table
    regressed = json.loads(run([*candidate, "--json"], env=env, ok=False))
    assert regressed["counts"]["regressed"] == 4
    assert all(d["regressed"] == ["refund_at_most_balance"] for d in regressed["decisions"])

    # Each run lands in replay_runs under the suite's name, and in the report's gates table.
    runs = json.loads(
        run(
            [
                "query",
                "SELECT verdict, count() AS n FROM replay_runs WHERE suite = 'wrong-refund-gate' GROUP BY verdict "
                "ORDER BY verdict",
                "--json",
            ],
            env=env,
        )
    )
    verdicts = {r["verdict"]: r["n"] for r in runs}
    assert verdicts["fixed: finding:wrong-refund-gate; left the recording at step 3"] == 4
    page = tmp_path / "report.html"
    run(["report", "--out", str(page)], env=env)
    assert "wrong-refund-gate" in page.read_text(encoding="utf-8")
    assert _exit_code(["regress", "--suite", "no-such-finding", *model], env) == 2

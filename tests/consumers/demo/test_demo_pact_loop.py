"""``blackbox demo`` closes the loop: the finding becomes a pact version, its gate replays the finding's
suite (fixed) and judges recent decisions, the version is applied and logged (a pact bundle verifies
offline), and ``record`` before and after the apply equals a hand count on the demo's data."""

from __future__ import annotations

import json
import re
from pathlib import Path

from demo_cli import run


def test_the_demo_turns_the_finding_into_a_logged_pact_and_records_before_and_after(
    demo: tuple[Path, str], tmp_path: Path
) -> None:
    data_dir, output = demo
    env = {"BLACKBOX_DATA_DIR": str(data_dir)}
    loop = output.split("6. Close the loop", 1)[1].split("Conclusion", 1)[0]
    pinned = re.search(r"Finding wrong_refund pins (\d+) failed decisions", loop)
    assert pinned and int(pinned.group(1)) > 0, loop
    n = pinned.group(1)
    assert f"the finding's suite replayed with the fix (system_prompt=v4.6): {n} of {n} fixed, passed" in loop
    gate = re.search(
        r"Gate 2, the new rules on the (\d+) most recent decisions: \S+ would flag (\d+); passed", loop
    )
    assert gate, loop
    logged = re.search(r"logged in the transparency log as pact:(pv_\w+)@(\S+)\.", loop)
    assert logged, loop
    version, applied_at = logged.group(1), logged.group(2)
    assert f"Pact version {version} now binds the agent" in output.split("Conclusion", 1)[1]

    # the suite's replays are recorded under the finding's name, and passed
    runs = json.loads(
        run(["query", "SELECT verdict FROM replay_runs WHERE suite = 'wrong_refund'", "--json"], env=env)
    )
    assert len(runs) == int(n) and all(r["verdict"].startswith("fixed") for r in runs), runs
    history = json.loads(run(["pact", "history", "--agent", "agt_support", "--json"], env=env))
    assert [r["version"] for r in history if r["applied"]] == [version]

    # the apply verifies from a bundle, offline, with the operator's key and the log's key
    bundle = tmp_path / "pact.json"
    run(["pact", "bundle", version, "-o", str(bundle)], env=env)
    (operator,) = (data_dir / "operator").glob("*.pub")
    vkey = run(["log", "key"], env=env).strip()
    verified = run(["verify", "--bundle", str(bundle), "--trust", str(operator), "--log-key", vkey], env={})
    assert f"verified: pact version {version}" in verified and "logged: leaf " in verified

    # record before and after the apply, against a hand count of the index's rows
    def count(where: str) -> dict[str, int]:
        rows = json.loads(
            run(
                [
                    "query",
                    "SELECT count() AS n, countIf(failed_any) AS failed FROM decisions_current "
                    f"WHERE agent_id = 'agt_support' AND trust = 'verified' AND {where}",
                    "--json",
                ],
                env=env,
            )
        )
        return {"decisions": int(rows[0]["n"]), "failures": int(rows[0]["failed"])}

    at = applied_at.replace("T", " ").rstrip("Z")[:23]  # the apply time to the millisecond, as stored
    since = "2000-01-01T00:00:00Z"
    before = json.loads(
        run(["record", "agt_support", "--since", since, "--until", applied_at, "--json"], env=env)
    )
    after = json.loads(run(["record", "agt_support", "--since", applied_at, "--json"], env=env))
    want_before = count(f"captured_at < toDateTime64('{at}', 3, 'UTC')")
    want_after = count(f"captured_at >= toDateTime64('{at}', 3, 'UTC')")
    assert {k: before[k] for k in want_before} == want_before
    assert {k: after[k] for k in want_after} == want_after
    assert before["failures"] > 0 and after["decisions"] >= 100 and after["failures"] == 0
    assert int(gate.group(2)) > 0  # what the new rule would have flagged before the fix
    assert before["pact_versions"] == [] and [v["version"] for v in after["pact_versions"]] == [version]
    assert after["violations"] == []  # judged under the applied version at ingest: nothing violated
    assert after["score"] > before["score"]

"""The pact and finding tests' world: the demo's agent recorded with a pact file, and ``blackbox`` run
in a subprocess, as an operator runs it (the fixture is in ``conftest.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from consumers.app.settings import load_service_settings
from consumers.demo.agent import DecisionRun, SimClock, run_agent, simulation_start
from consumers.demo.world import World
from producers.evidence import TrustStore, generate_keypair, load_signer
from producers.policy import CapturePolicy
from producers.recorder import Recorder

BLACKBOX = [sys.executable, "-c", "from consumers.cli import main; main()"]

# The planted failure (consumers/demo/model.py): prompt v4.7 with a working set over 8 KB refunds
# the whole balance instead of the disputed charge the agent looked up.
REFUND_RULE = (
    'decision.tool_calls.filter(t, t.name == "issue_refund").all(t, t.input.amount <= '
    'decision.tool_calls.filter(l, l.name == "lookup_customer")[0].output.disputed_charge)'
)
PACTS = f"""
[pact.refund_within_disputed_charge]
description = "A refund never exceeds the charge the customer disputed."
rule = '{REFUND_RULE}'

# The issue's example: the planted refund equals the balance, so this one always holds.
[pact.refund_within_observed_balance]
rule = '''
decision.tool_calls.filter(t, t.name == "issue_refund")
  .all(t, t.input.amount <= decision.externals["customer.balance"].balance)
'''

# Reads content a structured-only capture does not hold: an evaluation error on each of those.
[pact.final_output_present]
rule = 'decision.final_output.size() > 0'
"""


@dataclass(frozen=True)
class PactWorld:
    data_dir: Path
    runs: tuple[DecisionRun, ...]
    consume_stats: dict[str, str]

    @property
    def wrong(self) -> set[str]:
        return {r.decision_id for r in self.runs if r.wrong_refund}

    def env(self, **extra: str) -> dict[str, str]:
        return {"BLACKBOX_DATA_DIR": str(self.data_dir), **extra}

    def query(self, sql: str) -> list[dict[str, Any]]:
        return json.loads(blackbox(["query", sql, "--json"], env=self.env()).stdout)


def blackbox(
    args: list[str], *, env: dict[str, str], ok: bool = True, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``blackbox ARGS`` in a subprocess with only these ``BLACKBOX_*`` settings."""
    out = subprocess.run(
        [*BLACKBOX, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("BLACKBOX_")},
            "COLUMNS": "200",
            **env,
        },
        check=False,
    )
    if ok:
        assert out.returncode == 0, f"blackbox {' '.join(args)}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


def record(data_dir: Path, *, decisions: int, days: int) -> list[DecisionRun]:
    """The demo's agent and world, recorded to the spool of ``data_dir`` with a freshly trusted key."""
    settings = load_service_settings(data_dir=data_dir)
    private_path, _ = generate_keypair(data_dir / "keys")
    signer = load_signer(path=private_path)
    store = TrustStore.load(settings.resolved_trust_store, missing_ok=True)
    store.add(signer.public_raw, not_before=datetime(2000, 1, 1, tzinfo=UTC), note="pact tests")
    store.save(settings.resolved_trust_store)
    start = simulation_start(days)
    clock = SimClock(start)
    recorder = Recorder.from_settings(
        settings,
        agent_id="agt_support",
        runtime_id="rt_pacts",
        signer=signer,
        policy=CapturePolicy(sample_one_in=20),
        clock=clock,
    )
    runs = list(
        run_agent(recorder=recorder, clock=clock, world=World(), decisions=decisions, days=days, start=start)
    )
    assert recorder.close(timeout=120), recorder.stats
    return runs


def make_world(data_dir: Path) -> PactWorld:
    """Record 300 decisions over 3 days into ``data_dir`` (pacts at the default location) and ingest them."""
    data_dir.mkdir(parents=True)
    (data_dir / "pacts.toml").write_text(PACTS, encoding="utf-8")
    runs = record(data_dir, decisions=300, days=3)
    out = blackbox(["consume", "--drain", "--workers", "1"], env={"BLACKBOX_DATA_DIR": str(data_dir)})
    stats = dict(part.split("=", 1) for part in out.stdout.splitlines()[0].split())
    return PactWorld(data_dir=data_dir, runs=tuple(runs), consume_stats=stats)

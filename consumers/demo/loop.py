"""The demo's last step: the finding becomes a commitment, and the record shows whether it holds.

1. a finding (``wrong_refund``) pins the failed full captures on the worst prompt;
2. a pact version binding the support agent (a refund never exceeds the disputed charge) is proposed,
   signed by an operator key the demo trusts;
3. the gate: the finding's suite is replayed with the fix (prompt v4.6) and judged by the new pact
   and the finding's rule (``regress --suite``), then ``pact apply`` judges the recent decisions under
   the new rules (:mod:`consumers.app.pact_apply`);
4. the version is applied and appended to the transparency log;
5. the fix ships: the agent's next decisions run on v4.6, ingest judges them under the applied version;
6. ``record`` before the apply and after it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from consumers.access import Caller
from consumers.app.pact_apply import ApplyOutcome, apply_version
from consumers.demo.agent import system_prompt
from consumers.demo.store import failed_full_captures
from consumers.findings.record import add_finding
from consumers.pacts import Rule
from consumers.pacts.record import AgentRecord, agent_record
from consumers.pacts.store import insert_version
from consumers.pacts.versions import propose_version
from consumers.privacy.ids import index_ids
from consumers.replay import IndexReplayRunLog, RegressionResult, Variation, checks_of, regress
from producers.evidence import Signer, TrustStore, generate_keypair, load_signer

if TYPE_CHECKING:
    from consumers.app.runtime import Runtime
    from consumers.replay import Replayer

__all__ = ["FINDING", "LoopResult", "close_the_loop"]

FINDING = "wrong_refund"
FINDING_RULE = (
    'decision.tool_calls.exists(t, t.name == "issue_refund" && t.input.amount > '
    'decision.tool_calls.filter(l, l.name == "lookup_customer")[0].output.disputed_charge)'
)
RULE = "refund_within_disputed_charge"
PACT = f"""agents = ["agt_support*"]

[pact.{RULE}]
description = "A refund never exceeds the charge the customer disputed."
rule = '''
decision.tool_calls.filter(t, t.name == "issue_refund").all(t,
  t.input.amount <= decision.tool_calls.filter(l, l.name == "lookup_customer")[0].output.disputed_charge)
'''
"""
SUITE_SIZE = 8  # pinned decisions: replayed twice (as captured for the finding, with the fix for the gate)
GATE_SAMPLE = 300  # recent decisions the apply gate judges


@dataclass(frozen=True, slots=True)
class LoopResult:
    pinned: int
    suite: RegressionResult
    apply: ApplyOutcome
    flagged_before: int  # recent decisions the new rule would flag, judged at apply
    before: AgentRecord
    after: AgentRecord

    @property
    def version(self) -> str:
        return self.apply.version.version


def close_the_loop(
    rt: Runtime,
    *,
    agent_id: str,
    worst_prompt: str,
    since: datetime,
    replayer: Replayer,
    run_after: Callable[[datetime], None],
    console: Console,
) -> LoopResult:
    """Steps 1-6 of the module docstring; ``run_after(start)`` records and ingests the decisions made
    after the apply."""
    responder = Caller(identity="demo-incident-responder", scope="operator", reason="demo: refund incident")
    candidates = failed_full_captures(rt.index, worst_prompt, limit=SUITE_SIZE)
    finding = add_finding(
        rt.index,
        name=FINDING,
        rule=FINDING_RULE,
        description="a refund larger than the charge the customer disputed",
        decisions=candidates,
        blobs=rt.blob_store,
        gate=rt.gate,
        caller=responder,
        now=datetime.now(UTC),
        ids=index_ids(rt.settings),
    )
    console.print(f"Finding [bold]{FINDING}[/bold] pins {len(finding.pinned)} failed decisions.")

    operator = _operator_signer(rt)
    version = propose_version(
        rt.blob_store,
        document=PACT,
        author="demo-operator",
        reason=f"finding {FINDING}: a refund never exceeds the disputed charge",
        signer=operator,
        now=datetime.now(UTC),
    )
    insert_version(rt.index, version)
    console.print(f"Proposed pact version [bold]{version.version}[/bold] (rule {RULE}, agents agt_support*).")

    suite = regress(
        replayer,
        finding.pinned,
        configuration=[Variation("system_prompt", system_prompt("v4.6"), label="system_prompt=v4.6")],
        checks=checks_of(version.book.rules, finding=Rule(name=FINDING, source=FINDING_RULE)),
        suite=FINDING,
        workers=2,
        run_log=IndexReplayRunLog(rt.index),
        progress=False,
    )
    fixed = suite.counts.get("fixed", 0)
    console.print(
        f"Gate 1, the finding's suite replayed with the fix (system_prompt=v4.6): {fixed} of "
        f"{len(finding.pinned)} fixed, {'passed' if suite.passed else 'FAILED'}."
    )
    outcome = apply_version(
        rt, version.version, now=datetime.now(UTC), sample=GATE_SAMPLE, applied_by="demo-operator"
    )
    flagged = sum(len(c.flagged) for c in outcome.report.changes if c.rule == RULE)
    console.print(
        f"Gate 2, the new rules on the {outcome.report.judged} most recent decisions: {RULE} would flag "
        f"{flagged}; {'passed' if outcome.report.passed else 'FAILED'}."
    )
    if outcome.applied:
        console.print(f"Applied and logged in the transparency log as {outcome.logged}.")

    run_after(outcome.applied_at)
    before = agent_record(rt.index, agent_id, since=since, until=outcome.applied_at)
    after = agent_record(rt.index, agent_id, since=outcome.applied_at)
    console.print(_records_table(before, after))
    return LoopResult(len(finding.pinned), suite, outcome, flagged, before, after)


def _operator_signer(rt: Runtime) -> Signer:
    """A fresh operator key for pact versions, trusted from now on."""
    private_path, _ = generate_keypair(rt.settings.data_dir / "operator", stem="pact-operator")
    signer = load_signer(path=private_path)
    store = TrustStore.load(rt.settings.resolved_trust_store, missing_ok=True)
    store.add(
        signer.public_raw, not_before=datetime(2000, 1, 1, tzinfo=UTC), note="blackbox demo pact operator"
    )
    store.save(rt.settings.resolved_trust_store)
    return signer


def _records_table(before: AgentRecord, after: AgentRecord) -> Table:
    table = Table(title="record agt_support: before the pact version, and after (blackbox record)")
    table.add_column("")
    table.add_column("before", justify="right")
    table.add_column("after", justify="right")

    def per_1000(r: AgentRecord, n: int) -> str:
        return f"{n} ({1000 * n / r.decisions:.1f} per 1,000)" if r.decisions else "0"

    def violations(r: AgentRecord) -> int:
        return sum(int(v["decisions"]) for v in r.violations if v["rule"] == RULE)

    table.add_row("decisions", str(before.decisions), str(after.decisions))
    table.add_row("failures", per_1000(before, before.failures), per_1000(after, after.failures))
    table.add_row(
        f"{RULE} violations", per_1000(before, violations(before)), per_1000(after, violations(after))
    )
    table.add_row("score", f"{before.score:.3f}", f"{after.score:.3f}")
    table.add_row(
        "pact version in force",
        ", ".join(v["version"] for v in before.pact_versions) or "none",
        ", ".join(v["version"] for v in after.pact_versions) or "none",
    )
    return table

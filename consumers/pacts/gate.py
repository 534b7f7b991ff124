"""The gate before a pact version is applied: what would the new rules change on real decisions?

The decisions judged are every finding's pinned suite plus a sample of the most recent decisions of
the agents the new version binds, read from their stored captures. Each is judged under the applied
version and under the proposed one; per rule, the report lists the decisions the new version would
flag (newly violated) and clear (no longer violated). The gate fails when the change

- clears a finding's pinned decision entirely (it violated some rule before and none after): a known
  problem the new rules would stop seeing, or
- makes a rule error (not evaluable) on more decisions than before.

Recorded captures are judged as they were recorded: a pact change alters the judgement, not the
agent's behaviour, so no model is called here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from consumers.pacts.evaluate import evaluate_capture
from producers.pacts.book import PactBook

__all__ = ["GateReport", "RuleChange", "judge_change"]


@dataclass(frozen=True, slots=True)
class RuleChange:
    """One rule's verdicts that differ between the applied and the proposed version."""

    rule: str
    flagged: tuple[str, ...] = ()  # decisions the new version would flag
    cleared: tuple[str, ...] = ()  # decisions it would clear
    errors_before: int = 0
    errors_after: int = 0


@dataclass(frozen=True, slots=True)
class GateReport:
    judged: int
    pinned: int
    changes: tuple[RuleChange, ...] = ()
    hidden: tuple[str, ...] = ()  # pinned decisions flagged before and by no rule after
    unreadable: tuple[str, ...] = field(default=())

    @property
    def more_errors(self) -> tuple[str, ...]:
        return tuple(c.rule for c in self.changes if c.errors_after > c.errors_before)

    @property
    def passed(self) -> bool:
        return not self.hidden and not self.more_errors

    def reasons(self) -> list[str]:
        out = [f"finding's pinned decision {d} would no longer be flagged" for d in self.hidden]
        out += [f"rule {r} errors on more decisions than before" for r in self.more_errors]
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "judged": self.judged,
            "pinned": self.pinned,
            "reasons": self.reasons(),
            "unreadable": list(self.unreadable),
            "rules": [
                {
                    "rule": c.rule,
                    "flagged": list(c.flagged),
                    "cleared": list(c.cleared),
                    "errors_before": c.errors_before,
                    "errors_after": c.errors_after,
                }
                for c in self.changes
            ],
        }


def _verdicts(book: PactBook, capture: Mapping[str, Any]) -> tuple[set[str], set[str]]:
    """(violated rules, erroring rules) of ``book`` on one capture; nothing when it binds another agent."""
    if not book.binds(str(capture.get("agentId") or "")):
        return set(), set()
    evaluation = evaluate_capture(book.rules, capture)
    return set(evaluation.violated), {r.rule for r in evaluation.errors}


def judge_change(
    old: PactBook,
    new: PactBook,
    captures: Sequence[Mapping[str, Any]],
    *,
    pinned: set[str],
    unreadable: Sequence[str] = (),
) -> GateReport:
    """Judge ``captures`` under both versions (module docstring); ``pinned``: the findings' decisions."""
    flagged: dict[str, list[str]] = {}
    cleared: dict[str, list[str]] = {}
    errors_before: dict[str, int] = {}
    errors_after: dict[str, int] = {}
    hidden: list[str] = []
    for capture in captures:
        did = str(capture.get("decisionId") or "")
        old_v, old_e = _verdicts(old, capture)
        new_v, new_e = _verdicts(new, capture)
        for rule in new_v - old_v:
            flagged.setdefault(rule, []).append(did)
        for rule in old_v - new_v:
            cleared.setdefault(rule, []).append(did)
        for rule in old_e:
            errors_before[rule] = errors_before.get(rule, 0) + 1
        for rule in new_e:
            errors_after[rule] = errors_after.get(rule, 0) + 1
        if did in pinned and old_v and not new_v:
            hidden.append(did)
    names = sorted(flagged.keys() | cleared.keys() | errors_before.keys() | errors_after.keys())
    changes = tuple(
        RuleChange(
            rule=name,
            flagged=tuple(flagged.get(name, ())),
            cleared=tuple(cleared.get(name, ())),
            errors_before=errors_before.get(name, 0),
            errors_after=errors_after.get(name, 0),
        )
        for name in names
        if flagged.get(name) or cleared.get(name) or errors_before.get(name, 0) != errors_after.get(name, 0)
    )
    return GateReport(
        judged=len(captures),
        pinned=len(pinned),
        changes=changes,
        hidden=tuple(hidden),
        unreadable=tuple(unreadable),
    )

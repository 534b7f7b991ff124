"""Evaluate pacts on one decision: which rules it violates, which could not be evaluated.

The API replay and regress use on replayed outputs as ingest uses it on captures::

    outcome = evaluate(pacts, decision_view(capture))
    outcome.violated      # ("refund_within_disputed_charge",)
    outcome.errors        # (RuleResult(rule=..., kind="error", detail="no such key: 'input'"),)

Never raises for the decision's sake: a rule that errors on one decision is an ``error`` result for
that rule and that decision, and every other rule still runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from producers.pacts.expression import Rule, RuleError, run_rule
from producers.pacts.view import decision_view

__all__ = ["Evaluation", "RuleResult", "evaluate", "evaluate_capture"]


@dataclass(frozen=True, slots=True)
class RuleResult:
    """One rule that did not simply hold on a decision: violated, or not evaluable (``detail`` says why)."""

    rule: str
    kind: Literal["violation", "error"]
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Evaluation:
    """The pacts' verdict on one decision (rules that held are not listed)."""

    results: tuple[RuleResult, ...] = ()
    evaluated: int = 0  # rules run

    @property
    def violations(self) -> tuple[RuleResult, ...]:
        return tuple(r for r in self.results if r.kind == "violation")

    @property
    def errors(self) -> tuple[RuleResult, ...]:
        return tuple(r for r in self.results if r.kind == "error")

    @property
    def violated(self) -> tuple[str, ...]:
        """Names of the violated rules, in pact-file order."""
        return tuple(r.rule for r in self.violations)

    @property
    def holds(self) -> bool:
        """Every rule ran and held."""
        return not self.results


def evaluate(pacts: Iterable[Rule], view: dict[str, Any]) -> Evaluation:
    """Run every pact on one ``decision`` view (:func:`~producers.pacts.view.decision_view`): a rule
    that returns ``false`` is a violation; one that errors or returns a non-bool is an error."""
    results: list[RuleResult] = []
    evaluated = 0
    for rule in pacts:
        evaluated += 1
        try:
            holds = run_rule(rule, view)
        except RuleError as exc:
            results.append(RuleResult(rule.name, "error", str(exc)))
            continue
        if not holds:
            results.append(RuleResult(rule.name, "violation", rule.description))
    return Evaluation(results=tuple(results), evaluated=evaluated)


def evaluate_capture(pacts: Iterable[Rule], capture: Mapping[str, Any]) -> Evaluation:
    """:func:`evaluate` on a capture's view; a capture whose view cannot be built errors every rule."""
    rules = list(pacts)
    if not rules:
        return Evaluation()
    try:
        view = decision_view(capture)
    except Exception as exc:  # a capture the view does not understand must not stop ingest
        detail = f"no decision view: {type(exc).__name__}: {exc}"
        return Evaluation(tuple(RuleResult(r.name, "error", detail) for r in rules), evaluated=len(rules))
    return evaluate(rules, view)

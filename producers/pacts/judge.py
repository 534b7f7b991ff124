"""An agent's runtime judging one finished decision by its pact's ``consequential_when`` rules.

The rules read the same ``decision`` view the pact rules read at ingest (:mod:`producers.pacts.view`),
built from the capture before the capture policy strips anything: every tool call with its input and
output, the request, the outcome. The first rule that is true decides: the decision is captured in
full, consequential, with :func:`reason` as the reason. A rule that errors on one decision (a key the
decision does not have, a non-bool) is reported and the next rule still runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from producers.pacts.expression import Rule, RuleError, run_rule
from producers.pacts.view import decision_view

__all__ = ["AppliedVersion", "Judgement", "apply_pact", "judge", "reason"]


@dataclass(frozen=True, slots=True)
class AppliedVersion:
    """The version a runtime judges by: its id, whether it binds this agent, and its
    ``consequential_when`` rules (none when it does not bind the agent)."""

    version: str
    binds: bool
    rules: tuple[Rule, ...] = ()


@dataclass(frozen=True, slots=True)
class Judgement:
    """Which rule matched (None: none did) and the rules that could not be evaluated, with why."""

    matched: str | None = None
    errors: tuple[tuple[str, str], ...] = ()


def judge(rules: Iterable[Rule], capture: Mapping[str, Any]) -> Judgement:
    """Run ``rules`` in order on ``capture`` (the runtime's JSON form) until one is true."""
    rules = tuple(rules)
    if not rules:
        return Judgement()
    try:
        view = decision_view(capture)
    except Exception as exc:  # a capture the view does not understand must not stop the recorder
        detail = f"no decision view: {type(exc).__name__}: {exc}"
        return Judgement(errors=tuple((rule.name, detail) for rule in rules))
    errors: list[tuple[str, str]] = []
    for rule in rules:
        try:
            if run_rule(rule, view):
                return Judgement(matched=rule.name, errors=tuple(errors))
        except RuleError as exc:
            errors.append((rule.name, str(exc)))
    return Judgement(errors=tuple(errors))


def reason(rule: str, version: str) -> str:
    """The consequential reason a matching rule gives: it names the rule and the version."""
    return f"pact consequential_when {rule} ({version})"


def apply_pact(
    capture: dict[str, Any], applied: AppliedVersion, *, owned: bool
) -> tuple[dict[str, Any], Judgement]:
    """``capture`` judged under ``applied`` (a version that binds the agent): it records the version
    (``pactVersion``), and when a rule matches a decision whose level the policy was to decide and that
    nobody flagged yet, it is captured in full, consequential with :func:`reason`. ``owned``: the
    capture may be changed in place; else a changed capture is a new top-level dict."""
    if not owned:
        capture = dict(capture)
    capture["pactVersion"] = applied.version
    consequential = capture.get("consequential")
    if capture.get("captureLevel") is not None:  # a level the runtime gave is kept
        return capture, Judgement()
    if isinstance(consequential, dict) and consequential.get("flagged") is True:
        return capture, Judgement()
    judgement = judge(applied.rules, capture)
    if judgement.matched is not None:
        capture["captureLevel"] = "full"
        capture["consequential"] = {"flagged": True, "reason": reason(judgement.matched, applied.version)}
    return capture, judgement

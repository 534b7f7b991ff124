"""CEL expressions over the ``decision`` view: compile once, check at load, run many times.

The CEL engine is ``common-expression-language`` (the ``cel`` module: Rust bindings, typed, ~40 µs
a rule on a demo decision, where the pure-Python ``cel-python`` took ~700 µs). Its errors are wrapped
here, so nothing above this module knows which library runs the rules.

A compiled program is not picklable, so a :class:`Rule` carries its source and each process compiles
it on first use (:func:`program`, cached): ingest's worker processes receive rules, not programs.

The engine is an optional dependency of the SDK (``agent-blackbox[pacts]``; the ``server`` extra has
it too): it is imported on first use, and without it every rule is refused (:class:`PactInvalid`
naming the extra), so an agent runtime without it still records, judged by no pact.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from producers.pacts.view import decision_view
from schemas.errors import BlackboxError

__all__ = ["PactInvalid", "Rule", "RuleError", "check_rule", "program", "run_rule"]


class PactInvalid(BlackboxError):
    """A pact file or a rule cannot be used; the message names the rule and what is wrong."""


class RuleError(BlackboxError):
    """A rule could not be evaluated on one decision (the message is the CEL error)."""


@dataclass(frozen=True, slots=True)
class Rule:
    """A named CEL expression over ``decision``; ``description`` says what it means in words."""

    name: str
    source: str
    description: str = ""


def _engine() -> Any:
    try:
        import cel
    except ImportError as exc:
        raise PactInvalid(
            "CEL rules need the CEL engine: pip install 'agent-blackbox[pacts]' "
            f"(common-expression-language; {exc})"
        ) from exc
    return cel


@lru_cache(maxsize=512)
def program(source: str) -> Any:
    """The compiled CEL program of ``source`` (cached per process); :class:`PactInvalid` if it does not
    parse, or when the CEL engine is not installed."""
    engine = _engine()
    try:
        return engine.compile(source)
    except Exception as exc:  # the library raises ValueError; any failure means "not a rule"
        raise PactInvalid(_one_line(exc)) from exc


# A view with every field present, for the load-time check below (names, not values, matter).
_PROBE_VIEW = decision_view(
    {
        "decisionId": "probe",
        "agentId": "probe",
        "capturedAt": "2000-01-01T00:00:00Z",
        "input": {"requestPayload": {}},
        "executionTrace": {"finalOutputText": ""},
    }
)


def check_rule(rule: Rule, *, what: str = "pact") -> None:
    """Refuse a rule that does not compile, or that names a variable or function CEL does not know
    (``decison.tool_calls`` would otherwise fail on every decision at ingest). Raises
    :class:`PactInvalid` naming the rule and carrying the CEL error."""
    if not rule.source.strip():
        raise PactInvalid(f"{what} {rule.name!r}: the rule is empty")
    _engine()
    try:
        compiled = program(rule.source)
    except PactInvalid as exc:
        raise PactInvalid(f"{what} {rule.name!r} does not compile: {exc}") from exc
    try:
        compiled.execute({"decision": _PROBE_VIEW})
    except RuntimeError as exc:  # undefined variable or function; data errors are the rule's business
        if "Undefined variable or function" in str(exc):
            raise PactInvalid(f"{what} {rule.name!r}: {_one_line(exc)}") from exc
    except Exception:  # a data error on an empty decision says nothing about the rule
        pass


def run_rule(rule: Rule, view: dict[str, Any]) -> bool:
    """The rule's value on one decision view; :class:`RuleError` when it errors or is not a bool."""
    try:
        value = program(rule.source).execute({"decision": view})
    except PactInvalid as exc:
        raise RuleError(f"does not compile: {exc}") from exc
    except Exception as exc:  # CEL raises KeyError, TypeError, ValueError, RuntimeError ...
        raise RuleError(_one_line(exc)) from exc
    if not isinstance(value, bool):
        raise RuleError(f"the rule returned {type(value).__name__} {value!r}, not a bool")
    return value


def _one_line(exc: BaseException) -> str:
    """The first line of a CEL error (a parse error goes on with the source and a caret under it)."""
    if isinstance(exc, KeyError) and exc.args:
        return f"no such key: {exc.args[0]!r}"
    lines = str(exc).strip().splitlines()
    return lines[0].strip() if lines else type(exc).__name__

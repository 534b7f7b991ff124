"""The pact file: named behavioural commitments, each a CEL rule that must hold on every decision.

``BLACKBOX_PACTS`` names it (default ``<data_dir>/pacts.toml``; no file there means no pacts); a
versioned pact set (:mod:`producers.pacts.signed`) is the same text, and its optional top-level
``agents = ["billing-*"]`` names the agents it binds (default every agent). ``[consequential_when.NAME]``
tables are rules the agent's runtime evaluates when a decision finishes (:mod:`producers.pacts.judge`):
one that is true captures the decision in full, consequential, with the rule's name as the reason::

    [pact.refund_within_disputed_charge]
    description = "A refund never exceeds the charge the customer disputed."
    rule = '''
    decision.tool_calls.filter(t, t.name == "issue_refund").all(t,
      t.input.amount <= decision.tool_calls.filter(l, l.name == "lookup_customer")[0].output.disputed_charge)
    '''

    [consequential_when.refund_over_500]
    description = "Every refund above 500 is kept in full."
    rule = 'decision.tool_calls.exists(t, t.name == "issue_refund" && t.input.amount > 500)'

A pact rule is true when the commitment holds; ``false`` is a violation. A ``consequential_when`` rule
is true when the decision must be kept in full. Every rule is compiled and checked
when the file is loaded, and the whole file is refused if one rule is wrong (:class:`PactInvalid`
naming the rule and the CEL error): a pact that silently never runs is worse than none.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from producers.pacts.expression import PactInvalid, Rule, check_rule

__all__ = ["NAME", "PactBook", "load_pacts", "parse_pacts"]

NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,100}$")
"""What a pact or finding name may be: it is a trend key, a flag reason and a command argument."""

_KEYS = frozenset({"rule", "description"})


@dataclass(frozen=True, slots=True)
class PactBook:
    """The loaded pacts, in file order; ``source`` is where they came from (for messages)."""

    rules: tuple[Rule, ...] = ()
    source: str = ""
    agents: tuple[str, ...] = ("*",)  # agent id globs the set binds (top-level ``agents``; default all)
    consequential_when: tuple[Rule, ...] = ()  # evaluated by the runtime, never at ingest

    def binds(self, agent_id: str) -> bool:
        """Whether this set judges ``agent_id`` (one of :attr:`agents` matches it, fnmatch-style)."""
        return any(fnmatchcase(agent_id, pattern) for pattern in self.agents)

    def __iter__(self) -> Iterator[Rule]:
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)

    def __bool__(self) -> bool:
        return bool(self.rules)


def load_pacts(path: Path, *, missing_ok: bool = True) -> PactBook:
    """The pact file at ``path``, every rule checked; an empty book when it is missing and
    ``missing_ok`` (the default location), :class:`PactInvalid` otherwise or when anything is wrong."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if missing_ok:
            return PactBook(source=str(path))
        raise PactInvalid(f"pact file {path} does not exist (BLACKBOX_PACTS)") from None
    except OSError as exc:
        raise PactInvalid(f"pact file {path} cannot be read: {exc}") from exc
    return parse_pacts(text, source=str(path))


def parse_pacts(text: str, *, source: str = "<pacts>") -> PactBook:
    """Parse and check the TOML text of a pact file (see the module docstring for the format)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PactInvalid(f"pact file {source} is not valid TOML: {exc}") from exc
    unknown = sorted(set(data) - {"pact", "agents", "consequential_when"})
    if unknown:
        raise PactInvalid(
            f"pact file {source}: unknown top-level key(s) {', '.join(unknown)}; use [pact.NAME], "
            "[consequential_when.NAME] and agents = [GLOB, ...]"
        )
    agents = data.get("agents", ["*"])
    if (
        not isinstance(agents, list)
        or not agents
        or not all(isinstance(a, str) and a.strip() for a in agents)
    ):
        raise PactInvalid(f"pact file {source}: agents must be a non-empty list of agent id globs")
    rules = _rules(data, "pact", source)
    upgrades = _rules(data, "consequential_when", source)
    return PactBook(
        rules=rules,
        source=source,
        agents=tuple(a.strip() for a in agents),
        consequential_when=upgrades,
    )


def _rules(data: Mapping[str, Any], table: str, source: str) -> tuple[Rule, ...]:
    tables = data.get(table, {})
    if not isinstance(tables, Mapping):
        raise PactInvalid(f"pact file {source}: {table!r} must be tables, [{table}.NAME] with a rule")
    rules = tuple(_rule(name, value, source, table) for name, value in tables.items())
    for rule in rules:
        check_rule(rule, what=table)
    return rules


def _rule(name: str, value: Any, source: str, table: str) -> Rule:
    where = f"pact file {source}: {table} {name!r}"
    if not NAME.match(name):
        raise PactInvalid(f"{where}: a name is 1-100 letters, digits, '_', '.', ':' or '-'")
    if not isinstance(value, Mapping):
        raise PactInvalid(f"{where} must be a table with a rule")
    unknown = sorted(set(value) - _KEYS)
    if unknown:
        raise PactInvalid(f"{where}: unknown key(s) {', '.join(unknown)} (allowed: rule, description)")
    rule, description = value.get("rule"), value.get("description", "")
    if not isinstance(rule, str):
        raise PactInvalid(f"{where} has no rule (a CEL expression string)")
    if not isinstance(description, str):
        raise PactInvalid(f"{where}: description must be a string")
    return Rule(name=name, source=rule.strip(), description=description.strip())

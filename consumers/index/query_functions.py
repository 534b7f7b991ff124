"""The functions ``blackbox query`` may call: the reviewed allow-list in ``query_functions.txt``.

A name is allowed when it is listed (case-insensitively), or is a listed aggregate function followed by
the engine's combinator suffixes (``countIf``, ``sumArray``, ``uniqStateIf``). Everything else is
refused by :mod:`consumers.index.confined`, so a function a newer engine adds stays refused until it is
reviewed and listed.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import resources

__all__ = ["AllowedFunctions", "allowed_functions"]

# What an aggregate function's name may end with (system.aggregate_function_combinators): ``countIf``,
# ``sumArray``, ``uniqStateIf`` are the listed aggregate with these suffixes.
_COMBINATORS = (
    "SimpleState",
    "OrDefault",
    "MergeState",
    "Distinct",
    "Resample",
    "ForEach",
    "ArgMax",
    "ArgMin",
    "OrNull",
    "Tuple",
    "Merge",
    "State",
    "Array",
    "Null",
    "Map",
    "If",
)


@dataclass(frozen=True, slots=True)
class AllowedFunctions:
    """The functions a query may call (``query_functions.txt``), lower-cased."""

    scalar: frozenset[str]
    aggregate: frozenset[str]

    def allows(self, name: str) -> bool:
        """``name`` is listed, or is a listed aggregate followed by combinator suffixes."""
        lowered = name.lower()
        if lowered in self.scalar or lowered in self.aggregate:
            return True
        stem = name
        while True:
            suffix = next((c for c in _COMBINATORS if stem.endswith(c) and len(stem) > len(c)), None)
            if suffix is None:
                return False
            stem = stem[: -len(suffix)]
            if stem.lower() in self.aggregate:
                return True


@cache
def allowed_functions() -> AllowedFunctions:
    """The packaged allow-list of functions (see ``query_functions.txt`` for what it holds and why)."""
    text = resources.files("consumers.index").joinpath("query_functions.txt").read_text(encoding="utf-8")
    scalar: set[str] = set()
    aggregate: set[str] = set()
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if words:
            (aggregate if words[1:] == ["aggregate"] else scalar).add(words[0].lower())
    return AllowedFunctions(scalar=frozenset(scalar), aggregate=frozenset(aggregate))

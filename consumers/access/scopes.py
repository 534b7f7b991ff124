"""Who is reading: the caller's identity, scope and reason, and what scopes a capture admits.

Three scopes exist (DESIGN decision 12): ``operator`` (the team running the agent, for its own
agents), ``regulator`` and ``counterparty``. A capture names the scopes that may replay it in
``replayPolicy.replayAccessScope``: one scope, or several joined by ``|`` or ``,``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from schemas.errors import ContractError

Scope = Literal["operator", "regulator", "counterparty"]
SCOPES: tuple[Scope, ...] = ("operator", "regulator", "counterparty")
DEFAULT_CAPTURE_SCOPE: Scope = "operator"


@dataclass(frozen=True, slots=True)
class Caller:
    """The identity recorded in the access log, its scope, and why it is reading.

    ``subjects`` ties a counterparty to the decisions that concern it: globs over a capture's
    ``input.originUserId`` (empty: its own identity). Operators and regulators ignore it.
    """

    identity: str
    scope: Scope
    reason: str = ""
    subjects: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.identity.strip():
            raise ContractError("caller identity is empty", path="caller")
        if self.scope not in SCOPES:
            raise ContractError(f"unknown scope {self.scope!r}; one of {', '.join(SCOPES)}", path="scope")

    def counterparty_subjects(self) -> tuple[str, ...]:
        """The ``originUserId`` globs a counterparty may see (its identity when none were issued)."""
        return self.subjects or (self.identity,)


def parse_scope(value: str) -> Scope:
    if value not in SCOPES:
        raise ContractError(f"unknown scope {value!r}; one of {', '.join(SCOPES)}", path="scope")
    return cast(Scope, value)


def capture_scopes(capture: Mapping[str, Any]) -> frozenset[str]:
    """The scopes ``capture`` admits (``operator`` when the capture names none)."""
    raw = (capture.get("replayPolicy") or {}).get("replayAccessScope") or DEFAULT_CAPTURE_SCOPE
    return frozenset(p for p in re.split(r"[\s|,]+", str(raw)) if p)

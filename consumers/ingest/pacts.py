"""Pact verdicts of a batch, applied: a violation flags its decision, every result becomes a row.

:func:`consumers.ingest.prepare.prepare` evaluates the pacts on each verified capture (where its
content is decoded). For the captures a batch accepts, :func:`apply_pacts`:

- makes a violating decision consequential at insert (retention class ``consequential``, reason
  ``pact violated: RULE``) unless a flag already did, the way an early ``flag_consequential`` does;
- returns a failure ``flags`` row per violating decision (so ``failed_any`` counts it) and the
  ``pact_violations`` rows (violations and evaluation errors), for the batch to insert before the
  decision rows.

An evaluation error never flags anything and never stops the batch: it is a row, a count and one
log line per rule and batch.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from consumers.index import CaptureRows
from consumers.pacts.evaluate import Evaluation
from consumers.pacts.store import flag_reason, pact_flag_row, violation_rows

__all__ = ["PactRows", "apply_pacts"]

logger = logging.getLogger(__name__)


class _Accepted(Protocol):
    """What this module needs of a batch item (``consumers.ingest.batch._Item``)."""

    rows: CaptureRows | None
    pacts: Evaluation | None
    flag_reason: str | None


@dataclass(slots=True)
class PactRows:
    """The rows a batch writes for its pact results, and how many of each kind."""

    flags: list[dict[str, Any]] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)
    violations: int = 0
    errors: int = 0


def apply_pacts(
    items: Sequence[_Accepted],
    *,
    now: datetime,
    version: str = "",
    binds: Callable[[str], bool] | None = None,
) -> PactRows:
    """Flag the violating items in place and collect the rows (module docstring); ``version`` is the
    pact version that judged them, ``binds`` which agents it judges (None: every agent)."""
    out = PactRows()
    first_error: dict[str, tuple[str, str]] = {}
    error_counts: dict[str, int] = {}
    for item in items:
        evaluation, rows = item.pacts, item.rows
        if evaluation is None or not evaluation.results or rows is None:
            continue
        decision = rows.decision
        if binds is not None and not binds(str(decision["agent_id"])):
            continue
        out.results.extend(
            violation_rows(decision, evaluation.results, evaluated_at=now, pact_version=version)
        )
        for error in evaluation.errors:
            out.errors += 1
            error_counts[error.rule] = error_counts.get(error.rule, 0) + 1
            first_error.setdefault(error.rule, (str(decision["decision_id"]), error.detail))
        violated = evaluation.violated
        if violated:
            out.violations += len(violated)
            out.flags.append(pact_flag_row(decision, violated, received_at=now))
            if item.flag_reason is None:
                item.flag_reason = flag_reason(violated)
    for rule, count in error_counts.items():
        did, detail = first_error[rule]
        logger.warning(
            "pact %s could not be evaluated on %d decision(s); first %s: %s", rule, count, did, detail
        )
    return out

"""``trends finding:NAME``: how often a finding's rule matches, per day (and ``--by`` group).

The rule runs at query time on every trusted decision captured in the window (each a gated read of
its stored capture, :mod:`consumers.findings.captures`), so a finding recorded today also shows the
weeks before it: its incidence before and after a change, split ``--by prompt_version`` for a prompt
change. Counting rules:

* ``decisions``: trusted decisions in the group; ``matched``: those the rule is true on;
* ``errors``: those it could not be evaluated on (content absent in a structured-only capture, a
  field missing, access denied, capture unreadable);
* ``incidence = matched / (decisions - errors)``, rounded to 4 places; NULL when nothing was evaluable.

Cost grows with the window (one range read per decision): narrow it with ``--since``/``--agent``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from consumers.access import AccessGate, Caller
from consumers.findings.captures import evaluate_stored
from consumers.findings.record import FindingError
from consumers.findings.store import get_finding, window_rows
from consumers.index import Index
from consumers.index.trends import DIMENSIONS
from consumers.privacy.ids import IndexIds
from producers.blobstore import BlobStore
from producers.pacts.expression import Rule

__all__ = ["FINDING_TREND_PREFIX", "finding_incidence"]

FINDING_TREND_PREFIX = "finding:"
ALLOWED_BY = tuple(d for d in DIMENSIONS if d != "day")


def finding_incidence(
    index: Index,
    name: str,
    *,
    since: datetime,
    until: datetime,
    agent: str | None = None,
    by: str | None = None,
    blobs: BlobStore,
    gate: AccessGate,
    caller: Caller,
    ids: IndexIds | None = None,
) -> list[dict[str, Any]]:
    """Rows ``day, [by], decisions, matched, errors, incidence`` in day (then ``by``) order."""
    if until <= since:
        raise FindingError("--until must be after --since")
    if by is not None and by not in ALLOWED_BY:
        raise FindingError(
            f"trend finding:{name} cannot be split by {by!r}; allowed: {', '.join(ALLOWED_BY)}"
        )
    finding = get_finding(index, name)
    if finding is None:
        raise FindingError(f"no finding {name!r} (see `blackbox finding list`)")
    rule = Rule(name=name, source=str(finding["rule"]))
    rows = window_rows(index, since=since, until=until, agent=agent, by=by)
    cells: dict[tuple[Any, ...], list[int]] = {}
    for outcome in evaluate_stored(rule, rows, blobs=blobs, gate=gate, caller=caller, ids=ids):
        cell = cells.setdefault(_key(outcome.row, by), [0, 0, 0])
        cell[0] += 1
        cell[1] += outcome.matched
        cell[2] += bool(outcome.error)
    out: list[dict[str, Any]] = []
    for key in sorted(cells, key=lambda k: tuple(str(v) for v in k)):
        decisions, matched, errors = cells[key]
        row: dict[str, Any] = {"day": key[0]}
        if by is not None:
            row[by] = key[1]
        evaluable = decisions - errors
        row.update(
            decisions=decisions,
            matched=matched,
            errors=errors,
            incidence=round(matched / evaluable, 4) if evaluable else None,
        )
        out.append(row)
    return out


def _key(row: Mapping[str, Any], by: str | None) -> tuple[Any, ...]:
    return (row["day"], row["by_value"]) if by is not None else (row["day"],)

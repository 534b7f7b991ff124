"""The access log's hash chain: each row commits to the one before it, so the log is tamper-evident.

``row_hash = sha256(prev_hash ‖ "\\n" ‖ RFC 8785 JSON of {seq, at, caller, scope, decision_id, agent_id,
action, reason, outcome, detail, grant_id, authority, purpose})`` in lower-case hex, ``at`` as RFC 3339
UTC with milliseconds (what the table stores). The first row's ``prev_hash`` is empty. ``seq`` counts
from 1 without gaps, so a removed row, a row changed in place, an inserted row and a reordering each
break the chain at a row :func:`verify_chain` names.

What a chain cannot show on its own: whoever can rewrite the whole table can recompute every hash
after the row they changed. Keep a copy of a recent head (``blackbox access log verify`` prints it)
outside the index to close that gap.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from producers.evidence.canonical import canonical_json
from producers.evidence.trust import parse_time

GENESIS = ""
CHAINED_FIELDS = (
    "at",
    "caller",
    "scope",
    "decision_id",
    "agent_id",
    "action",
    "reason",
    "outcome",
    "detail",
    "grant_id",
    "authority",
    "purpose",
)


def log_time(at: datetime) -> datetime:
    """``at`` in UTC, cut to the milliseconds the table keeps (so the hash survives the round trip)."""
    moment = at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def _time_text(value: Any) -> str:
    moment = log_time(parse_time(value))
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def chain_hash(prev: str, seq: int, row: Mapping[str, Any]) -> str:
    """The hash of one row, chained after ``prev``."""
    body: dict[str, Any] = {"seq": seq}
    for name in CHAINED_FIELDS:
        value = row.get(name)
        body[name] = _time_text(value) if name == "at" else ("" if value is None else str(value))
    return hashlib.sha256(prev.encode("ascii") + b"\n" + canonical_json(body)).hexdigest()


@dataclass(frozen=True, slots=True)
class ChainReport:
    """What walking the chain found: ``broken_at`` is None when every chained row holds."""

    rows: int
    chained: int
    unchained: int  # rows written before the chain existed (no row_hash), all before the first chained row
    head_seq: int
    head_hash: str
    broken_at: int | None = None
    problem: str = ""

    @property
    def intact(self) -> bool:
        return self.broken_at is None


def verify_chain(rows: Iterable[Mapping[str, Any]]) -> ChainReport:
    """Walk ``rows`` (any order) by ``seq``; the first row that does not hold names the break."""
    every = list(rows)
    legacy = [r for r in every if not r.get("row_hash")]
    chained = sorted((r for r in every if r.get("row_hash")), key=lambda r: int(r["seq"]))
    prev, seq = GENESIS, 0

    def report(broken: int | None = None, problem: str = "") -> ChainReport:
        return ChainReport(
            rows=len(every),
            chained=len(chained),
            unchained=len(legacy),
            head_seq=seq,
            head_hash=prev,
            broken_at=broken,
            problem=problem,
        )

    if chained and legacy:
        first = parse_time(chained[0]["at"])
        late = [r for r in legacy if parse_time(r["at"]) >= first]
        if late:
            return report(
                int(chained[0]["seq"]),
                f"{len(late)} row(s) without a hash were written after chaining began "
                f"(first at {_time_text(late[0]['at'])}, caller {late[0].get('caller')!r})",
            )
    for row in chained:
        number = int(row["seq"])
        if number != seq + 1:
            what = "appears twice (a forked chain)" if number == seq else f"follows {seq} (rows missing)"
            return report(number, f"row seq {number} {what}")
        if str(row.get("prev_hash") or "") != prev:
            return report(number, f"row seq {number} does not point at the row before it (prev_hash)")
        expected = chain_hash(prev, number, row)
        if str(row["row_hash"]) != expected:
            return report(number, f"row seq {number} was changed after it was written (row_hash)")
        prev, seq = expected, number
    return report()

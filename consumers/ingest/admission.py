"""What a verified capture must also satisfy before it is indexed as evidence.

A capture can carry a valid signature and still be unindexable: its ``capturedAt`` lies in year
9999, or a count the index stores unsigned is negative. Such a capture is *quarantined* (kept,
flagged, queryable) with a reason naming what is out of range, so one odd capture never fails the
insert of the whole batch it arrived in (an insert that fails is retried forever, since it looks
like a busy index). The reasons are deterministic text: a redelivered capture gets the same one and
is deduplicated in ``quarantine``.

- ``capturedAt`` must lie between :data:`EARLIEST_CAPTURED_AT` (the Unix epoch, where the index's
  ``DateTime`` TTL arithmetic begins; no agent decision is older) and ingest time plus
  :data:`CLOCK_SKEW`. Windows of retention count from ``capturedAt``, so a far-future one would keep
  the evidence beyond any policy; a producer clock a few hours fast is tolerated.
- every integer of the capture's rows must fit its index column (:func:`integer_ranges` reads the
  column types from the index once).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from consumers.index import CaptureRows, Index
from consumers.index.engine import base_type

__all__ = [
    "CLOCK_SKEW",
    "EARLIEST_CAPTURED_AT",
    "ROW_TABLES",
    "IntegerRanges",
    "captured_at_problem",
    "integer_ranges",
    "unexpected_reason",
    "value_problem",
]

CLOCK_SKEW = timedelta(hours=24)
EARLIEST_CAPTURED_AT = datetime(1970, 1, 1, tzinfo=UTC)
ROW_TABLES = ("decisions", "tool_calls", "memory_entries")

IntegerRanges = Mapping[str, Mapping[str, tuple[str, int, int]]]
"""Per table, per integer column: (ClickHouse type, lowest, highest value it holds)."""

_INT_TYPE = re.compile(r"^(U?)Int(8|16|32|64|128|256)$")


def captured_at_problem(captured_at: datetime, now: datetime, *, skew: timedelta = CLOCK_SKEW) -> str | None:
    """The quarantine reason when ``captured_at`` is implausible at ingest time ``now``, else None."""
    if captured_at < EARLIEST_CAPTURED_AT:
        return f"capturedAt before {EARLIEST_CAPTURED_AT.date().isoformat()}"
    if captured_at - now > skew:
        hours = skew.total_seconds() / 3600
        return f"capturedAt in the future beyond clock skew ({hours:g}h)"
    return None


def integer_ranges(index: Index) -> dict[str, dict[str, tuple[str, int, int]]]:
    """The integer columns of the capture tables of ``index`` and the values each can hold."""
    out: dict[str, dict[str, tuple[str, int, int]]] = {}
    for table in ROW_TABLES:
        columns: dict[str, tuple[str, int, int]] = {}
        for name, ch_type in index.column_types(table).items():
            match = _INT_TYPE.match(base_type(ch_type)[0])
            if match is None:
                continue
            bits = int(match.group(2))
            if match.group(1):
                columns[name] = (ch_type, 0, 2**bits - 1)
            else:
                columns[name] = (ch_type, -(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
        out[table] = columns
    return out


def value_problem(rows: CaptureRows, ranges: IntegerRanges) -> tuple[str, str] | None:
    """``(reason, part)`` for the first row value its index column cannot hold, else None."""
    tables: tuple[tuple[str, tuple[dict[str, Any], ...]], ...] = (
        ("decisions", (rows.decision,)),
        ("tool_calls", rows.tool_calls),
        ("memory_entries", rows.memory_entries),
    )
    for table, table_rows in tables:
        columns = ranges.get(table, {})
        for row in table_rows:
            for name, (ch_type, low, high) in columns.items():
                value = row.get(name)
                if isinstance(value, int) and not low <= value <= high:
                    return f"value out of range: {table}.{name}={value} does not fit {ch_type}", name
    return None


def unexpected_reason(exc: BaseException) -> str:
    """The quarantine/dead-letter reason for an error no rule anticipated (kept short and stable)."""
    text = " ".join(str(exc).split())[:300]
    return (
        f"unexpected error: {type(exc).__name__}: {text}"
        if text
        else f"unexpected error: {type(exc).__name__}"
    )

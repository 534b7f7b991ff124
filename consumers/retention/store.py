"""The index side of retention: the SQL that reads candidates and writes new row versions.

Everything runs on both engines (chdb and a ClickHouse server): plain SELECTs with ``{name:Type}``
parameters and ``INSERT INTO decisions SELECT * REPLACE (...)`` statements that copy the current row
version inside the engine, so no row (and no ``manifest_json``) travels through Python on the write
path. Per-row values go in as JSON arrays through ``transform(decision_id, ids, values, column)``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from consumers.retention.clock import as_utc
from consumers.retention.plan import Candidate, QuarantineRow
from producers.claimcheck import claim_key
from schemas.errors import IndexError_

if TYPE_CHECKING:
    from consumers.index import Index
    from consumers.retention.policy import RetentionPolicy

__all__ = [
    "CANDIDATE_COLUMNS",
    "DELETIONS_TABLE",
    "clear_quarantine_content",
    "decision_agent",
    "delete_child_rows",
    "held_decisions",
    "held_in_segment",
    "hold_state",
    "holds",
    "insert_deletions",
    "live_claims",
    "load_candidates",
    "logged_entries",
    "pending_segment_deletes",
    "quarantine_with_content",
    "referenced_segments",
    "unconfirmed_orphans",
    "write_versions",
]

CHUNK = 10_000
"""Ids per statement (the parameter arrays stay well below the server's query size limits)."""
DELETIONS_TABLE = "deletions"

CANDIDATE_COLUMNS = (
    "decision_id",
    "agent_id",
    "captured_at",
    "capture_level",
    "content_state",
    "consequential",
    "consequential_reason",
    "legal_hold",
    "hold_reason",
    "trust",
    "retention_class",
    "segment_key",
    "segment_offset",
    "segment_length",
    "content_sha256",
)
_FROZEN_COLUMNS = frozenset({"decision_id", "agent_id", "captured_at", "version"})

_CANDIDATES_SQL = """
SELECT {columns},
       d.manifest_json != '' AS has_manifest,
       JSONExtract(d.manifest_json, 'consequential', 'flagged', 'Nullable(Bool)') AS manifest_flagged,
       JSONExtract(d.manifest_json, 'replayPolicy', 'retentionDays', 'Nullable(Int64)') AS capture_retention_days,
       f.first_flag_at AS first_flag_at,
       f.flag_reason AS flag_reason
FROM (
    SELECT * FROM decisions FINAL
    WHERE content_state != 'expired'
      AND (
        (segment_key != '' AND segment_key IN (
            SELECT segment_key FROM decisions FINAL
            WHERE content_state != 'expired' AND segment_key != ''
              AND (captured_at <= {cutoff:DateTime64(3, 'UTC')} OR expires_at <= {as_of:DateTime64(3, 'UTC')})
        ))
        OR (segment_key = ''
            AND (captured_at <= {record_cutoff:DateTime64(3, 'UTC')} OR expires_at <= {as_of:DateTime64(3, 'UTC')}))
      )
) AS d
LEFT JOIN (
    SELECT decision_id, min(flagged_at) AS first_flag_at, argMin(reason, flagged_at) AS flag_reason
    FROM flags GROUP BY decision_id
) AS f ON f.decision_id = d.decision_id
SETTINGS join_use_nulls = 1
"""


def load_candidates(index: Index, *, as_of: datetime, policy: RetentionPolicy) -> list[Candidate]:
    """Every live decision that could be due at ``as_of``: all decisions of every segment holding one
    that could be due (a segment is planned with all its members), and the content-less records that
    could expire.

    A decision with content could be due once it is older than the shortest content window of any
    rule; a record without content once it is older than the shortest retention of any rule. Either
    is also due when the expiry the index holds has passed: a capture whose own ``retentionDays`` is
    shorter than every rule is found through the ``expires_at`` ingest wrote from the same policy.
    Rows under legal hold are included: the plan reports them as held and copies them out of due
    segments.
    """
    params: dict[str, Any] = {
        "cutoff": as_of - timedelta(days=policy.shortest_window_days),
        "record_cutoff": as_of - timedelta(days=policy.shortest_retention_days),
        "as_of": as_of,
    }
    columns = ", ".join(f"d.{c} AS {c}" for c in CANDIDATE_COLUMNS)
    rows = index.query(_CANDIDATES_SQL.replace("{columns}", columns), params)
    return [Candidate.from_row(r) for r in rows]


def pending_segment_deletes(index: Index) -> list[str]:
    """Blobs whose deletion was logged (``delete-segment`` / ``delete-claim``) but never confirmed
    (``segment-deleted`` / ``claim-deleted``): a crashed run's leftovers."""
    rows = index.query(
        "SELECT segment_key FROM deletions "
        "WHERE action IN ('delete-segment', 'segment-deleted', 'delete-claim', 'claim-deleted') "
        "GROUP BY segment_key HAVING countIf(action IN ('segment-deleted', 'claim-deleted')) = 0"
    )
    return sorted(str(r["segment_key"]) for r in rows)


def logged_entries(
    index: Index, segment_keys: Iterable[str], *, decision_ids: Sequence[str] | None = None
) -> set[tuple[str, str, str]]:
    """``(segment_key, decision_id, action)`` already in ``deletions`` for these segments (and, when
    given, only for these decisions)."""
    keys = sorted(set(segment_keys))
    found: set[tuple[str, str, str]] = set()
    sql = "SELECT DISTINCT segment_key, decision_id, action FROM deletions WHERE segment_key IN {keys:Array(String)}"
    chunks: list[dict[str, Any]]
    if decision_ids is None:
        chunks = [{"keys": keys[i : i + CHUNK]} for i in range(0, len(keys), CHUNK)]
    else:
        sql += " AND decision_id IN {ids:Array(String)}"
        ids = list(dict.fromkeys(decision_ids))
        chunks = [{"keys": keys, "ids": ids[i : i + CHUNK]} for i in range(0, len(ids), CHUNK)]
    for params in chunks:
        for r in index.query(sql, params):
            found.add((str(r["segment_key"]), str(r["decision_id"]), str(r["action"])))
    return found


def write_versions(
    index: Index,
    changes: Sequence[tuple[str, Mapping[str, Any]]],
    *,
    version: int,
    captured_between: tuple[datetime, datetime] | None = None,
) -> None:
    """A new version of each listed decision: its current row with the given columns changed.

    ``changes`` is ``[(decision_id, {column: value})]``; every entry must change the same columns.
    A decision whose current version is already >= ``version`` is left alone (never rolls back).
    ``captured_between`` (the min and max ``captured_at`` of the decisions) lets the engine skip
    partitions and granules instead of scanning the whole table for the ids.

    A column with one value for every decision is a scalar parameter; per-decision values go in as one
    JSON array parameter read by ``transform(decision_id, ids, values, column)`` (formatting thousands
    of array elements as bound parameters costs far more than the statement itself).
    """
    if not changes:
        return
    columns = list(changes[0][1])
    if not columns:
        raise IndexError_("write_versions needs at least one column to change")
    types = index.column_types("decisions")
    for name in columns:
        if name not in types or name in _FROZEN_COLUMNS:
            raise IndexError_(f"decisions: column {name!r} cannot be changed by retention")
    for _, change in changes:
        if list(change) != columns:
            raise IndexError_("write_versions: every decision must change the same columns")
    for start in range(0, len(changes), CHUNK):
        chunk = changes[start : start + CHUNK]
        params: dict[str, Any] = {
            "ids": json.dumps([decision_id for decision_id, _ in chunk]),
            "version": version,
        }
        replace: list[str] = []
        for i, name in enumerate(columns):
            base = _base_type(types[name])
            values = [change[name] for _, change in chunk]
            if all(v == values[0] for v in values):
                replace.append(f"{{v{i}:{base}}} AS {name}")
                params[f"v{i}"] = values[0]
            else:
                replace.append(
                    f"transform(decision_id, _ids, {_json_array(f'v{i}', base)}, {name}) AS {name}"
                )
                params[f"v{i}"] = json.dumps([_json_value(v, base) for v in values])
        replace.append("{version:UInt64} AS version")
        window = ""
        if captured_between is not None:
            window = (
                " AND captured_at >= {lo:DateTime64(3, 'UTC')} AND captured_at <= {hi:DateTime64(3, 'UTC')}"
            )
            params["lo"], params["hi"] = captured_between
        # the filter sits in a subquery: a REPLACE alias would shadow the column in an outer WHERE
        sql = (
            f"INSERT INTO decisions SELECT * EXCEPT _ids REPLACE ({', '.join(replace)}) FROM "
            "(SELECT *, JSONExtract({ids:String}, 'Array(String)') AS _ids FROM decisions FINAL "
            f"WHERE has(JSONExtract({{ids:String}}, 'Array(String)'), decision_id){window} "
            "AND version < {version:UInt64})"
        )
        index.command(sql, params)


def _json_array(param: str, base: str) -> str:
    if base.startswith("DateTime64"):
        return f"arrayMap(x -> fromUnixTimestamp64Milli(x, 'UTC'), JSONExtract({{{param}:String}}, 'Array(Int64)'))"
    return f"JSONExtract({{{param}:String}}, 'Array({base})')"


def _json_value(value: Any, base: str) -> Any:
    if base.startswith("DateTime64"):
        return int(as_utc(value).timestamp() * 1000)
    return value


def delete_child_rows(index: Index, decision_ids: Sequence[str]) -> None:
    """Remove the ``tool_calls`` and ``memory_entries`` rows of expired decisions (their hashes and
    names go with the record; the ``decisions`` row stays as an ``expired`` tombstone)."""
    ids = list(dict.fromkeys(decision_ids))
    for start in range(0, len(ids), CHUNK):
        chunk = {"ids": ids[start : start + CHUNK]}
        for table in ("tool_calls", "memory_entries"):
            index.command(f"DELETE FROM {table} WHERE decision_id IN {{ids:Array(String)}}", chunk)


def _base_type(ch_type: str) -> str:
    t = ch_type.strip()
    for wrapper in ("LowCardinality(", "Nullable(", "LowCardinality("):
        if t.startswith(wrapper) and t.endswith(")"):
            t = t[len(wrapper) : -1].strip()
    return t


# --- the sweep ---------------------------------------------------------------------------------------------
def referenced_segments(index: Index) -> set[str]:
    """Every segment key any row names, in ``decisions`` or ``quarantine``, in *any* row version: a
    segment an older version still points at is never taken for an orphan (compaction deletes those)."""
    rows = index.query(
        "SELECT DISTINCT segment_key FROM decisions WHERE segment_key != '' "
        "UNION DISTINCT SELECT DISTINCT segment_key FROM quarantine WHERE segment_key != ''"
    )
    return {str(r["segment_key"]) for r in rows}


def unconfirmed_orphans(index: Index) -> list[tuple[str, str]]:
    """``(key, action)`` of orphans whose deletion was logged (``orphan-segment`` / ``orphan-claim``) but
    never confirmed (``orphan-deleted``): a crashed sweep's, to confirm if the blob is gone."""
    rows = index.query(
        "SELECT segment_key, anyIf(action, action != 'orphan-deleted') AS kind FROM deletions "
        "WHERE action IN ('orphan-segment', 'orphan-claim', 'orphan-deleted') "
        "GROUP BY segment_key HAVING countIf(action = 'orphan-deleted') = 0"
    )
    return sorted((str(r["segment_key"]), str(r["kind"])) for r in rows)


def quarantine_with_content(index: Index) -> list[QuarantineRow]:
    """The current quarantine rows whose bytes are still stored."""
    rows = index.query(
        "SELECT decision_id, agent_id, reason, segment_key, content_sha256, received_at "
        "FROM quarantine FINAL WHERE segment_key != ''"
    )
    return [
        QuarantineRow(
            decision_id=str(r["decision_id"]),
            agent_id=str(r["agent_id"]),
            reason=str(r["reason"]),
            segment_key=str(r["segment_key"]),
            content_sha256=str(r["content_sha256"]),
            received_at=as_utc(r["received_at"]),
        )
        for r in rows
    ]


def held_decisions(index: Index) -> list[tuple[str, str]]:
    """``(agent_id, decision_id)`` of every decision under legal hold."""
    rows = index.query("SELECT agent_id, decision_id FROM decisions FINAL WHERE legal_hold")
    return [(str(r["agent_id"]), str(r["decision_id"])) for r in rows]


def live_claims(index: Index, claim_keys: Iterable[str]) -> set[str]:
    """The claim-check keys among ``claim_keys`` whose decision still has its content stored.

    Looked up by the sha256 each key ends with (the capture's ``content_sha256``), then matched on the
    whole key, so a decision with other bytes under the same id never keeps a claim alive.
    """
    keys = set(claim_keys)
    shas = sorted({"sha256:" + k.rsplit("/", 1)[-1].removesuffix(".avro") for k in keys})
    live: set[str] = set()
    for start in range(0, len(shas), CHUNK):
        rows = index.query(
            "SELECT agent_id, decision_id, content_sha256 FROM decisions FINAL "
            "WHERE segment_key != '' AND content_sha256 IN {shas:Array(String)}",
            {"shas": shas[start : start + CHUNK]},
        )
        for r in rows:
            key = claim_key(
                agent_id=str(r["agent_id"]),
                decision_id=str(r["decision_id"]),
                sha256_hex=str(r["content_sha256"]).removeprefix("sha256:"),
            )
            if key in keys:
                live.add(key)
    return live


def clear_quarantine_content(index: Index, segment_keys: Sequence[str]) -> None:
    """A new version of every quarantine row in these segments with its location cleared: the row (who,
    why, which hash, from where) stays as the record that the quarantine happened; the bytes go.

    ``quarantine`` is a ReplacingMergeTree without a version column: the last inserted row of a key wins,
    and readers use FINAL. A rerun finds no row pointing at the segments and inserts nothing.
    """
    keys = sorted(set(segment_keys))
    for start in range(0, len(keys), CHUNK):
        # the filter sits in a subquery: a REPLACE alias would shadow the column in an outer WHERE
        index.command(
            "INSERT INTO quarantine SELECT * REPLACE ('' AS segment_key, toUInt64(0) AS segment_offset, "
            "toUInt64(0) AS segment_length) FROM "
            "(SELECT * FROM quarantine FINAL WHERE segment_key IN {keys:Array(String)})",
            {"keys": keys[start : start + CHUNK]},
        )


# --- the retention log's table ------------------------------------------------------------------------------
class DeletionRecord(Protocol):
    """What :func:`insert_deletions` reads of a retention log entry (the log's ``DeletionEntry``), named
    here so the store does not import the log that calls it."""

    @property
    def at(self) -> datetime: ...
    @property
    def decision_id(self) -> str: ...
    @property
    def segment_key(self) -> str: ...
    @property
    def action(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def target(self) -> str: ...
    @property
    def policy(self) -> str: ...


def insert_deletions(index: Index, entries: Sequence[DeletionRecord]) -> None:
    """The ``deletions`` rows of retention log entries, one insert (a copy's ``target`` goes into the
    reason, the table has no column of its own for it)."""
    columns: dict[str, list[Any]] = {
        name: [] for name in ("at", "decision_id", "segment_key", "action", "reason", "policy")
    }
    for e in entries:
        columns["at"].append(as_utc(e.at))
        columns["decision_id"].append(e.decision_id)
        columns["segment_key"].append(e.segment_key)
        columns["action"].append(e.action)
        columns["reason"].append(e.reason if not e.target else f"{e.reason} -> {e.target}")
        columns["policy"].append(e.policy)
    index.insert(DELETIONS_TABLE, columns)


# --- legal hold and flags --------------------------------------------------------------------------------
def hold_state(index: Index, decision_id: str) -> dict[str, Any] | None:
    """``decision_id, agent_id, legal_hold, hold_reason, content_state, segment_key`` of the decision's
    current version, or None when the index has no such decision."""
    rows = index.query(
        "SELECT decision_id, agent_id, legal_hold, hold_reason, content_state, segment_key FROM decisions FINAL "
        "WHERE decision_id = {id:String} LIMIT 1",
        {"id": decision_id},
    )
    return rows[0] if rows else None


def held_in_segment(index: Index, segment_key: str) -> int:
    """How many decisions stored in ``segment_key`` are under legal hold now."""
    rows = index.query(
        "SELECT count() AS n FROM decisions FINAL WHERE segment_key = {key:String} AND legal_hold",
        {"key": segment_key},
    )
    return int(rows[0]["n"]) if rows else 0


def holds(index: Index) -> list[dict[str, Any]]:
    """Every decision under legal hold: ``decision_id, agent_id, hold_reason, content_state,
    captured_at``, oldest first."""
    return index.query(
        "SELECT decision_id, agent_id, hold_reason, content_state, captured_at FROM decisions FINAL "
        "WHERE legal_hold ORDER BY captured_at, decision_id"
    )


def decision_agent(index: Index, decision_id: str) -> str | None:
    """The agent id of an indexed decision, or None when the index has no such decision."""
    rows = index.query(
        "SELECT agent_id FROM decisions FINAL WHERE decision_id = {id:String} LIMIT 1", {"id": decision_id}
    )
    return str(rows[0]["agent_id"]) if rows else None

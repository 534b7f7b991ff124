"""The catalog of named trend queries. Same SQL on both engines, deterministic output.

Every trend takes the same parameters: ``since`` (inclusive) and ``until`` (exclusive) on
``captured_at``, an optional ``agent``, and an optional ``by`` dimension from the trend's allowed list,
which adds one grouping column (placed after the trend's own leading columns).

Counting rules, shared by all trends:

* only trusted decisions count (``trust = 'verified'``); quarantined captures never enter a trend;
* the current version of each decision is used (``decisions_current``: ``decisions FINAL``), so
  results are right before background merges and re-inserted batches count once;
* ``tool_errors`` excludes the calls of untrusted decisions with ``NOT IN`` over the (small) set of
  untrusted ids rather than ``IN`` over every trusted id (measured: 75 ms vs 255 ms at 1M decisions /
  2M calls). This relies on the ingest invariant that child rows are only written together with their
  decision row (:func:`consumers.ingest.store.insert_captures` writes children first, the decision
  last, and a redelivery completes an interrupted batch);
* a decision **failed** if its own outcome says failure OR any failure flag names it, whenever that
  flag arrived (``failed_any`` in the view: a join at query time rather than a column rewritten when
  flags come, so arrival order never matters and nothing needs read-modify-write);
* ``pact_violations`` counts (decision, rule) rows of ``pact_violations`` (written at ingest) over the
  trusted decisions of the same day (and ``by`` group): ``incidence = violations / decisions``;
  evaluation errors are counted beside, never as violations;
* rates are ``round(x / n, 4)``; latency percentiles are exact (``quantileExact``: the value at index
  ``floor(q * n)`` of the sorted values; NULL when a group has no measured latency), so both engines
  return the same numbers;
* every query ends with an ORDER BY over all its grouping columns.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from consumers.index.engine import Index
from schemas.errors import IndexError_

__all__ = ["DIMENSIONS", "TRENDS", "Trend", "get_trend", "run_trend", "trend_sql"]

# by-dimension name -> SQL expression over decisions (tool_calls has only agent_id / day)
DIMENSIONS: Mapping[str, str] = {
    "day": "toDate(captured_at)",
    "agent_id": "agent_id",
    "runtime_id": "runtime_id",
    "prompt_version": "prompt_version",
    "tool_schema_version": "tool_schema_version",
    "model_id": "model_id",
    "model_version": "model_version",
    "capture_level": "capture_level",
    "fidelity": "fidelity",
    "content_state": "content_state",
    "retention_class": "retention_class",
    "stop_reason": "stop_reason",
    "outcome_status": "outcome_status",
    "consequential": "consequential",
}
_DECISION_DIMS = tuple(DIMENSIONS)

_RANGE = (
    "captured_at >= {since:DateTime64(3, 'UTC')} AND captured_at < {until:DateTime64(3, 'UTC')} "
    "AND ({agent:String} = '' OR agent_id = {agent:String})"
)
_TRUSTED = f"trust = 'verified' AND {_RANGE}"

# Buckets: ranks are computed per row (cheap integer multiIf), labels only per group.
_BYTES_RANK = (
    "multiIf(working_set_bytes IS NULL, 6, working_set_bytes < 1024, 0, working_set_bytes < 4096, 1, "
    "working_set_bytes < 16384, 2, working_set_bytes < 65536, 3, working_set_bytes < 262144, 4, 5)"
)
_BYTES_LABELS = "['<1KiB', '1-4KiB', '4-16KiB', '16-64KiB', '64-256KiB', '>=256KiB', 'unknown']"
_ENTRIES_RANK = (
    "multiIf(working_set_entries = 0, 0, working_set_entries <= 2, 1, working_set_entries <= 5, 2, "
    "working_set_entries <= 10, 3, working_set_entries <= 20, 4, 5)"
)
_ENTRIES_LABELS = "['0', '1-2', '3-5', '6-10', '11-20', '>20']"

# Templates: {by_select} is ", <expr> AS <by>" or ""; {by_group} is ", <by>" or ""; {by_partition} is
# "PARTITION BY <by>" or ""; {by_first} is "<by>, " or "".
_SQL: dict[str, str] = {
    "failure_rate": f"""
SELECT toDate(captured_at) AS day, prompt_version, model_version{{by_select}},
       count() AS decisions, countIf(failed_any) AS failures, round(failures / decisions, 4) AS failure_rate
FROM decisions_current
WHERE {_TRUSTED}
GROUP BY day, prompt_version, model_version{{by_group}}
ORDER BY day, prompt_version, model_version{{by_group}}""",
    "latency": f"""
SELECT day{{by_group}}, decisions, measured,
       if(measured = 0, NULL, q[1]) AS p50_ms, if(measured = 0, NULL, q[2]) AS p90_ms,
       if(measured = 0, NULL, q[3]) AS p99_ms
FROM (
    SELECT toDate(captured_at) AS day{{by_select}}, count() AS decisions,
           count(total_latency_ms) AS measured, quantilesExact(0.5, 0.9, 0.99)(total_latency_ms) AS q
    FROM decisions_current
    WHERE {_TRUSTED}
    GROUP BY day{{by_group}}
)
ORDER BY day{{by_group}}""",
    "tool_errors": f"""
SELECT tool_name{{by_select}}, count() AS calls, countIf(is_error) AS errors,
       round(errors / calls, 4) AS error_rate
FROM tool_calls FINAL
WHERE {_RANGE}
  AND decision_id NOT IN (SELECT decision_id FROM decisions FINAL WHERE trust != 'verified' AND {_RANGE})
GROUP BY tool_name{{by_group}}
ORDER BY tool_name{{by_group}}""",
    "working_set_vs_failure": f"""
SELECT {_BYTES_LABELS}[bytes_rank + 1] AS bytes_bucket, {_ENTRIES_LABELS}[entries_rank + 1] AS entries_bucket{{by_group}},
       decisions, failures, round(failures / decisions, 4) AS failure_rate
FROM (
    SELECT {_BYTES_RANK} AS bytes_rank, {_ENTRIES_RANK} AS entries_rank{{by_select}},
           count() AS decisions, countIf(failed_any) AS failures
    FROM decisions_current
    WHERE {_TRUSTED}
    GROUP BY bytes_rank, entries_rank{{by_group}}
)
ORDER BY bytes_rank, entries_rank{{by_group}}""",
    "stop_reasons": f"""
SELECT {{by_first}}stop_reason, count() AS decisions, countIf(failed_any) AS failures,
       round(decisions / sum(count()) OVER ({{by_partition}}), 4) AS share
FROM decisions_current
WHERE {_TRUSTED}
GROUP BY {{by_first}}stop_reason
ORDER BY {{by_first}}decisions DESC, stop_reason""",
    "volume": f"""
SELECT toDate(captured_at) AS day, capture_level, retention_class, content_state{{by_select}},
       count() AS captures, sum(capture_bytes) AS total_bytes
FROM decisions_current
WHERE {_TRUSTED}
GROUP BY day, capture_level, retention_class, content_state{{by_group}}
ORDER BY day, capture_level, retention_class, content_state{{by_group}}""",
    # decisions: every trusted decision of the day (window over the group), joined to its pact rows.
    "pact_violations": f"""
SELECT day, rule{{by_group}}, decisions, violations, errors, round(violations / decisions, 4) AS incidence
FROM (
    SELECT day{{by_group}}, rule, any(total) AS decisions,
           countIf(kind = 'violation') AS violations, countIf(kind = 'error') AS errors
    FROM (
        SELECT toDate(captured_at) AS day{{by_select}}, decision_id,
               count() OVER (PARTITION BY day{{by_group}}) AS total
        FROM decisions_current
        WHERE {_TRUSTED}
    ) AS d
    INNER JOIN (SELECT decision_id, rule, kind FROM pact_violations FINAL WHERE {_RANGE}) AS v USING (decision_id)
    GROUP BY day{{by_group}}, rule
)
ORDER BY day, rule{{by_group}}""",
    # the behavioural record per agent and day (consumers/pacts/record.py): clean = not failed and no
    # pact violated; score = Wilson lower bound (z = 1.96: z² = 3.8416) of clean / decisions
    "agent_record": f"""
SELECT day, agent_id{{by_group}}, decisions, failures, violating, clean,
       round((clean / decisions + 1.9208 / decisions
              - 1.96 * sqrt((clean / decisions) * (1 - clean / decisions) / decisions
                            + 0.9604 / (decisions * decisions)))
             / (1 + 3.8416 / decisions), 4) AS score
FROM (
    SELECT toDate(captured_at) AS day, agent_id{{by_select}}, count() AS decisions,
           countIf(failed_any) AS failures, countIf(decision_id IN violated) AS violating,
           countIf(NOT failed_any AND decision_id NOT IN violated) AS clean
    FROM decisions_current
    WHERE {_TRUSTED}
    GROUP BY day, agent_id{{by_group}}
)
ORDER BY day, agent_id{{by_group}}""",
}
# WITH for agent_record: the decisions of the range that violated a pact (evaluation errors are not)
_WITH = {
    "agent_record": "WITH violated AS (SELECT decision_id FROM pact_violations FINAL "
    f"WHERE kind = 'violation' AND {_RANGE})\n",
}


@dataclass(frozen=True, slots=True)
class Trend:
    name: str
    description: str
    columns: tuple[str, ...]  # output columns without the optional by column
    allowed_by: tuple[str, ...]

    def sql(self, by: str | None = None) -> str:
        return trend_sql(self.name, by)


TRENDS: Mapping[str, Trend] = {
    t.name: t
    for t in (
        Trend(
            "failure_rate",
            "Decisions, failures and failure rate by day x prompt version x model version.",
            ("day", "prompt_version", "model_version", "decisions", "failures", "failure_rate"),
            tuple(d for d in _DECISION_DIMS if d not in ("day", "prompt_version", "model_version")),
        ),
        Trend(
            "latency",
            "Exact p50 / p90 / p99 of total latency (ms) by day.",
            ("day", "decisions", "measured", "p50_ms", "p90_ms", "p99_ms"),
            tuple(d for d in _DECISION_DIMS if d != "day"),
        ),
        Trend(
            "tool_errors",
            "Tool calls, errors and error rate by tool (trusted decisions only).",
            ("tool_name", "calls", "errors", "error_rate"),
            ("agent_id", "day"),
        ),
        Trend(
            "working_set_vs_failure",
            "Failure rate by working-set size (bytes bucket x entry-count bucket).",
            ("bytes_bucket", "entries_bucket", "decisions", "failures", "failure_rate"),
            _DECISION_DIMS,
        ),
        Trend(
            "stop_reasons",
            "Distribution of stop reasons: decisions, failures and share of all decisions.",
            ("stop_reason", "decisions", "failures", "share"),
            tuple(d for d in _DECISION_DIMS if d != "stop_reason"),
        ),
        Trend(
            "volume",
            "Captures and encoded bytes by day x capture level x retention class x content state.",
            ("day", "capture_level", "retention_class", "content_state", "captures", "total_bytes"),
            tuple(
                d
                for d in _DECISION_DIMS
                if d not in ("day", "capture_level", "retention_class", "content_state")
            ),
        ),
        Trend(
            "pact_violations",
            "Pact violations per rule per day: violating decisions, evaluation errors, incidence.",
            ("day", "rule", "decisions", "violations", "errors", "incidence"),
            tuple(d for d in _DECISION_DIMS if d != "day"),
        ),
        Trend(
            "agent_record",
            "The behavioural record per agent per day: decisions, failures, decisions violating a "
            "pact, clean ones, and the score (Wilson lower bound of clean / decisions).",
            ("day", "agent_id", "decisions", "failures", "violating", "clean", "score"),
            tuple(d for d in _DECISION_DIMS if d not in ("day", "agent_id")),
        ),
    )
}


def get_trend(name: str) -> Trend:
    try:
        return TRENDS[name]
    except KeyError:
        raise IndexError_(f"unknown trend {name!r}; known: {', '.join(TRENDS)}") from None


def trend_sql(name: str, by: str | None = None) -> str:
    """The SQL of a trend with its optional ``by`` dimension filled in (only whitelisted dimensions)."""
    trend = get_trend(name)
    if by is None:
        parts = {"by_select": "", "by_group": "", "by_partition": "", "by_first": ""}
    else:
        if by not in trend.allowed_by:
            raise IndexError_(
                f"trend {name!r} cannot be split by {by!r}; allowed: {', '.join(trend.allowed_by)}"
            )
        expr = DIMENSIONS[by]
        select = f", {expr} AS {by}" if expr != by else f", {by}"
        parts = {
            "by_select": select,
            "by_group": f", {by}",
            "by_partition": f"PARTITION BY {by}",
            "by_first": f"{expr} AS {by}, " if expr != by else f"{by}, ",
        }
    sql = _WITH.get(name, "") + _SQL[name]
    for key, value in parts.items():
        sql = sql.replace("{" + key + "}", value)
    if name == "stop_reasons" and by is not None:
        # GROUP BY / ORDER BY take the alias, not "<expr> AS <alias>"
        sql = sql.replace(f"GROUP BY {parts['by_first']}", f"GROUP BY {by}, ").replace(
            f"ORDER BY {parts['by_first']}", f"ORDER BY {by}, "
        )
    return sql.strip()


def run_trend(
    index: Index,
    name: str,
    *,
    since: datetime,
    until: datetime,
    agent: str | None = None,
    by: str | None = None,
) -> list[dict[str, Any]]:
    """Run one trend; rows as dicts in the trend's column order (by column included when given)."""
    if until <= since:
        raise IndexError_("--until must be after --since")
    params = {"since": since, "until": until, "agent": agent or ""}
    return index.query(trend_sql(name, by), params)

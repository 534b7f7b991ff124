"""The decision list: one filtered, keyset-paginated page of decisions and the count behind it.

Used by the console's list view; the same SQL runs through ``blackbox query`` (the benchmark compares
them). Counting rules are the trend catalog's where they overlap (:mod:`consumers.index.trends`):
the current version of each decision (``decisions_current``), and **failed** means its own outcome
says failure OR a failure flag names it (``failed_any``). Quarantined captures are listed too, with
their ``trust``, because an investigator needs to see them.

Every filter is a bound parameter (``{name:Type}``); nothing a caller types is spliced into SQL. The
order is ``captured_at`` then ``decision_id`` (newest first by default); the cursor of the next page
is the last row's pair, so a page costs the same however deep it is (keyset, not OFFSET).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from consumers.index.engine import Index
from schemas.errors import ContractError

__all__ = [
    "LIST_COLUMNS",
    "DecisionFilter",
    "DecisionPage",
    "decision_access",
    "filter_from",
    "list_decisions",
    "list_sql",
    "manifests_of",
]

Order = Literal["desc", "asc"]
YesNo = Literal["", "yes", "no"]

# What one row of the list shows; never content, never the manifest.
LIST_COLUMNS = (
    "decision_id",
    "agent_id",
    "captured_at",
    "outcome_status",
    "failed_any",
    "consequential",
    "capture_level",
    "fidelity",
    "content_state",
    "trust",
    "prompt_version",
    "model_id",
    "model_version",
    "tool_call_count",
    "tool_error_count",
    "total_latency_ms",
    "legal_hold",
)
_ID_PREFIX = re.compile(r"^[A-Za-z0-9_:.-]{1,200}$")
_PLAIN = re.compile(r"^[^\x00-\x1f\x7f]{0,200}$")
MAX_PAGE = 200
COUNT_CAP = 10_000


@dataclass(frozen=True, slots=True, kw_only=True)
class DecisionFilter:
    """What the list is narrowed to; empty strings mean "any". Times are UTC, ``until`` exclusive."""

    since: datetime | None = None
    until: datetime | None = None
    agent: str = ""
    outcome: str = ""  # success | failure | unknown
    failed: YesNo = ""
    consequential: YesNo = ""
    capture_level: str = ""
    fidelity: str = ""
    prompt_version: str = ""
    model_version: str = ""
    pact: str = ""  # a pact rule the decision violated ("*": any rule)
    finding: str = ""  # a finding that pins the decision
    legal_hold: YesNo = ""
    erased: YesNo = ""
    origin_user: tuple[str, ...] = ()  # the index forms of one person's id (IndexIds.lookup)
    id_prefix: str = ""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, str) and not _PLAIN.match(value):
                raise ContractError("at most 200 characters, no control characters", path=f.name)
        for name in ("failed", "consequential", "legal_hold", "erased"):
            if getattr(self, name) not in ("", "yes", "no"):
                raise ContractError("yes, no or empty", path=name)
        if self.outcome not in ("", "success", "failure", "unknown"):
            raise ContractError("success, failure, unknown or empty", path="outcome")
        if self.id_prefix and not _ID_PREFIX.match(self.id_prefix):
            raise ContractError("letters, digits and _ : . - only", path="id_prefix")
        if self.since and self.until and self.since >= self.until:
            raise ContractError("since must be before until", path="since")

    def described(self) -> str:
        """The filter as one line for the access log (the person's id shown as hashed, never raw)."""
        parts = []
        for f in fields(self):
            value = getattr(self, f.name)
            if not value:
                continue
            if f.name == "origin_user":
                value = value[0]
            elif isinstance(value, datetime):
                value = value.isoformat()
            parts.append(f"{f.name}={value}")
        return " ".join(parts) or "all"


@dataclass(frozen=True, slots=True)
class DecisionPage:
    rows: list[dict[str, Any]]
    total: int  # decisions matching the filter (every page), at most COUNT_CAP + 1
    next_cursor: str  # "" on the last page

    @property
    def total_text(self) -> str:
        return f"{COUNT_CAP:,}+" if self.total > COUNT_CAP else f"{self.total:,}"


def _where(flt: DecisionFilter, params: dict[str, Any]) -> str:
    clauses: list[str] = []

    def equal(column: str, value: str, name: str) -> None:
        if value:
            params[name] = value
            clauses.append(f"{column} = {{{name}:String}}")

    def flag(column: str, value: str) -> None:
        if value:
            clauses.append(column if value == "yes" else f"NOT {column}")

    if flt.since:
        params["since"] = flt.since
        clauses.append("captured_at >= {since:DateTime64(3, 'UTC')}")
    if flt.until:
        params["until"] = flt.until
        clauses.append("captured_at < {until:DateTime64(3, 'UTC')}")
    equal("agent_id", flt.agent, "agent")
    equal("outcome_status", flt.outcome, "outcome")
    equal("capture_level", flt.capture_level, "capture_level")
    equal("fidelity", flt.fidelity, "fidelity")
    equal("prompt_version", flt.prompt_version, "prompt_version")
    equal("model_version", flt.model_version, "model_version")
    flag("failed_any", flt.failed)
    flag("consequential", flt.consequential)
    flag("legal_hold", flt.legal_hold)
    if flt.erased:
        clauses.append(
            ("" if flt.erased == "yes" else "NOT ")
            + "decision_id IN (SELECT decision_id FROM deletions WHERE action = 'erased')"
        )
    if flt.pact == "*":
        clauses.append("decision_id IN (SELECT decision_id FROM pact_violations WHERE kind = 'violation')")
    elif flt.pact:
        params["pact"] = flt.pact
        clauses.append(
            "decision_id IN (SELECT decision_id FROM pact_violations "
            "WHERE kind = 'violation' AND rule = {pact:String})"
        )
    if flt.finding:
        params["finding"] = flt.finding
        clauses.append(
            "decision_id IN (SELECT decision_id FROM finding_decisions WHERE name = {finding:String})"
        )
    if flt.origin_user:
        params["origin_user"] = list(flt.origin_user)
        clauses.append("origin_user_id IN {origin_user:Array(String)}")
    if flt.id_prefix:
        params["id_prefix"] = flt.id_prefix
        clauses.append("startsWith(decision_id, {id_prefix:String})")
    return " AND ".join(clauses) or "1"


def parse_cursor(cursor: str) -> tuple[datetime, str] | None:
    """``<captured_at ISO>|<decision_id>`` (what :attr:`DecisionPage.next_cursor` holds)."""
    if not cursor:
        return None
    when, sep, decision_id = cursor.partition("|")
    try:
        at = datetime.fromisoformat(when.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ContractError("not a page cursor", path="after") from exc
    if not sep or not _ID_PREFIX.match(decision_id):
        raise ContractError("not a page cursor", path="after")
    return (at if at.tzinfo else at.replace(tzinfo=UTC)), decision_id


def list_sql(
    flt: DecisionFilter, *, order: Order = "desc", after: str = "", limit: int = 50
) -> tuple[str, str, dict[str, Any]]:
    """The page query, the count query and their parameters."""
    if order not in ("desc", "asc"):
        raise ContractError("desc or asc", path="order")
    if not 1 <= limit <= MAX_PAGE:
        raise ContractError(f"1 to {MAX_PAGE}", path="limit")
    params: dict[str, Any] = {}
    where = _where(flt, params)
    # counted up to COUNT_CAP + 1: past it the page says "10,000+" (an exact count over a million rows costs
    # a full FINAL scan; the capped one stops reading early, measured ~5x cheaper at 1M)
    count = f"SELECT count() AS n FROM (SELECT 1 FROM decisions_current WHERE {where} LIMIT {COUNT_CAP + 1})"
    page_where = where
    cursor = parse_cursor(after)
    if cursor is not None:
        params["after_at"], params["after_id"] = cursor
        cmp = "<" if order == "desc" else ">"
        page_where += (
            f" AND (captured_at, decision_id) {cmp} ({{after_at:DateTime64(3, 'UTC')}}, {{after_id:String}})"
        )
    direction = order.upper()
    page = (
        f"SELECT {', '.join(LIST_COLUMNS)} FROM decisions_current WHERE {page_where} "
        f"ORDER BY captured_at {direction}, decision_id {direction} LIMIT {int(limit) + 1}"
    )
    return page, count, params


def list_decisions(
    index: Index, flt: DecisionFilter, *, order: Order = "desc", after: str = "", limit: int = 50
) -> DecisionPage:
    """One page of the decisions matching ``flt`` and how many match in all.

    ``decisions FINAL`` merges every row it reads, so the page is read through a time window and only
    that window is merged. Its edge is found in the unmerged versions (``decisions_versions``, the same
    filter and order): every match's current version is among them, so the window back to their
    ``limit + 1``-th row holds a page whenever no version there is stale, and every match when fewer
    rows come back. A window that holds ``limit + 1`` matches holds the first ones, because every row
    outside it lies beyond them in the page's order; one that does not gives way to windows growing from
    one day eightfold (none wider than a quarter of what is left to search), then to no window. Every
    version of a decision has the same ``captured_at`` (a sorting-key column), so a window never splits
    one. The count is read in the page's window first: one holding more than :data:`COUNT_CAP` matches,
    or every match, settles it.
    """
    page_sql, count_sql, params = list_sql(flt, order=order, after=after, limit=limit)
    clause = "captured_at " + (">=" if order == "desc" else "<=") + " {window:DateTime64(3, 'UTC')} AND "

    def run(sql: str, bound: datetime | None) -> list[dict[str, Any]]:
        if bound is None:
            return index.query(sql, params, read_only=True)
        return index.query(
            sql.replace(" WHERE ", f" WHERE {clause}", 1), {**params, "window": bound}, read_only=True
        )

    # The unmerged versions first: every match's current version is among them, so the time of their
    # (limit+1)-th row bounds a window that holds a page (or, with fewer rows, every match).
    reach = run(
        page_sql.replace(
            f"SELECT {', '.join(LIST_COLUMNS)} FROM decisions_current ",
            "SELECT captured_at FROM decisions_versions ",
            1,
        ),
        None,
    )
    if not reach and not after:
        return DecisionPage(rows=[], total=0, next_cursor="")
    bound: datetime | None = _utc(reach[-1]["captured_at"]) if reach else None
    rows = run(page_sql, bound) if reach else []
    if len(rows) <= limit and len(reach) > limit:
        for bound in _windows(index, flt, order=order, after=after):
            rows = run(page_sql, bound)
            if len(rows) > limit:
                break
    total = int(run(count_sql, bound)[0]["n"])
    # with fewer versions than a page past the cursor, the window holds every match (those before the
    # cursor lie inside it too), so its count is the count
    if bound is not None and total <= COUNT_CAP and len(reach) > limit:
        total = int(run(count_sql, None)[0]["n"])
    next_cursor = ""
    if len(rows) > limit:
        rows = rows[:limit]
        last = rows[-1]
        next_cursor = f"{_iso(last['captured_at'])}|{last['decision_id']}"
    return DecisionPage(rows=rows, total=total, next_cursor=next_cursor)


WINDOW_FIRST = timedelta(days=1)
WINDOW_GROWTH = 8
# a window wider than a quarter of what is left to search saves too little over no window at all
WINDOW_LAST_SHARE = 4


def _windows(index: Index, flt: DecisionFilter, *, order: Order, after: str) -> list[datetime | None]:
    """The far edges of the windows to try in turn (newest first: lower bounds; oldest first: upper
    bounds), ending with ``None`` (no window). Read off the table's time span (no FINAL, one column)."""
    span = index.query(
        "SELECT min(captured_at) AS first, max(captured_at) AS last, count() AS n FROM decisions",
        {},
        read_only=True,
    )[0]
    if not int(span["n"]):
        return [None]
    first, last = _utc(span["first"]), _utc(span["last"])
    cursor = parse_cursor(after)
    edges: list[datetime | None] = []
    width = WINDOW_FIRST
    if order == "desc":
        start = min(x for x in (last, flt.until, cursor[0] if cursor else None) if x is not None)
        floor = max(first, flt.since) if flt.since else first
        while width * WINDOW_LAST_SHARE <= start - floor:
            edges.append(start - width)
            width *= WINDOW_GROWTH
    else:
        start = max(x for x in (first, flt.since, cursor[0] if cursor else None) if x is not None)
        ceiling = min(last, flt.until) if flt.until else last
        while width * WINDOW_LAST_SHARE <= ceiling - start:
            edges.append(start + width)
            width *= WINDOW_GROWTH
    return [*edges, None]


def _utc(value: Any) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return datetime.fromisoformat(str(value)).replace(tzinfo=UTC)


def _iso(value: Any) -> str:
    if isinstance(value, datetime):
        value = value if value.tzinfo else value.replace(tzinfo=UTC)
        return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return str(value)


def filter_from(query: Mapping[str, str], *, lookup: Any = None) -> DecisionFilter:
    """A :class:`DecisionFilter` from URL query parameters of the same names (``since``/``until``
    ISO-8601; ``origin_user`` looked up through ``lookup``, an ``IndexIds.lookup``)."""

    def when(name: str) -> datetime | None:
        text = (query.get(name) or "").strip()
        if not text:
            return None
        try:
            at = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError as exc:
            raise ContractError("not an ISO-8601 time (2026-12-01 or 2026-12-01T10:00)", path=name) from exc
        return at if at.tzinfo else at.replace(tzinfo=UTC)

    def text(name: str) -> Any:
        return (query.get(name) or "").strip()

    user = text("origin_user")
    if user and not _PLAIN.match(user):
        raise ContractError("at most 200 characters, no control characters", path="origin_user")
    return DecisionFilter(
        since=when("since"),
        until=when("until"),
        agent=text("agent"),
        outcome=text("outcome"),
        failed=text("failed"),
        consequential=text("consequential"),
        capture_level=text("capture_level"),
        fidelity=text("fidelity"),
        prompt_version=text("prompt_version"),
        model_version=text("model_version"),
        pact=text("pact"),
        finding=text("finding"),
        legal_hold=text("legal_hold"),
        erased=text("erased"),
        origin_user=tuple(lookup(user)) if user and lookup else ((user,) if user else ()),
        id_prefix=text("id_prefix"),
    )


def manifests_of(index: Index, decision_ids: list[str]) -> dict[str, str]:
    """``{decision_id: manifest_json}`` of the current rows (what the gate judges a listed row by)."""
    if not decision_ids:
        return {}
    rows = index.query(
        "SELECT decision_id, manifest_json, agent_id FROM decisions FINAL "
        "WHERE decision_id IN {ids:Array(String)}",
        {"ids": decision_ids},
        read_only=True,
    )
    return {str(r["decision_id"]): str(r["manifest_json"] or "") for r in rows}


def decision_access(index: Index, decision_id: str, *, limit: int = 200) -> list[dict[str, Any]]:
    """The access log's rows about one decision, newest first (an operator's access history)."""
    return index.query(
        "SELECT seq, at, caller, scope, action, outcome, reason, detail, grant_id FROM access_log "
        "WHERE decision_id = {d:String} ORDER BY at DESC, seq DESC LIMIT {n:UInt32}",
        {"d": decision_id, "n": limit},
        read_only=True,
    )

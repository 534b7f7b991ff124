"""``blackbox query``, confined by construction (DESIGN decision 19).

A statement runs only if the engine's own parser says it is one SELECT (``WITH``, ``UNION``,
``INTERSECT``, ``EXCEPT``, joins and subqueries included) that reads nothing but the index's own tables
and views (those ``ddl.sql`` creates) and calls nothing but the pure functions listed in
``query_functions.txt``. Everything is checked against an allow-list, nothing against a deny-list: parse
tree node kinds, relations, functions. Refused, before anything runs: every other statement, every table
function (``file``, ``url``, ``s3``, ``remote``, ``numbers``, ``python``, … — the index tables hold
everything an operator asks, and each table function is a door to files, the network, other databases or
this process), every function not on the list (``file``, ``dictGet*``, ``joinGet``, ``getSetting``,
``ai*``, …), the ``APPLY`` column transformer (the engine's parse dump does not name the function it
applies, so it cannot be checked: write ``f(column)`` instead), ``INTO OUTFILE``, ``FORMAT`` (the CLI
formats), ``SETTINGS``, and tables of other databases (``system.*`` included).

On embedded chdb the engine cannot be told to keep ``file()`` away from the filesystem (clickhouse-local
ignores ``user_files_path`` for absolute paths), so this check is the wall there; the connection's
``readonly = 1`` and its time, row and memory limits stand behind it. On a server, the read-only query
user (SELECT on the index tables only) is the outer wall.

How the parser is asked, safely:

1. ``SELECT formatQuerySingleLine({sql:String})`` — the text is a bound string, so it is parsed, never
   run; more than one statement is a syntax error here (chdb would otherwise run each of them).
2. ``EXPLAIN AST <that canonical text>`` (:meth:`Index.explain_ast`) — one statement, parsed and
   dumped, never run. The dump is read as TabSeparated (a line break inside a name stays escaped) and
   strictly (every node's child count must match), so a quoted name cannot forge nodes; node kinds
   outside a small allow-list are refused.
3. The canonical text, the one just checked, is what runs: on a ``readonly = 1`` connection with the
   engine's row, time and memory limits (:class:`~consumers.index.engine.QueryLimits`).

Only an operator may query (the tables hold every decision's metadata, ``origin_user_id`` included);
any other scope is refused, and logged like any refusal.

Every query, allowed or refused, is first appended to ``access_log`` (action ``query``; the SQL in
``reason``, its sha256 and the verdict in ``detail``). If that row cannot be written, the query is
refused (decision 12's rule).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache

from consumers.access.gate import AccessLogUnavailable
from consumers.access.log import AccessLog, AccessRecord
from consumers.access.scopes import Caller
from consumers.index.engine import Index, QueryLimits, load_ddl, split_statements
from consumers.index.query_functions import allowed_functions
from schemas.errors import IndexError_

__all__ = [
    "QueryRefused",
    "QueryResult",
    "allowed_functions",
    "confine",
    "index_relations",
    "run_query",
]

MAX_SQL_CHARS = 65_536
_MAX_AST_LINES = 200_000
_LOGGED_SQL_CHARS = 8_192

_NODE = re.compile(r"^(?P<indent> *)(?P<kind>[A-Za-z_]+)(?P<rest>.*?)(?: \(children (?P<n>\d+)\))?$")
_PLAIN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?$")
_DDL_RELATION = re.compile(r"^CREATE\s+(?:TABLE|VIEW)\s+IF\s+NOT\s+EXISTS\s+([A-Za-z_][A-Za-z0-9_]*)", re.I)

# What the parse tree of a SELECT over tables is made of. Anything else (Set = SETTINGS, Explain,
# QueryParameter, InsertQuery, ...) is refused by name.
_ALLOWED_KINDS = frozenset(
    {
        "SelectWithUnionQuery",
        "SelectIntersectExceptQuery",
        "SelectQuery",
        "ExpressionList",
        "TablesInSelectQuery",
        "TablesInSelectQueryElement",
        "TableExpression",
        "TableIdentifier",
        "TableJoin",
        "ArrayJoin",
        "Subquery",
        "WithElement",
        "Identifier",
        "Literal",
        "Function",
        "Asterisk",
        "QualifiedAsterisk",
        "ColumnsRegexpMatcher",
        "ColumnsListMatcher",
        "QualifiedColumnsRegexpMatcher",
        "QualifiedColumnsListMatcher",
        "ColumnsExceptTransformer",
        "ColumnsReplaceTransformer",
        "ColumnsReplaceTransformerReplacement",
        "ColumnsTransformerList",
        "OrderByElement",
        "WithFill",
        "Interpolate",
        "InterpolateElement",
        "WindowDefinition",
        "WindowListElement",
        "SampleRatio",
        "DataType",
        "NameTypePair",
    }
)
_IN_FUNCTIONS = frozenset(
    {"in", "notin", "globalin", "globalnotin", "nullin", "notnullin", "globalnullin", "globalnotnullin"}
)
_STATEMENTS = {
    "InsertQuery": "INSERT",
    "AlterQuery": "ALTER",
    "AlterCommand": "ALTER",
    "DropQuery": "DROP/DETACH/TRUNCATE",
    "CreateQuery": "CREATE",
    "RenameQuery": "RENAME",
    "DeleteQuery": "DELETE",
    "UpdateQuery": "UPDATE",
    "OptimizeQuery": "OPTIMIZE",
    "SetQuery": "SET",
    "UseQuery": "USE",
    "SystemQuery": "SYSTEM",
    "KillQueryQuery": "KILL",
    "DescribeQuery": "DESCRIBE",
    "Explain": "EXPLAIN",
    "ExplainQuery": "EXPLAIN",
    "GrantQuery": "GRANT",
    "CheckQuery": "CHECK",
}


class QueryRefused(IndexError_):
    """``blackbox query`` refused a statement; the message names what was refused."""


@dataclass(frozen=True, slots=True)
class QueryResult:
    """Rows of an allowed query, cut to the row limit; ``truncated`` says more existed."""

    sql: str
    rows: list[dict[str, object]] = field(hash=False)
    truncated: bool
    limits: QueryLimits


@dataclass(slots=True)
class _Node:
    kind: str
    text: str
    children: list[_Node]

    @property
    def name(self) -> str:
        """The first word after the kind (a function's or identifier's name)."""
        return self.text.split(" (alias ", 1)[0].strip()


@dataclass(slots=True)
class _Open:
    """A node of the dump still waiting for ``left`` more children."""

    depth: int
    node: _Node
    left: int


@cache
def index_relations() -> frozenset[str]:
    """The tables and views ``ddl.sql`` creates: the only relations a query may read."""
    found = (_DDL_RELATION.match(s) for s in split_statements(load_ddl()))
    return frozenset(m.group(1) for m in found if m)


def _allowed_list() -> str:
    return ", ".join(sorted(index_relations()))


def _refuse(what: str) -> QueryRefused:
    return QueryRefused(f"query refused: {what}; only one SELECT over the index tables ({_allowed_list()})")


def _read_tree(lines: list[str]) -> _Node:
    """The ``EXPLAIN AST`` dump as a tree; any line out of place (a forged line) refuses the query."""
    unreadable = QueryRefused(
        "query refused: the engine's parse of it could not be read back (a quoted name with a line break?)"
    )
    parsed: list[tuple[int, _Node, int]] = []
    for line in lines:
        match = _NODE.match(line)
        if match is None:
            raise unreadable
        node = _Node(kind=match["kind"], text=match["rest"].strip(), children=[])
        parsed.append((len(match["indent"]), node, int(match["n"] or 0)))
    if not parsed or parsed[0][0] != 0:
        raise unreadable
    root_depth, root, root_n = parsed[0]
    stack: list[_Open] = [_Open(depth=root_depth, node=root, left=root_n)]
    for depth, node, n in parsed[1:]:
        while stack and stack[-1].left == 0:
            stack.pop()
        if not stack or depth != stack[-1].depth + 1:
            raise unreadable
        stack[-1].left -= 1
        stack[-1].node.children.append(node)
        stack.append(_Open(depth=depth, node=node, left=n))
    if any(frame.left for frame in stack):
        raise unreadable
    return root


class _Checker:
    def __init__(self, index: Index, limits: QueryLimits) -> None:
        self._index = index
        self._limits = limits
        self._local_tables: frozenset[str] | None = None

    def _tables_here(self) -> frozenset[str]:
        """Every table of the index's database (a name that is none of them is a CTE or an alias)."""
        if self._local_tables is None:
            rows = self._index.query(
                "SELECT name FROM system.tables WHERE database = currentDatabase()", limits=self._limits
            )
            self._local_tables = frozenset(str(r["name"]) for r in rows)
        return self._local_tables

    def table(self, name: str) -> None:
        if not _PLAIN_NAME.match(name):
            raise _refuse(f"table name {name!r} is not a plain name")
        relations = index_relations()
        if "." in name:
            database, table = name.split(".", 1)
            if database != self._index.database or table not in relations:
                raise _refuse(f"table {name} is not an index table")
        elif name not in relations and name in self._tables_here():
            raise _refuse(f"table {name} is not an index table")

    def check(self, root: _Node) -> None:
        if root.kind != "SelectWithUnionQuery":
            raise _refuse(f"{_STATEMENTS.get(root.kind, root.kind)} is not allowed")
        if len(root.children) != 1:  # the output clauses hang beside the selects
            extra = root.children[1]
            clause = {"Literal": "INTO OUTFILE", "Identifier": "FORMAT", "Set": "SETTINGS"}.get(
                extra.kind, extra.kind
            )
            raise _refuse(f"{clause} is not allowed")
        todo = [root]
        while todo:
            node = todo.pop()
            todo.extend(node.children)
            if node.kind == "Set":
                raise _refuse("SETTINGS is not allowed")
            if node.kind == "ColumnsApplyTransformer":
                raise _refuse("APPLY is not allowed (its function cannot be checked): call f(column) instead")
            if node.kind not in _ALLOWED_KINDS:
                raise _refuse(f"{_STATEMENTS.get(node.kind, node.kind)} is not allowed")
            if node.kind == "TableExpression":
                for child in node.children:
                    if child.kind == "Function":
                        raise _refuse(f"table function {child.name}() is not allowed")
            elif node.kind == "TableIdentifier":
                self.table(node.name)
            elif node.kind == "Function":
                name = node.name.lower()
                if not allowed_functions().allows(node.name):
                    raise _refuse(f"function {node.name}() is not on the list of functions a query may call")
                if name in _IN_FUNCTIONS and node.children and len(node.children[0].children) == 2:
                    right = node.children[0].children[1]
                    if right.kind == "Identifier":  # `x IN table`
                        self.table(right.name)


def confine(index: Index, sql: str, *, limits: QueryLimits) -> str:
    """The canonical text of ``sql`` if it is an allowed query (see the module docstring); else
    :class:`QueryRefused` naming what was refused. Nothing of ``sql`` is executed here."""
    if not sql.strip():
        raise _refuse("the statement is empty")
    if len(sql) > MAX_SQL_CHARS:
        raise _refuse(f"the statement is longer than {MAX_SQL_CHARS} characters")
    if "\x00" in sql:
        raise _refuse("the statement contains a NUL character")
    parse_limits = QueryLimits(max_rows=_MAX_AST_LINES, timeout_s=limits.timeout_s)
    try:
        rows = index.query(
            "SELECT formatQuerySingleLine({sql:String}) AS q", {"sql": sql}, limits=parse_limits
        )
        canonical = str(rows[0]["q"])
        lines = index.explain_ast(canonical, limits=parse_limits)
    except IndexError_ as exc:
        text = str(exc)
        if "Multi-statements" in text:
            raise _refuse("more than one statement is not allowed") from exc
        if "Cannot modify" in text:  # EXPLAIN applies a SETTINGS clause; readonly = 1 refuses it
            raise _refuse("SETTINGS is not allowed") from exc
        if "UNKNOWN_QUERY_PARAMETER" in text:
            raise _refuse("query parameters ({name:Type}) are not supported") from exc
        raise QueryRefused(f"query refused: the engine could not parse it: {text}") from exc
    if len(lines) > _MAX_AST_LINES:
        raise _refuse("the statement is too large")
    _Checker(index, parse_limits).check(_read_tree(lines))
    return canonical


def _utc_now() -> datetime:
    return datetime.now(UTC)


def run_query(
    index: Index,
    sql: str,
    *,
    limits: QueryLimits,
    log: AccessLog,
    caller: Caller,
    clock: Callable[[], datetime] = _utc_now,
) -> QueryResult:
    """Check ``sql`` (:func:`confine`), log the attempt, then run it under ``limits``.

    The access-log row is written before anything runs, allowed or refused; a refused query raises
    :class:`QueryRefused`, an unwritable log :class:`~consumers.access.gate.AccessLogUnavailable`.
    """
    digest = hashlib.sha256(sql.encode("utf-8", "surrogatepass")).hexdigest()
    refusal: QueryRefused | None = None
    canonical = ""
    if caller.scope != "operator":  # raw SQL reads every row, origin_user_id included: operators only
        refusal = QueryRefused(f"blackbox query is for operators only, not {caller.scope}")
    else:
        try:
            canonical = confine(index, sql, limits=limits)
        except QueryRefused as exc:
            refusal = exc
    logged = sql if len(sql) <= _LOGGED_SQL_CHARS else sql[:_LOGGED_SQL_CHARS] + "…"
    detail = f"sql_sha256={digest}; max_rows={limits.max_rows}; timeout_s={limits.timeout_s}"
    record = AccessRecord(
        at=clock(),
        caller=caller.identity,
        scope=caller.scope,
        decision_id="",
        agent_id="",
        action="query",
        reason=logged,
        outcome="denied" if refusal else "allowed",
        detail=f"{detail}; {refusal}" if refusal else detail,
    )
    try:
        log.append([record])
    except Exception as exc:  # no log, no query
        raise AccessLogUnavailable(
            f"query refused: the access log could not be written ({type(exc).__name__}: {exc})"
        ) from (refusal or exc)
    if refusal is not None:
        raise refusal
    rows = index.query(canonical, limits=limits)
    return QueryResult(
        sql=canonical, rows=rows[: limits.max_rows], truncated=len(rows) > limits.max_rows, limits=limits
    )

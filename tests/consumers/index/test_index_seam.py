"""The index seam stays narrow, and SQL stays in the stores.

* :class:`~consumers.index.Index` declares the engine primitives only; a convenience method added to it
  would be a second API every engine has to keep.
* Outside ``consumers/index/`` (the engines, the schema, the trend catalog, the confined query), only an
  area's store module runs statements on the index: ``consumers/<area>/store.py``, and the access log
  (``consumers/access/log.py``, the access area's store: both access-log sinks and nothing else).
"""

from __future__ import annotations

import ast
from pathlib import Path

from consumers.index import ChdbIndex, ClickHouseServerIndex, Index

ROOT = Path(__file__).resolve().parents[3]
CONSUMERS = ROOT / "consumers"
PRIMITIVES = {
    "database",
    "ensure_schema",
    "column_types",
    "insert",
    "query",
    "explain_ast",
    "command",
    "close",
}
STORES = {Path("consumers/access/log.py")}
"""Store modules not named ``store.py``."""


def _members(proto: type) -> set[str]:
    return {
        name
        for name in {*vars(proto), *getattr(proto, "__annotations__", {})}
        if not name.startswith("_") and name not in {"register"}
    }


def test_protocol_declares_only_the_engine_primitives() -> None:
    assert _members(Index) == PRIMITIVES


def test_both_engines_implement_the_seam() -> None:
    for engine in (ChdbIndex, ClickHouseServerIndex):
        missing = {name for name in PRIMITIVES - {"database"} if not callable(getattr(engine, name, None))}
        assert not missing, (engine.__name__, missing)


def _index_calls(path: Path) -> list[str]:
    """``line: call`` of every ``<x>.query(``/``<x>.command(`` call, and ``<x>.insert(`` on something
    named like an index, in one module (``app.command(...)`` registers a typer command: not SQL)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        receiver = ast.unparse(node.func.value)
        method = node.func.attr
        runs_sql = method in {"query", "command"} and not receiver.endswith("app")
        writes_rows = method == "insert" and "index" in receiver.lower()
        if runs_sql or writes_rows:
            found.append(f"{node.lineno}: {receiver}.{method}(")
    return found


def test_sql_runs_only_in_store_modules() -> None:
    outside: dict[str, list[str]] = {}
    for path in sorted(CONSUMERS.rglob("*.py")):
        relative = path.relative_to(ROOT)
        if relative.parts[:2] == ("consumers", "index") or path.name == "store.py" or relative in STORES:
            continue
        calls = _index_calls(path)
        if calls:
            outside[str(relative)] = calls
    assert not outside, f"index calls outside a store module (move them to the area's store.py): {outside}"


def test_the_scan_finds_a_call_outside_a_store(tmp_path: Path) -> None:
    """The scan itself can fail: it sees the forms the stores use and ignores typer registrations."""
    module = tmp_path / "m.py"
    module.write_text(
        "def f(index, app, values):\n"
        "    index.query('SELECT 1')\n"
        "    self_index = index\n"
        "    self_index.insert('flags', {})\n"
        "    app.command('x')(f)\n"
        "    values.insert(0, 1)\n",
        encoding="utf-8",
    )
    assert _index_calls(module) == ["2: index.query(", "4: self_index.insert("]

"""Storage is the floor that ingest, retention, replay and verify stand on: none of them imports a
room beside it (ingest may read the retention policy, which sits below it), and storage imports none
of them. Every import counts, including the ones under ``TYPE_CHECKING`` and inside functions."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CONSUMERS = Path(__file__).resolve().parents[3] / "consumers"

# room -> the rooms it must never import
FORBIDDEN = {
    "storage": {"ingest", "retention", "replay", "verify", "commands", "demo", "app"},
    "retention": {"ingest", "replay", "verify"},
    "replay": {"ingest", "retention", "verify"},
    "verify": {"ingest", "retention", "replay"},
    "ingest": {"replay", "verify"},
}


def _imported_rooms(path: Path, room: str) -> set[tuple[str, int]]:
    """``(consumers room, line)`` of every import in ``path``; relative imports stay in ``room``."""
    found: set[tuple[str, int]] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [f"consumers.{room}" if node.level else (node.module or "")]
        for name in names:
            parts = name.split(".")
            if parts[0] == "consumers" and len(parts) > 1:
                found.add((parts[1], node.lineno))
    return found


@pytest.mark.parametrize("room", sorted(FORBIDDEN))
def test_a_room_never_imports_the_rooms_beside_or_above_it(room: str) -> None:
    wrong = [
        f"{path.relative_to(CONSUMERS.parent)}:{line} imports consumers.{other}"
        for path in sorted((CONSUMERS / room).rglob("*.py"))
        for other, line in sorted(_imported_rooms(path, room))
        if other in FORBIDDEN[room]
    ]
    assert not wrong, "\n".join(wrong)


def test_the_stored_format_and_reader_live_in_storage_only() -> None:
    for gone in ("segments.py", "show.py", "verify_stored.py", "verdict.py"):
        assert not (CONSUMERS / "ingest" / gone).exists(), f"consumers/ingest/{gone} is storage's or verify's"

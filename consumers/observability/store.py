"""The observability room's one statement on the index: ``/readyz`` asks it to answer."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from consumers.index import Index

__all__ = ["index_answers"]


def index_answers(index: Index) -> None:
    """Raise what the index raises when it cannot answer the cheapest query."""
    index.query("SELECT 1")

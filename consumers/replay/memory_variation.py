"""Entry-level variations of the working set: drop entries, keep one tier, truncate, reorder.

``memory.FIELD=VALUE``:

=====================  ==========================================================================
``memory.drop``        entry ids (comma-separated) removed from the working set
``memory.tier``        tiers (comma-separated) kept; every entry of another tier is removed
``memory.truncate``    the working set cut to at most N bytes (``8192``, ``8KB``; KB = 1024 bytes),
                       keeping whole entries in context order: an entry cut in half is content the
                       agent never had, so the cut falls at the last entry boundary that fits
``memory.order``       entry ids (comma-separated) moved to the front in that order; the others
                       follow in their captured order
=====================  ==========================================================================

The *working set* is measured as the model receives it: the entries' texts joined by the blank-line
separator, in UTF-8 bytes (:func:`working_set_bytes`). The block is re-rendered through its span,
and each kept entry gets its ``memory:<entryId>`` span back, so variations compose.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from producers.context import MEMORY_SEPARATOR, ContextSpan, RenderedContext
from schemas.errors import ContractError

__all__ = [
    "MEMORY_FIELDS",
    "MemoryItem",
    "format_size",
    "memory_items",
    "parse_memory_value",
    "parse_size",
    "render_memory",
    "vary_memory",
    "working_set_bytes",
]

MEMORY_FIELDS = ("drop", "tier", "truncate", "order")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(b|kb|kib|mb|mib)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "kb": 1024, "kib": 1024, "mb": 1024 * 1024, "mib": 1024 * 1024}


class MemoryVariationError(ContractError):
    """An entry-level memory variation names an entry or tier the capture lacks, or a bad size
    (:mod:`consumers.replay.variation` re-raises it as its ``InvalidVariation``)."""

    def __init__(self, message: str, *, path: str = "") -> None:
        self.detail = message
        super().__init__(message, path=path)


@dataclass(frozen=True, slots=True)
class MemoryItem:
    """One working-set entry as the model saw it: its id, tier and rendered text."""

    entry_id: str
    tier: str
    content: str


def memory_items(capture: Mapping[str, Any], rendered: RenderedContext) -> tuple[MemoryItem, ...]:
    """The captured working set in context order; each text is read from its span when the rendered
    context locates it (the bytes the model received), else from the entry's ``renderedContent``."""
    entries = (capture.get("memoryState") or {}).get("workingSetEntries") or ()
    located = {s.part for s in rendered.spans}
    items: list[MemoryItem] = []
    for entry in sorted(entries, key=lambda e: int(e.get("contextPosition") or 0)):
        entry_id = str(entry.get("entryId") or "")
        part = f"memory:{entry_id}"
        content = rendered.part_text(part) if part in located else entry.get("renderedContent")
        if isinstance(content, str):
            items.append(MemoryItem(entry_id=entry_id, tier=str(entry.get("tier") or ""), content=content))
    return tuple(items)


def working_set_bytes(items: Sequence[MemoryItem]) -> int:
    """The working set's size as the model receives it (texts and separators, UTF-8 bytes)."""
    return len(MEMORY_SEPARATOR.join(i.content for i in items).encode("utf-8"))


def parse_size(text: str, *, path: str = "memory.truncate") -> int:
    """``8192``, ``8KB``, ``7.5 KiB``, ``1MB`` → bytes (KB and KiB are 1024 bytes)."""
    match = _SIZE.match(text)
    if match is None:
        raise MemoryVariationError(f"{text!r} is not a size (e.g. 8192, 8KB, 1.5KB)", path=path)
    return int(float(match.group(1)) * _UNITS[(match.group(2) or "").lower()])


def format_size(size: float) -> str:
    """Bytes as an operator reads them: ``812 B``, ``7.9 KB`` (KB = 1024 bytes)."""
    if size < 1024:
        return f"{size:.0f} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / 1024 / 1024:.1f} MB"


def parse_memory_value(field: str, text: str) -> Any:
    """The typed value of ``memory.FIELD=TEXT``: ids or tiers as a tuple, a size as an int."""
    path = f"memory.{field}"
    if field == "truncate":
        return parse_size(text, path=path)
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    if not names:
        raise MemoryVariationError("give at least one entry id or tier, comma-separated", path=path)
    if len(set(names)) != len(names):
        raise MemoryVariationError("a name is given twice", path=path)
    return names


def vary_memory(items: Sequence[MemoryItem], field: str, value: Any) -> tuple[MemoryItem, ...]:
    """``items`` after one entry-level variation (see the module docstring)."""
    path = f"memory.{field}"
    ids = [i.entry_id for i in items]
    if field == "truncate":
        if not isinstance(value, int) or value < 0:
            raise MemoryVariationError("the size must be a whole number of bytes, 0 or more", path=path)
        kept: list[MemoryItem] = []
        for item in items:
            if working_set_bytes([*kept, item]) > value:
                break
            kept.append(item)
        return tuple(kept)
    names = _names(value, path)
    if field == "tier":
        tiers = sorted({i.tier for i in items})
        missing = [t for t in names if t not in tiers]
        if missing:
            raise MemoryVariationError(
                f"no entry has tier {', '.join(missing)} (tiers here: {', '.join(tiers) or 'none'}); "
                "to empty the working set use memory.truncate=0",
                path=path,
            )
        return tuple(i for i in items if i.tier in names)
    unknown = [n for n in names if n not in ids]
    if unknown:
        shown = ", ".join(ids[:8]) + (f" … ({len(ids)} entries)" if len(ids) > 8 else "")
        raise MemoryVariationError(
            f"no entry {', '.join(unknown)} in the working set (entries: {shown or 'none'})", path=path
        )
    if field == "drop":
        return tuple(i for i in items if i.entry_id not in names)
    if field == "order":
        first = [next(i for i in items if i.entry_id == n) for n in names]
        return (*first, *(i for i in items if i.entry_id not in names))
    raise MemoryVariationError(f"memory has no field {field!r}; one of {', '.join(MEMORY_FIELDS)}", path=path)


def render_memory(rendered: RenderedContext, items: Sequence[MemoryItem]) -> RenderedContext:
    """``rendered`` with the working-set block re-rendered from ``items``: every other byte as before,
    later spans moved, and a ``memory:<entryId>`` span for each entry."""
    try:
        block = rendered.span("memory")
    except ContractError as exc:
        raise MemoryVariationError(
            "the rendered context has no 'memory' span, so the working set cannot be varied", path="memory"
        ) from exc
    text = rendered.replace("memory", MEMORY_SEPARATOR.join(i.content for i in items))
    delta = len(text.encode("utf-8")) - len(rendered.text.encode("utf-8"))
    spans: list[ContextSpan] = []
    for span in rendered.spans:
        if span.part.startswith("memory:"):
            continue  # re-created below from the new block
        if span.part == "memory":
            spans.append(replace(span, end=span.end + delta))
        elif span.start >= block.end:
            spans.append(replace(span, start=span.start + delta, end=span.end + delta))
        elif span.end <= block.start:
            spans.append(span)
        elif span.start <= block.start and span.end >= block.end:
            spans.append(replace(span, end=span.end + delta))
    at = block.start
    separator = len(_encoded(MEMORY_SEPARATOR, block.encoding))
    for n, item in enumerate(items):
        if n:
            at += separator
        size = len(_encoded(item.content, block.encoding))
        spans.append(
            ContextSpan(part=f"memory:{item.entry_id}", start=at, end=at + size, encoding=block.encoding)
        )
        at += size
    return RenderedContext(format=rendered.format, text=text, spans=tuple(spans))


def _encoded(text: str, encoding: str) -> bytes:
    # The same escaping RenderedContext.replace applies (json.dumps without ASCII escapes).
    raw = json.dumps(text, ensure_ascii=False)[1:-1] if encoding == "json-string" else text
    return raw.encode("utf-8")


def _names(value: Any, path: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, tuple | list) or not all(isinstance(v, str) for v in value):
        raise MemoryVariationError("give entry ids or tiers, comma-separated", path=path)
    return tuple(value)

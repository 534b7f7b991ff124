"""The rendered context exactly as sent, with its recorded spans made visible, as server-built HTML.

Spans are UTF-8 byte ranges of ``renderedContext.text`` (:mod:`producers.context`); they nest (the
``memory`` block holds one ``memory:<entryId>`` span per entry). Every byte of the text appears once,
in order, as escaped text (:func:`consumers.console.web.inert`), so the browser's find sees all of it.
A memory span is an anchor to its entry's provenance card (``#entry-N``, shown by CSS ``:target``):
selecting it needs no script. A span that is out of range, splits a UTF-8 character or crosses
another span is not drawn, and the page says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from consumers.console.web import inert

__all__ = ["ContextView", "render_context"]

_KINDS = {"system_prompt": "sys", "memory": "blk", "user": "user"}


@dataclass(frozen=True, slots=True)
class ContextView:
    html: Markup
    drawn: int
    skipped: tuple[str, ...]  # why each undrawn span was left out
    size: int  # bytes


@dataclass(frozen=True, slots=True)
class _Span:
    start: int
    end: int
    part: str
    number: int


def _boundary(data: bytes, at: int) -> bool:
    return at == len(data) or (0 <= at < len(data) and (data[at] & 0xC0) != 0x80)


def render_context(text: str, spans: Sequence[Mapping[str, Any]], entries: Mapping[str, int]) -> ContextView:
    """``text`` with ``spans`` drawn; ``entries`` maps a memory entry id to its card number."""
    data = text.encode("utf-8")
    skipped: list[str] = []
    good: list[_Span] = []
    for number, span in enumerate(spans):
        start, end, part = span.get("start"), span.get("end"), str(span.get("part") or "")
        if not isinstance(start, int) or not isinstance(end, int) or not 0 <= start <= end <= len(data):
            skipped.append(f"span {number} ({part[:40]}): outside the text")
        elif not (_boundary(data, start) and _boundary(data, end)):
            skipped.append(f"span {number} ({part[:40]}): splits a UTF-8 character")
        else:
            good.append(_Span(start, end, part, number))
    good.sort(key=lambda s: (s.start, -s.end, s.number))

    out: list[str] = []
    stack: list[_Span] = []
    at = 0
    drawn = 0

    def text_to(position: int) -> None:
        nonlocal at
        if position > at:
            out.append(str(inert(data[at:position].decode("utf-8"))))
            at = position

    def close_to(position: int) -> None:
        while stack and stack[-1].end <= position:
            span = stack.pop()
            text_to(span.end)
            out.append("</a>" if span.part.startswith("memory:") else "</mark>")

    for item in good:
        close_to(item.start)
        if stack and item.end > stack[-1].end:
            skipped.append(f"span {item.number} ({item.part[:40]}): crosses another span")
            continue
        text_to(item.start)
        drawn += 1
        if item.part.startswith("memory:"):
            card = entries.get(item.part.removeprefix("memory:"))
            target = f"entry-{card}" if card is not None else "memory-table"
            out.append(f'<a class="span mem" id="span-{item.number}" href="#{target}">')
        else:
            kind = _KINDS.get(item.part, "other")
            out.append(f'<mark class="span {kind}" id="span-{item.number}">')
        stack.append(item)
    close_to(len(data) + 1)
    text_to(len(data))
    return ContextView(html=Markup("".join(out)), drawn=drawn, skipped=tuple(skipped), size=len(data))

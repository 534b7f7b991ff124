"""Edit a recorded JSON request body in place: one member or one span changes, every other byte stays.

A wire capture keeps each model call's request body exactly as the SDK sent it. Replay varies one
part of it (the ``model`` or a sampling member, a tool list, the text inside a span) and must leave
the rest byte-identical, so nothing here parses and re-serializes the body: :func:`layout` finds
where each top-level member's value sits (UTF-8 byte offsets), and the editors splice new JSON text
written in the body's own style (its separators, and ``\\u`` escapes when the body is pure ASCII).

A later call of a tool loop appends to the history array of the call before it (``messages`` or
``input``); :func:`appended_items` recovers those appended bytes from two recorded bodies, and
:func:`append_items` adds them to another body's history, so a replay can rebuild call N from its
own call N-1.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BodyLayout",
    "Member",
    "append_items",
    "appended_items",
    "escape_text",
    "first_difference",
    "layout",
    "remove_member",
    "set_member",
    "splice",
]

_WHITESPACE = " \t\n\r"
_decoder = json.JSONDecoder()


@dataclass(frozen=True, slots=True)
class Member:
    """One top-level member: its key, and its value's UTF-8 byte span ``[start, end)`` in the body."""

    key: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class BodyLayout:
    """Where a JSON object body's members are, and how it writes JSON (separators, escapes)."""

    members: tuple[Member, ...]
    item_separator: str
    key_separator: str
    ascii_only: bool
    close: int
    """Byte offset of the closing ``}``."""

    def member(self, key: str) -> Member | None:
        return next((m for m in self.members if m.key == key), None)

    def dumps(self, value: Any) -> bytes:
        """``value`` as JSON written the way this body writes it."""
        text = json.dumps(
            value, ensure_ascii=self.ascii_only, separators=(self.item_separator, self.key_separator)
        )
        return text.encode("utf-8")


def _skip(text: str, index: int) -> int:
    while index < len(text) and text[index] in _WHITESPACE:
        index += 1
    return index


def layout(body: bytes) -> BodyLayout:
    """The members of ``body``, a JSON object; ValueError when it is not one."""
    text = body.decode("utf-8")
    ascii_body = text.isascii()
    offsets = (lambda i: i) if ascii_body else (lambda i: len(text[:i].encode("utf-8")))
    index = _skip(text, 0)
    if text[index : index + 1] != "{":
        raise ValueError("the request body is not a JSON object")
    index = _skip(text, index + 1)
    members: list[Member] = []
    item_sep, key_sep = ",", ":"
    while text[index : index + 1] != "}":
        if members:
            if text[index : index + 1] != ",":
                raise ValueError(f"expected ',' at character {index} of the request body")
            after = _skip(text, index + 1)
            if len(members) == 1:
                item_sep = text[index:after]
            index = after
        key, key_end = _decoder.raw_decode(text, index)
        if not isinstance(key, str):
            raise ValueError(f"expected a member name at character {index} of the request body")
        colon = _skip(text, key_end)
        if text[colon : colon + 1] != ":":
            raise ValueError(f"expected ':' at character {colon} of the request body")
        start = _skip(text, colon + 1)
        if not members:
            key_sep = text[key_end:start]
        _, end = _decoder.raw_decode(text, start)
        members.append(Member(key, offsets(start), offsets(end)))
        index = _skip(text, end)
        if index >= len(text):
            raise ValueError("the request body ends inside its object")
    if text[_skip(text, index + 1) :]:
        raise ValueError("extra data after the request body's object")
    return BodyLayout(
        members=tuple(members),
        item_separator=item_sep if item_sep.strip() == "," else ",",
        key_separator=key_sep if key_sep.strip() == ":" else ":",
        ascii_only=ascii_body,
        close=offsets(index),
    )


def splice(body: bytes, start: int, end: int, new: bytes) -> bytes:
    """``body`` with bytes ``[start, end)`` replaced by ``new``."""
    return body[:start] + new + body[end:]


def escape_text(body: BodyLayout, text: str) -> bytes:
    """``text`` escaped inside a JSON string literal (no quotes), as ``body`` escapes its strings."""
    return body.dumps(text)[1:-1]


def set_member(body: bytes, key: str, value: Any) -> bytes:
    """``body`` with member ``key`` set to ``value``: its value bytes replaced when present, else
    the member added last (before ``}``); nothing else moves."""
    shape = layout(body)
    encoded = shape.dumps(value)
    member = shape.member(key)
    if member is not None:
        return splice(body, member.start, member.end, encoded)
    prefix = shape.item_separator.encode() if shape.members else b""
    added = prefix + json.dumps(key, ensure_ascii=shape.ascii_only).encode() + shape.key_separator.encode()
    last = shape.members[-1].end if shape.members else shape.close
    return body[:last] + added + encoded + body[last:]


def remove_member(body: bytes, key: str) -> bytes:
    """``body`` without member ``key`` (and one separator); unchanged when it has none."""
    shape = layout(body)
    members = shape.members
    for i, member in enumerate(members):
        if member.key != key:
            continue
        name = json.dumps(key, ensure_ascii=shape.ascii_only).encode()
        key_start = body.rfind(name, 0, member.start)
        if i > 0:  # from the end of the previous value
            return body[: members[i - 1].end] + body[member.end :]
        if len(members) > 1:  # the first member: up to the next member's name
            following = body.find(
                json.dumps(members[1].key, ensure_ascii=shape.ascii_only).encode(), member.end
            )
            return body[:key_start] + body[following:]
        return body[:key_start] + body[member.end : shape.close].lstrip() + body[shape.close :]
    return body


def appended_items(previous: bytes, current: bytes, key: str) -> bytes | None:
    """The bytes ``current`` inserts at the end of ``previous``'s array member ``key`` (separator
    included) when ``current`` is exactly ``previous`` with items appended there; else None."""
    try:
        member = layout(previous).member(key)
    except ValueError:
        return None
    if member is None or previous[member.start : member.start + 1] != b"[":
        return None
    cut = member.end - 1  # the array's closing bracket
    head, tail = previous[:cut], previous[cut:]
    if len(current) < len(previous) or not current.startswith(head) or not current.endswith(tail):
        return None
    return current[len(head) : len(current) - len(tail)]


def append_items(body: bytes, key: str, items: bytes) -> bytes:
    """``body`` with ``items`` (from :func:`appended_items`) inserted at the end of array ``key``."""
    member = layout(body).member(key)
    if member is None or body[member.start : member.start + 1] != b"[":
        raise ValueError(f"the request body has no {key!r} array")
    return splice(body, member.end - 1, member.end - 1, items)


def first_difference(a: bytes, b: bytes) -> int | None:
    """The first byte offset where ``a`` and ``b`` differ (None when equal)."""
    if a == b:
        return None
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return min(len(a), len(b))

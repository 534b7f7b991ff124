"""The rendered context window: the exact text sent to the model, and where each part sits in it.

Replay sends ``text`` verbatim. To vary one part (the system prompt, the working set) it must
splice the new part in at the right place, so the capture records *spans*: UTF-8 byte offsets
(end exclusive) of each part inside ``text``. ``encoding="json-string"`` means the bytes in the
span are the part as escaped inside a JSON string literal (without the quotes), which is how
every part appears in an OpenAI chat ``messages`` array.

Parts are named ``system_prompt``, ``memory`` (the whole working-set block), ``memory:<entryId>``
(one entry inside it) and ``user`` (the inbound message).
"""

from __future__ import annotations

import json
import json.encoder
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from producers import native
from schemas.errors import ContractError

CHAT_MESSAGES_FORMAT = "openai.chat.messages+json"
MEMORY_SEPARATOR = "\n\n"


@dataclass(frozen=True, slots=True)
class ContextSpan:
    part: str
    start: int
    end: int
    encoding: Literal["json-string", "raw"] = "json-string"

    def to_json(self) -> dict[str, Any]:
        return {"part": self.part, "start": self.start, "end": self.end, "encoding": self.encoding}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> ContextSpan:
        return cls(part=value["part"], start=value["start"], end=value["end"], encoding=value["encoding"])


# The native render's spans, made without the frozen dataclass's ``__init__`` (an ``object.__setattr__``
# per field) by setting the slots directly: equal objects, ~0.4 µs less per span on the agent's thread.
_SPAN_SLOTS = tuple(vars(ContextSpan)[name].__set__ for name in ("part", "start", "end", "encoding"))


def _json_string_span(part: str, start: int, end: int) -> ContextSpan:
    span = object.__new__(ContextSpan)
    set_part, set_start, set_end, set_encoding = _SPAN_SLOTS
    set_part(span, part)
    set_start(span, start)
    set_end(span, end)
    set_encoding(span, "json-string")
    return span


@dataclass(frozen=True, slots=True)
class RenderedContext:
    format: str
    text: str
    spans: tuple[ContextSpan, ...]

    def span(self, part: str) -> ContextSpan:
        for span in self.spans:
            if span.part == part:
                return span
        raise ContractError(f"no span named {part!r} in the rendered context", path="renderedContext.spans")

    def part_text(self, part: str) -> str:
        """The part's own text, unescaped, as the runtime supplied it."""
        span = self.span(part)
        raw = self.text.encode("utf-8")[span.start : span.end].decode("utf-8")
        return json.loads(f'"{raw}"') if span.encoding == "json-string" else raw

    def replace(self, part: str, new_text: str) -> str:
        """``text`` with one part swapped for ``new_text`` (escaped as the span's encoding demands)."""
        span = self.span(part)
        encoded = self.text.encode("utf-8")
        new_bytes = (_escape(new_text) if span.encoding == "json-string" else new_text).encode("utf-8")
        return (encoded[: span.start] + new_bytes + encoded[span.end :]).decode("utf-8")

    def with_memory(self, entries: Sequence[str]) -> str:
        """``text`` with the working-set block re-rendered from ``entries`` (same separator)."""
        return self.replace("memory", MEMORY_SEPARATOR.join(entries))

    def messages(self) -> list[dict[str, Any]]:
        if self.format != CHAT_MESSAGES_FORMAT:
            raise ContractError(
                f"format {self.format!r} is not a chat messages array", path="renderedContext"
            )
        messages = json.loads(self.text)
        if not isinstance(messages, list):
            raise ContractError("rendered context is not a JSON array", path="renderedContext.text")
        return messages

    def to_json(self) -> dict[str, Any]:
        return {"format": self.format, "text": self.text, "spans": [s.to_json() for s in self.spans]}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> RenderedContext:
        return cls(
            format=value["format"],
            text=value["text"],
            spans=tuple(ContextSpan.from_json(s) for s in value.get("spans") or ()),
        )


_encode_basestring: Any = (
    getattr(json.encoder, "c_encode_basestring", None) or json.encoder.py_encode_basestring
)


def _escape(text: str) -> str:
    """``text`` as escaped inside a JSON string literal (no quotes), as ``json.dumps(ensure_ascii=False)``."""
    if type(text) is not str:  # not a text part: keep json.dumps' reading of it
        return json.dumps(text, ensure_ascii=False)[1:-1]
    return _encode_basestring(text)[1:-1]


def _utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


# The system prompt is usually the same str object in every decision: remember its escaped form.
_last_escaped: tuple[str, str, int] = ("", "", 0)


def _escape_prompt(text: str) -> tuple[str, int]:
    global _last_escaped
    cached = _last_escaped  # one read: another thread may replace it
    if cached[0] is text:
        return cached[1], cached[2]
    escaped = _escape(text)
    size = _utf8_len(escaped)
    _last_escaped = (text, escaped, size)
    return escaped, size


def render_chat_context(
    *, system_prompt: str, memory: Sequence[tuple[str, str]], user_message: str
) -> RenderedContext:
    """Render ``[system prompt, working set, user]`` as an OpenAI chat messages array with spans.

    ``memory`` is ``(entryId, renderedContent)`` in context order; entries are joined by a blank
    line inside one system message so the block can be re-rendered as a whole.
    """
    memory = list(memory)
    core = native.core()
    if core is not None:  # one pass in the core (src/context.rs); None: declined, rendered below
        done = core.render_chat(_PIECES, system_prompt, [content for _, content in memory], user_message)
        if done is not None:
            text, offsets = done
            parts = ["system_prompt", *(f"memory:{entry_id}" for entry_id, _ in memory), "memory", "user"]
            return RenderedContext(
                format=CHAT_MESSAGES_FORMAT,
                text=text,
                spans=tuple(
                    [
                        _json_string_span(part, start, end)
                        for part, (start, end) in zip(parts, offsets, strict=True)
                    ]
                ),
            )
    # Pieces are joined once; span offsets are UTF-8 byte counts (len() for ASCII pieces).
    pieces: list[str] = [_HEAD]
    spans: list[ContextSpan] = []
    at = _HEAD_LEN
    escaped, size = _escape_prompt(system_prompt)
    pieces.append(escaped)
    spans.append(ContextSpan(part="system_prompt", start=at, end=at + size))
    at += size
    pieces.append(_MIDDLE)
    at += _MIDDLE_LEN
    block_start = at
    for i, (entry_id, content) in enumerate(memory):
        if i:
            pieces.append(_SEPARATOR)
            at += _SEPARATOR_LEN
        escaped = _escape(content)
        size = _utf8_len(escaped)
        pieces.append(escaped)
        spans.append(ContextSpan(part=f"memory:{entry_id}", start=at, end=at + size))
        at += size
    spans.append(ContextSpan(part="memory", start=block_start, end=at))
    pieces.append(_USER)
    at += _USER_LEN
    escaped = _escape(user_message)
    size = _utf8_len(escaped)
    pieces.append(escaped)
    spans.append(ContextSpan(part="user", start=at, end=at + size))
    pieces.append(_TAIL)
    return RenderedContext(format=CHAT_MESSAGES_FORMAT, text="".join(pieces), spans=tuple(spans))


_HEAD = '[{"role": "system", "content": "'
_MIDDLE = '"}, {"role": "system", "content": "'
_USER = '"}, {"role": "user", "content": "'
_TAIL = '"}]'
_SEPARATOR = _escape(MEMORY_SEPARATOR)
_HEAD_LEN, _MIDDLE_LEN, _USER_LEN, _SEPARATOR_LEN = map(len, (_HEAD, _MIDDLE, _USER, _SEPARATOR))
_PIECES = (_HEAD, _MIDDLE, _SEPARATOR, _USER, _TAIL)


def reference_render_chat_context(
    *, system_prompt: str, memory: Sequence[tuple[str, str]], user_message: str
) -> RenderedContext:
    """The straightforward definition of :func:`render_chat_context` (tests compare the two)."""
    out = bytearray()
    spans: list[ContextSpan] = []

    def put(raw: str) -> None:
        out.extend(raw.encode("utf-8"))

    def put_part(part: str, text: str) -> None:
        start = len(out)
        put(json.dumps(text, ensure_ascii=False)[1:-1])
        spans.append(ContextSpan(part=part, start=start, end=len(out)))

    put('[{"role": "system", "content": "')
    put_part("system_prompt", system_prompt)
    put('"}, {"role": "system", "content": "')
    block_start = len(out)
    for i, (entry_id, content) in enumerate(memory):
        if i:
            put(json.dumps(MEMORY_SEPARATOR, ensure_ascii=False)[1:-1])
        put_part(f"memory:{entry_id}", content)
    spans.append(ContextSpan(part="memory", start=block_start, end=len(out)))
    put('"}, {"role": "user", "content": "')
    put_part("user", user_message)
    put('"}]')
    return RenderedContext(format=CHAT_MESSAGES_FORMAT, text=out.decode("utf-8"), spans=tuple(spans))

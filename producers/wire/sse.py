"""Server-sent events, read from a whole recorded stream (the WHATWG "event stream" grammar).

Lines end with CRLF, LF or CR; a blank line dispatches the event; a line starting with ``:`` is a
comment; ``field: value`` loses one space after the colon; ``data`` lines join with ``\\n``; an
event with no data is not dispatched. Only ``event`` and ``data`` matter to model APIs (``id`` and
``retry`` are read and dropped). A last event without its blank line is still returned, marked
``terminated=False``: a stream cut short is evidence too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["SseEvent", "parse_events"]

_LINES = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class SseEvent:
    event: str | None
    data: str
    terminated: bool = True


def parse_events(text: str) -> list[SseEvent]:
    """Every event of a recorded stream, in order."""
    events: list[SseEvent] = []
    name: str | None = None
    data: list[str] = []
    for line in _LINES.split(text):
        if not line:
            if data:
                events.append(SseEvent(name, "\n".join(data)))
            name, data = None, []
            continue
        if line.startswith(":"):
            continue
        key, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if key == "data":
            data.append(value)
        elif key == "event":
            name = value
    if data:
        events.append(SseEvent(name, "\n".join(data), terminated=False))
    return events

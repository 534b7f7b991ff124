"""The producer's time: an injectable clock and the one timestamp format captures and flags carry.

A :data:`Clock` is any callable returning a timezone-aware datetime; the recorder takes one so tests
move time instead of sleeping. :func:`format_timestamp` is how every time in a capture or a flag
event is written.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

__all__ = ["Clock", "format_timestamp", "system_clock"]

Clock = Callable[[], datetime]


def system_clock() -> datetime:
    return datetime.now(UTC)


def format_timestamp(moment: datetime) -> str:
    """ISO-8601 UTC with milliseconds and ``Z``: ``2026-07-23T13:00:00.456Z``."""
    if moment.tzinfo is None:
        raise ValueError("the clock must return timezone-aware datetimes")
    moment = moment.astimezone(UTC)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond // 1000:03d}Z"

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
    if moment.tzinfo is not UTC:
        moment = moment.astimezone(UTC)
    if type(moment) is datetime:
        # the characters of the strftime form below (whose %Y does not pad years before 1000
        # either) at a third of its cost: this runs on the agent's thread for every decision
        return "%d-%02d-%02dT%02d:%02d:%02d.%03dZ" % (  # noqa: UP031  (%-formatting is the fast one)
            moment.year,
            moment.month,
            moment.day,
            moment.hour,
            moment.minute,
            moment.second,
            moment.microsecond // 1000,
        )
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond // 1000:03d}Z"

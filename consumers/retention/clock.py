"""An injectable clock, so retention tests move time instead of sleeping.

Everything in :mod:`consumers.retention` that needs "now" takes a :class:`Clock`; production code
passes :class:`SystemClock`, tests pass :class:`FixedClock` and :meth:`~FixedClock.advance` it.
Times are always timezone-aware UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "FixedClock", "SystemClock", "as_utc"]


def as_utc(moment: datetime) -> datetime:
    """``moment`` as an aware UTC datetime (a naive datetime is taken to be UTC already)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


@runtime_checkable
class Clock(Protocol):
    """Something that tells the current time as an aware UTC datetime."""

    def now(self) -> datetime: ...


class SystemClock:
    """The wall clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def __repr__(self) -> str:
        return "SystemClock()"


class FixedClock:
    """A clock that stands still until moved (tests)."""

    def __init__(self, moment: datetime) -> None:
        self._now = as_utc(moment)

    def now(self) -> datetime:
        return self._now

    def set(self, moment: datetime) -> None:
        self._now = as_utc(moment)

    def advance(self, delta: timedelta | None = None, /, **kwargs: float) -> datetime:
        """Move forward by ``delta`` or by ``timedelta(**kwargs)`` (``advance(days=31)``); returns the new now."""
        self._now += delta if delta is not None else timedelta(**kwargs)
        return self._now

    def __repr__(self) -> str:
        return f"FixedClock({self._now.isoformat()})"

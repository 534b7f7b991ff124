"""The recorder's backlog: decisions waiting for its worker.

A :class:`queue.Queue` whose blocked ``put`` resumes when a quarter of the backlog is free, not at
every item the worker takes. When the agent outruns the worker (a consequential decision waits for
room), the stock queue wakes the agent's thread for each single free slot: every wake-up is a GIL
handoff between the two threads, and at thousands of decisions a second those handoffs cost more
CPU than the agent's own recording (measured in ``tests/benchmarks/bench_producer.py``). Woken
once per quarter, the agent records a run of decisions while the worker works through the rest.
A blocked writer also looks for room every 50 ms by itself, so a worker that frees a slot and then
stalls delays it by at most that. What waits, how long it may wait and what is dropped are unchanged.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, TypeVar

__all__ = ["Backlog"]

T = TypeVar("T")
_LOOK_AGAIN = 0.05  # s: the longest a blocked writer sleeps before it looks for room itself


class Backlog(queue.Queue[T]):
    """A bounded queue whose writers blocked on a full queue resume once ``resume_at`` or fewer
    items are left (a quarter of ``maxsize`` free; at once for a queue of fewer than 4)."""

    def __init__(self, maxsize: int) -> None:
        super().__init__(maxsize)
        self.resume_at = maxsize - max(1, maxsize // 4) if maxsize > 0 else 0
        # ``get`` notifies ``not_full`` under the queue's lock after each item: only the notices
        # that leave enough room go through. A timed-out ``put`` still wakes on its own.
        self.not_full = _RoomFor(self)


class _RoomFor(threading.Condition):
    def __init__(self, backlog: Backlog[Any]) -> None:
        super().__init__(backlog.mutex)
        self._backlog = backlog

    def wait(self, timeout: float | None = None) -> bool:
        return super().wait(_LOOK_AGAIN if timeout is None else min(timeout, _LOOK_AGAIN))

    def notify(self, n: int = 1) -> None:
        backlog = self._backlog
        if backlog.maxsize <= 0 or backlog._qsize() <= backlog.resume_at:
            super().notify(n)

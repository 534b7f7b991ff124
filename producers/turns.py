"""The recorder's worker shares the GIL with the runtime's threads: it takes turns.

CPython hands the GIL from a running thread to a waiting one only when the running thread blocks (a
sleep, I/O, C code that releases it) or once the waiter has waited the switch interval
(``sys.getswitchinterval()``, 5 ms by default; a setting of the host application, which the
recorder leaves alone). A worker sealing and encoding in Python for milliseconds would make a
runtime thread that wakes (its model call answered, its own sleep over) wait up to that long.

So the worker takes turns: between stages it calls :meth:`WorkerTurns.pause`, which, once the worker
has used ``turn`` seconds of CPU since its last rest (time spent waiting for the GIL does not count),
sleeps ``rest`` seconds. A real sleep, long enough for a waiting thread to wake and take the GIL: a
zero sleep releases the GIL too, but the worker can take it back before a waiter sleeping on another
core has woken. A thread that then keeps the GIL for a whole switch interval is computing, not
waiting on I/O; the worker's next turn is twice as long (up to ``longest``), so it keeps the share
CPython would give it, and a quick hand-back makes turns short again. With no thread waiting the
cost is the rest's wall time, no CPU: about one rest per ``turn`` of work (with Linux's default
50 µs timer slack a 20 µs sleep lasts ~85 µs), and only while the worker has more queued than it
can do.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

__all__ = ["LONGEST_TURN_SECONDS", "REST_SECONDS", "TURN_SECONDS", "WorkerTurns"]

TURN_SECONDS = 0.001
LONGEST_TURN_SECONDS = 0.005
REST_SECONDS = 0.000_02


class WorkerTurns:
    """The worker's turns (see the module docstring); used by one thread, the worker."""

    __slots__ = ("_cpu", "_since", "_sleep", "_turn", "_wall", "longest", "rest", "rests", "turn")

    def __init__(
        self,
        *,
        turn: float = TURN_SECONDS,
        longest: float = LONGEST_TURN_SECONDS,
        rest: float = REST_SECONDS,
        cpu: Callable[[], float] = time.thread_time,
        wall: Callable[[], float] = time.perf_counter,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.turn = turn
        self.longest = longest
        self.rest = rest
        self.rests = 0  # how often the worker rested (for tests and benchmarks)
        self._cpu = cpu
        self._wall = wall
        self._sleep = sleep
        self._turn = turn
        self._since = 0.0  # the worker's own CPU clock; it calls waited() when it starts

    def waited(self) -> None:
        """The worker just blocked (an empty queue): its turn starts again now."""
        self._since = self._cpu()

    def pause(self) -> None:
        """Between two stages: rest if this turn is used up."""
        if self._cpu() - self._since < self._turn:
            return
        began = self._wall()
        self._sleep(self.rest)
        kept = self._wall() - began - self.rest  # how long another thread kept the GIL
        if kept >= 0.8 * sys.getswitchinterval():
            self._turn = min(2 * self._turn, self.longest)
        else:
            self._turn = self.turn
        self.rests += 1
        self._since = self._cpu()

"""One Recorder per agent the receiver hears from, all signing with the receiver's own key; a bounded
set of them.

The agent of a decision is ``--agent-id`` when given, else the sending service's ``service.name``
resource attribute (the OpenTelemetry name for "what ran"), else ``unknown_service`` (the
SDKs' own default). A Recorder is opened on first use, from the service settings (transport, blob
store for claim checks, capture policy).

Each Recorder holds a worker thread and a transport, so the set is bounded: at most
``max_recorders`` are open (opening one more closes the one used longest ago), and one unused for
``idle_seconds`` is closed by :meth:`RecorderPool.reap` (the receiver calls it every second). A closed
one is reopened when its agent sends again. Closing flushes: nothing queued is lost.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import TYPE_CHECKING

from producers.integrations.genai_spans import Span
from producers.recorder import CaptureFailure, Recorder

if TYPE_CHECKING:
    from collections.abc import Callable

    from producers.evidence import Signer
    from producers.integrations.genai_spans import DecisionPlan
    from producers.settings import BlackboxSettings

__all__ = ["UNKNOWN_SERVICE", "RecorderPool", "agent_of", "agent_of_span"]

UNKNOWN_SERVICE = "unknown_service"
MAX_LISTED_AGENTS = 100


def agent_of_span(span: Span, fixed: str | None = None) -> str:
    if fixed:
        return fixed
    name = span.resource.get("service.name")
    return name if isinstance(name, str) and name else UNKNOWN_SERVICE


def agent_of(plan: DecisionPlan, fixed: str | None = None) -> str:
    return agent_of_span(plan.root, fixed)


class RecorderPool:
    """Recorders by agent id; callable as a :data:`~producers.integrations.genai_spans.RecorderFor`."""

    def __init__(
        self,
        settings: BlackboxSettings,
        *,
        signer: Signer,
        agent_id: str | None = None,
        on_error: Callable[[CaptureFailure], None] | None = None,
        max_recorders: int = 32,
        idle_seconds: float = 60.0,
        close_timeout: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_recorders < 1:
            raise ValueError("max_recorders must be >= 1")
        self._settings = settings
        self._signer = signer
        self._agent_id = agent_id
        self._on_error = on_error
        self._max = max_recorders
        self._idle = idle_seconds
        self._close_timeout = close_timeout
        self._clock = clock
        self._lock = threading.Lock()
        self._recorders: OrderedDict[str, tuple[Recorder, float]] = OrderedDict()  # least recent first
        self._seen: set[str] = set()  # the first MAX_LISTED_AGENTS agents heard from
        self._opened = 0  # recorders opened, reopened ones included
        self._undelivered = 0  # captures a closed recorder could not deliver

    @property
    def agent_id(self) -> str | None:
        return self._agent_id

    def __call__(self, plan: DecisionPlan) -> Recorder:
        agent = agent_of(plan, self._agent_id)
        evicted: list[Recorder] = []
        with self._lock:
            held = self._recorders.pop(agent, None)
            if held is None:
                while len(self._recorders) >= self._max:
                    evicted.append(self._recorders.popitem(last=False)[1][0])
                recorder = Recorder.from_settings(
                    self._settings, agent_id=agent, signer=self._signer, on_error=self._on_error
                )
                self._opened += 1
                if len(self._seen) < MAX_LISTED_AGENTS:
                    self._seen.add(agent)
            else:
                recorder = held[0]
            self._recorders[agent] = (recorder, self._clock())
        self._close(evicted)  # in the caller's (bounded) worker thread: a flood waits, it does not pile up
        return recorder

    def reap(self) -> int:
        """Close the recorders unused for ``idle_seconds``; returns how many."""
        cutoff = self._clock() - self._idle
        with self._lock:
            idle = [agent for agent, (_, used) in self._recorders.items() if used <= cutoff]
            closing = [self._recorders.pop(agent)[0] for agent in idle]
        self._close(closing)
        return len(closing)

    def _close(self, recorders: list[Recorder]) -> None:
        for recorder in recorders:
            if not recorder.close(self._close_timeout):
                with self._lock:
                    self._undelivered += 1

    @property
    def open_count(self) -> int:
        with self._lock:
            return len(self._recorders)

    def outstanding(self) -> int:
        """Captures queued in the open recorders and not yet delivered (the receiver's backlog)."""
        with self._lock:
            recorders = [recorder for recorder, _ in self._recorders.values()]
        return sum(recorder.stats.outstanding for recorder in recorders)

    def flush(self, timeout: float | None = None) -> bool:
        with self._lock:
            recorders = [recorder for recorder, _ in self._recorders.values()]
        return all([recorder.flush(timeout) for recorder in recorders])

    def close(self, timeout: float | None = 30.0) -> bool:
        """Close every open recorder; True if every capture, including those of recorders closed
        earlier (idle, evicted), was delivered."""
        with self._lock:
            recorders = [recorder for recorder, _ in self._recorders.values()]
            self._recorders.clear()
        closed = all([recorder.close(timeout) for recorder in recorders])
        with self._lock:
            return closed and self._undelivered == 0

    @property
    def agents(self) -> list[str]:
        """The agents heard from (the first :data:`MAX_LISTED_AGENTS`), also after :meth:`close`."""
        with self._lock:
            return sorted(self._seen)

    @property
    def opened(self) -> int:
        """Recorders opened so far (an agent reopened after an idle close counts again)."""
        with self._lock:
            return self._opened

"""Hold a trace's spans until it has arrived whole, then hand them over together.

Spans end (and are exported) children first, often in several export batches, so a decision can
only be rebuilt once its root has arrived. A trace is *complete* when a span that is a local root
(:attr:`Span.local_root`) arrives: every span a process records in a trace ends before that
trace's local root does. A trace whose local root never comes (its root lives in a process that
does not export here, an exporter that does not say whether a parent is remote) is handed over
when it has waited ``hold_seconds`` since its last span, or on :meth:`TraceBuffer.drain`.

Bounded: past ``max_spans`` held spans or ``max_bytes`` of held attribute text (:func:`span_weight`),
the traces held longest are handed over first, so spans whose root never comes cannot pile up
in memory. Thread-safe.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from producers.integrations.genai_spans.span import Span

__all__ = ["TraceBuffer", "span_weight"]

_FIXED_WEIGHT = 256  # ids, times, name and the object itself


def span_weight(span: Span) -> int:
    """About how many bytes holding ``span`` costs: its attribute text and a fixed part."""
    weight = _FIXED_WEIGHT + len(span.name)
    for key, value in span.attributes.items():
        weight += len(key) + (
            len(value)
            if isinstance(value, str | bytes)
            else 16
            if not isinstance(value, list | tuple | dict)
            else len(repr(value))
        )
    return weight


@dataclass(slots=True)
class _Held:
    spans: list[Span] = field(default_factory=list)
    last_seen: float = 0.0
    weight: int = 0


class TraceBuffer:
    """Spans in, whole traces out (as lists of spans); see the module docstring."""

    def __init__(
        self,
        *,
        hold_seconds: float = 30.0,
        max_spans: int = 100_000,
        max_bytes: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._hold = hold_seconds
        self._max = max_spans
        self._max_bytes = max_bytes
        self._clock = clock
        self._lock = threading.Lock()
        self._traces: dict[str, _Held] = {}  # insertion order = oldest first
        self._count = 0
        self._weight = 0

    def add(self, spans: Iterable[Span]) -> list[list[Span]]:
        """Hold ``spans``; returns the traces now complete, overdue or pushed out by the bound."""
        now = self._clock()
        done: set[str] = set()
        with self._lock:
            for span in spans:
                held = self._traces.pop(span.trace_id, None) or _Held()
                held.spans.append(span)
                held.last_seen = now
                if self._max_bytes is not None:
                    weight = span_weight(span)
                    held.weight += weight
                    self._weight += weight
                self._traces[span.trace_id] = held  # re-inserted: the most recently active last
                self._count += 1
                if span.local_root:
                    done.add(span.trace_id)
            out = [self._take(trace_id) for trace_id in list(self._traces) if trace_id in done]
            out.extend(self._overdue(now))
            while self._traces and (self._count > self._max or self._over_bytes()):
                out.append(self._take(next(iter(self._traces))))
        return out

    def expired(self) -> list[list[Span]]:
        """Traces that have waited ``hold_seconds`` for their root."""
        with self._lock:
            return self._overdue(self._clock())

    def drain(self) -> list[list[Span]]:
        """Every held trace (shutdown, flush)."""
        with self._lock:
            return [self._take(trace_id) for trace_id in list(self._traces)]

    @property
    def held_bytes(self) -> int:
        """The weight of the spans held (0 unless ``max_bytes`` is set)."""
        with self._lock:
            return self._weight

    def _over_bytes(self) -> bool:
        return self._max_bytes is not None and self._weight > self._max_bytes

    def __len__(self) -> int:
        with self._lock:
            return self._count

    def _overdue(self, now: float) -> list[list[Span]]:
        late = [t for t, held in self._traces.items() if now - held.last_seen >= self._hold]
        return [self._take(trace_id) for trace_id in late]

    def _take(self, trace_id: str) -> list[Span]:
        held = self._traces.pop(trace_id)
        self._count -= len(held.spans)
        self._weight -= held.weight
        return held.spans

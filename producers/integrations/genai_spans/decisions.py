"""Spans in, decisions recorded: hold each trace until it is whole, plan its decisions, record them.

Shared by the in-process exporter (:mod:`producers.integrations.otel`) and the OTLP receiver
(:mod:`consumers.otlp`). Every trace handed over is planned whole (:func:`~.plan.plan_decisions`)
before any of its decisions is recorded; recording goes through the Recorder, which never blocks
beyond its queue policy and never raises for what it is given.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from producers.integrations.genai_spans.plan import DecisionPlan, plan_decisions
from producers.integrations.genai_spans.record import record_plan
from producers.integrations.genai_spans.span import Span, kind_of
from producers.integrations.genai_spans.traces import TraceBuffer

if TYPE_CHECKING:
    from producers.recorder import Recorder

__all__ = ["RecorderFor", "SpanDecisions"]

log = logging.getLogger(__name__)

RecorderFor = Callable[[DecisionPlan], "Recorder"]
"""Which recorder a decision goes to (the receiver keeps one per agent)."""


class SpanDecisions:
    """See the module docstring. ``recorder``: one Recorder, or a :data:`RecorderFor`."""

    def __init__(
        self,
        recorder: Recorder | RecorderFor,
        *,
        consequential: bool = False,
        hold_seconds: float = 30.0,
        max_spans: int = 100_000,
        max_bytes: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._recorder_for: RecorderFor = recorder if callable(recorder) else (lambda _plan: recorder)
        self._consequential = consequential
        self._buffer = TraceBuffer(
            hold_seconds=hold_seconds, max_spans=max_spans, max_bytes=max_bytes, clock=clock
        )

    def add(self, spans: Iterable[Span]) -> list[str]:
        """Take ``spans``; record the decisions of every trace now whole (or overdue). Returns their ids."""
        # other spans are held only for their place in the tree: their attributes are dropped
        return self._record(
            self._buffer.add(s if kind_of(s) is not None else replace(s, attributes={}) for s in spans)
        )

    def expire(self) -> list[str]:
        """Record the traces that waited too long for their root."""
        return self._record(self._buffer.expired())

    def drain(self) -> list[str]:
        """Record every held trace (flush, shutdown)."""
        return self._record(self._buffer.drain())

    @property
    def held_spans(self) -> int:
        return len(self._buffer)

    @property
    def held_bytes(self) -> int:
        return self._buffer.held_bytes

    def _record(self, traces: list[list[Span]]) -> list[str]:
        plans = plan_decisions(span for trace in traces for span in trace)
        recorded = []
        for plan in plans:
            try:
                recorded.append(
                    record_plan(plan, self._recorder_for(plan), consequential=self._consequential)
                )
            except Exception:  # a last line of defence: one decision's failure must not lose the rest
                log.exception("recording decision %s from spans failed", plan.decision_id)
        return recorded

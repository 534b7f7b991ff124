"""OpenTelemetry GenAI spans into captures, in process: a ``SpanExporter`` for the agent's tracer.

::

    provider.add_span_processor(BatchSpanProcessor(BlackboxSpanExporter(recorder)))

Spans in the official GenAI conventions (``gen_ai.*``: the ``opentelemetry-instrumentation-genai-*``
packages, PydanticAI, Logfire ...) and in OpenInference (``llm.*``: Arize Phoenix, OpenInference
instrumentations) become semantic-fidelity decisions: one per root agent span, or per chat span
when there is none; ``execute_tool`` spans are tool calls, retrieved documents memory entries. See
:mod:`producers.integrations.genai_spans` for the mapping, which the OTLP receiver shares. Message
content is on the spans only when the instrumentation captures it
(``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only`` for the official ones); without
it the capture says the content is absent (null). ``SpanProcessor.on_end`` sees a read-only span,
so nothing here changes what other exporters receive.

A trace is recorded once its local root span has ended (children are often exported in earlier
batches); one whose root never comes is recorded after ``hold_seconds``, and at ``shutdown``.
Needs ``pip install 'agent-blackbox[otel]'``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

try:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
    from opentelemetry.trace import StatusCode
except ImportError as exc:  # the SDK is the otel extra
    raise ImportError(
        "blackbox's OpenTelemetry integration needs the OpenTelemetry SDK: pip install 'agent-blackbox[otel]'"
    ) from exc

from producers.integrations.genai_spans import Span, SpanDecisions

if TYPE_CHECKING:
    from producers.recorder import Recorder

__all__ = ["BlackboxSpanExporter", "span_from_sdk"]

log = logging.getLogger(__name__)


def _value(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def span_from_sdk(span: ReadableSpan) -> Span:
    """The neutral :class:`Span` of a finished SDK span."""
    context, parent = span.context, span.parent
    if context is None:
        raise ValueError(f"span {span.name!r} has no context")
    status = span.status
    error = None
    if status is not None and status.status_code is StatusCode.ERROR:
        error = status.description or "error"
    return Span(
        trace_id=format(context.trace_id, "032x"),
        span_id=format(context.span_id, "016x"),
        parent_id=None if parent is None else format(parent.span_id, "016x"),
        name=span.name,
        start_ns=span.start_time or 0,
        end_ns=span.end_time or span.start_time or 0,
        attributes={key: _value(value) for key, value in (span.attributes or {}).items()},
        local_root=parent is None or parent.is_remote,
        error=error,
        resource=dict(span.resource.attributes) if span.resource is not None else {},
    )


class BlackboxSpanExporter(SpanExporter):
    """Records GenAI spans as decisions through ``recorder`` (see the module docstring).

    ``consequential`` marks every decision consequential (full capture); otherwise the recorder's
    capture policy decides, as for any routine decision. The recorder stays the caller's: ``shutdown``
    records what is still held and flushes it, never closes it.
    """

    def __init__(
        self, recorder: Recorder, *, consequential: bool = False, hold_seconds: float = 30.0
    ) -> None:
        self._recorder = recorder
        self._decisions = SpanDecisions(recorder, consequential=consequential, hold_seconds=hold_seconds)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            self._decisions.add([span_from_sdk(span) for span in spans])
        except Exception:  # never into the tracer's worker; the spans' other exporters are unaffected
            log.exception("blackbox could not record %d spans", len(spans))
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Record the traces that waited too long for their root, and flush the recorder.

        A trace whose root has not ended yet stays held: recording it now would split one decision."""
        self._decisions.expire()
        return self._recorder.flush(timeout_millis / 1000)

    def shutdown(self) -> None:
        self._decisions.drain()
        self._recorder.flush(30.0)

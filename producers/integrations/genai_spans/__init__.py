"""GenAI spans into decisions: the span → capture mapping, pure, with no OpenTelemetry import.

Both the in-process exporter (:mod:`producers.integrations.otel`, ``agent-blackbox[otel]``) and the
OTLP receiver (``blackbox otlp``, :mod:`consumers.otlp`) turn what they receive into
:class:`~.span.Span` values and hand them to :class:`~.decisions.SpanDecisions`.

- :mod:`.span` — the neutral span value and which GenAI operation it records;
- :mod:`.gen_ai` / :mod:`.openinference` — what a span says, in each convention (:mod:`.reads`);
- :mod:`.plan` — which spans make one decision; :mod:`.traces` — wait for a trace to be whole;
- :mod:`.record` — a planned decision into the Recorder, fidelity ``semantic``;
- :mod:`.decisions` — the three together.
"""

from producers.integrations.genai_spans.decisions import RecorderFor, SpanDecisions
from producers.integrations.genai_spans.plan import DecisionPlan, decision_id_for, plan_decisions
from producers.integrations.genai_spans.record import record_plan
from producers.integrations.genai_spans.span import Span, kind_of
from producers.integrations.genai_spans.traces import TraceBuffer

__all__ = [
    "DecisionPlan",
    "RecorderFor",
    "Span",
    "SpanDecisions",
    "TraceBuffer",
    "decision_id_for",
    "kind_of",
    "plan_decisions",
    "record_plan",
]

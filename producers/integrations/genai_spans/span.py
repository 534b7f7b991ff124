"""One finished span, whatever brought it: the OTel SDK in process or an OTLP request.

:class:`Span` is the neutral value the mapping reads; :mod:`producers.integrations.otel` builds it
from an SDK ``ReadableSpan``, :mod:`consumers.otlp` from OTLP protobuf or JSON. Attribute values
are JSON-like: str, bool, int, float, lists, and (from OTLP, where an attribute may be structured)
dicts; bytes only when a sender used them.

What kind of GenAI operation a span is comes from the official conventions
(``gen_ai.operation.name``) or OpenInference (``openinference.span.kind``): :func:`kind_of`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["ABSENT", "Kind", "Span", "json_attribute", "kind_of", "number_attribute", "text_attribute"]

Kind = Literal["agent", "chat", "tool", "retrieval"]

AGENT_OPERATIONS = frozenset({"invoke_agent", "invoke_workflow"})
CHAT_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
_OPENINFERENCE_KINDS: Mapping[str, Kind] = {
    "AGENT": "agent",
    "LLM": "chat",
    "TOOL": "tool",
    "RETRIEVER": "retrieval",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Span:
    """A finished span. Ids are lowercase hex (trace 32, span 16 digits); times in Unix nanoseconds.

    ``local_root``: the first span of its trace in the process that sent it (no parent, or a parent
    in another process); its trace has arrived whole once it is here. ``error``: the status
    description (or ``"error"``) when the span's status is ERROR, else None.
    """

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start_ns: int
    end_ns: int
    attributes: Mapping[str, Any]
    local_root: bool
    error: str | None = None
    resource: Mapping[str, Any] = field(default_factory=dict)

    @property
    def duration_ms(self) -> int:
        return max(0, round((self.end_ns - self.start_ns) / 1_000_000))


def kind_of(span: Span) -> Kind | None:
    """The GenAI operation ``span`` records, or None when it is not one."""
    attrs = span.attributes
    operation = attrs.get("gen_ai.operation.name")
    if operation in AGENT_OPERATIONS:
        return "agent"
    if operation in CHAT_OPERATIONS:
        return "chat"
    if operation == "execute_tool":
        return "tool"
    if operation == "retrieval":
        return "retrieval"
    kind = attrs.get("openinference.span.kind")
    if isinstance(kind, str) and kind.upper() in _OPENINFERENCE_KINDS:
        return _OPENINFERENCE_KINDS[kind.upper()]
    if "gen_ai.retrieval.documents" in attrs or "retrieval.documents.0.document.id" in attrs:
        return "retrieval"
    return None


def text_attribute(attrs: Mapping[str, Any], *keys: str) -> str | None:
    """The first of ``keys`` holding a string."""
    for key in keys:
        value = attrs.get(key)
        if isinstance(value, str):
            return value
    return None


def number_attribute(attrs: Mapping[str, Any], key: str) -> int | float | None:
    value = attrs.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


_ABSENT = object()


def json_attribute(attrs: Mapping[str, Any], key: str, problems: list[str]) -> Any:
    """A structured attribute: a JSON string parsed, or a structured (OTLP) value as is.

    Returns :data:`ABSENT` when the span does not carry ``key``; a string that is not JSON is a
    problem (named with the key) and reads as absent.
    """
    if key not in attrs:
        return ABSENT
    value = attrs[key]
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError as exc:
            problems.append(f"span attribute {key} is not JSON ({exc}); read as absent")
            return ABSENT
    if isinstance(value, list | dict):
        return value
    problems.append(f"span attribute {key} is a {type(value).__name__}, not JSON; read as absent")
    return ABSENT


ABSENT: Any = _ABSENT
"""What :func:`json_attribute` returns for an attribute the span does not carry (or cannot be read)."""

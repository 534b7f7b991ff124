"""Which spans make one decision, and what each says: pure, no I/O, no OpenTelemetry import.

Rules, per trace:

* One decision per **root agent span**: an agent span (``gen_ai.operation.name`` ``invoke_agent`` or
  ``invoke_workflow``, OpenInference kind ``AGENT``) with no agent span above it. Every GenAI span
  below it belongs to it (a nested agent is part of its caller's decision).
* Outside any agent span, one decision per **chat span** that has no chat span above it (a
  framework's LLM span wrapping an instrumented client's span is one call, read from the outer one).
* Tool and retrieval spans outside any agent span belong to the chat decision they fed: the first
  chat span of the trace that starts after they end, else the last one before them. With no chat
  span in the trace they make no decision (they are not a model's decision).
* The model calls of a decision are its chat spans with no chat span between them and the root,
  in start order; tool calls are its ``execute_tool`` spans; memory entries its retrieved documents.

The decision id is derived from the root span (a ULID: the root's start time, then 80 bits of
sha256 over trace and span id), so the same spans always give the same decision.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from producers.integrations.genai_spans import gen_ai, openinference
from producers.integrations.genai_spans.reads import AgentRead, ChatRead, DocumentRead, ToolRead
from producers.integrations.genai_spans.span import Kind, Span, kind_of

__all__ = ["DecisionPlan", "decision_id_for", "plan_decisions"]

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


@dataclass(frozen=True, slots=True, kw_only=True)
class DecisionPlan:
    """One decision rebuilt from spans: its root, and what its spans say (see the module docstring)."""

    decision_id: str
    root: Span
    agent: AgentRead | None
    calls: tuple[ChatRead, ...]
    tools: tuple[ToolRead, ...]
    documents: tuple[DocumentRead, ...]
    problems: tuple[str, ...]


def decision_id_for(span: Span) -> str:
    """``dec_`` + a ULID from the span's start (ms) and sha256(trace id, span id)."""
    digest = hashlib.sha256(f"{span.trace_id}:{span.span_id}".encode("ascii", "replace")).digest()
    value = ((span.start_ns // 1_000_000) << 80) | int.from_bytes(digest[:10], "big")
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "dec_" + "".join(reversed(chars))


def _official(span: Span) -> bool:
    return "gen_ai.operation.name" in span.attributes


def read_chat(span: Span) -> ChatRead:
    return gen_ai.read_chat(span) if _official(span) else openinference.read_chat(span)


def read_agent(span: Span) -> AgentRead:
    return gen_ai.read_agent(span) if _official(span) else openinference.read_agent(span)


def read_tool(span: Span) -> ToolRead:
    return gen_ai.read_tool(span) if _official(span) else openinference.read_tool(span)


def read_documents(span: Span, problems: list[str]) -> list[DocumentRead]:
    return gen_ai.read_documents(span, problems) or openinference.read_documents(span, problems)


class _Trace:
    """One trace's spans, their kinds and parent chains."""

    def __init__(self, spans: Sequence[Span]) -> None:
        self.spans = sorted(spans, key=lambda s: (s.start_ns, s.span_id))
        self.by_id = {s.span_id: s for s in self.spans}
        self.kinds: dict[str, Kind | None] = {s.span_id: kind_of(s) for s in self.spans}

    def chain(self, span: Span) -> list[Span]:
        """``span`` and its ancestors present here, nearest first (a cycle stops the walk)."""
        out, seen = [span], {span.span_id}
        parent = span.parent_id
        while parent is not None and parent in self.by_id and parent not in seen:
            seen.add(parent)
            out.append(self.by_id[parent])
            parent = self.by_id[parent].parent_id
        return out

    def outermost(self, chain: Iterable[Span], kind: Kind) -> Span | None:
        found = None
        for span in chain:
            if self.kinds[span.span_id] == kind:
                found = span
        return found


def _plan_trace(spans: Sequence[Span]) -> list[DecisionPlan]:
    trace = _Trace(spans)
    members: dict[str, list[Span]] = {}
    roots: dict[str, Span] = {}
    loose: list[Span] = []
    for span in trace.spans:
        kind = trace.kinds[span.span_id]
        if kind is None:
            continue
        chain = trace.chain(span)
        root = trace.outermost(chain, "agent")
        if root is None and kind == "chat":
            root = trace.outermost(chain, "chat")
        if root is None:
            loose.append(span)
            continue
        roots[root.span_id] = root
        members.setdefault(root.span_id, []).append(span)
    chat_roots = [r for r in roots.values() if trace.kinds[r.span_id] == "chat"]
    for span in loose:  # tool / retrieval spans outside any agent: the chat call they fed
        after = [r for r in chat_roots if r.start_ns >= span.end_ns]
        before = [r for r in chat_roots if r.start_ns < span.end_ns]
        target = (
            min(after, key=lambda r: r.start_ns)
            if after
            else max(before, key=lambda r: r.start_ns, default=None)
        )
        if target is not None:
            members[target.span_id].append(span)
    plans = []
    for root_id, root in roots.items():
        plans.append(_plan(trace, root, sorted(members[root_id], key=lambda s: (s.start_ns, s.span_id))))
    return sorted(plans, key=lambda p: (p.root.start_ns, p.root.span_id))


def _plan(trace: _Trace, root: Span, spans: Sequence[Span]) -> DecisionPlan:
    problems: list[str] = []
    agent = read_agent(root) if trace.kinds[root.span_id] == "agent" else None
    calls, tools, documents = [], [], []
    for span in spans:
        kind = trace.kinds[span.span_id]
        if kind == "chat":
            chain = trace.chain(span)
            above = chain[1 : next(i for i, s in enumerate(chain) if s.span_id == root.span_id) + 1]
            if span is root or not any(trace.kinds[s.span_id] == "chat" for s in above):
                calls.append(read_chat(span))
        elif kind == "tool":
            tools.append(read_tool(span))
        elif kind == "retrieval":
            found = read_documents(span, problems)
            if not found:  # the working set is unknown, not empty: say so
                problems.append(f"retrieval span {span.name!r} carries no documents (content capture off?)")
            documents.extend(found)
    for call in calls:
        problems.extend(call.problems)
    if agent is not None:
        problems.extend(p for p in agent.model.problems if p not in problems)
    return DecisionPlan(
        decision_id=decision_id_for(root),
        root=root,
        agent=agent,
        calls=tuple(calls),
        tools=tuple(tools),
        documents=tuple(documents),
        problems=tuple(problems),
    )


def plan_decisions(spans: Iterable[Span]) -> list[DecisionPlan]:
    """The decisions in ``spans`` (any number of traces), by trace then root start time."""
    traces: dict[str, list[Span]] = {}
    for span in spans:
        traces.setdefault(span.trace_id, []).append(span)
    return [plan for trace_id in traces for plan in _plan_trace(traces[trace_id])]

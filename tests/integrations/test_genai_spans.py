"""The span → decision rules of ``producers.integrations.genai_spans`` on hand-built spans (no SDK)."""

from __future__ import annotations

import json
from typing import Any

from producers.integrations.genai_spans import Span, TraceBuffer, plan_decisions

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def span(span_id: str, parent: str | None, start: int, end: int, **attributes: Any) -> Span:
    return Span(
        trace_id=TRACE,
        span_id=span_id.rjust(16, "0"),
        parent_id=None if parent is None else parent.rjust(16, "0"),
        name=span_id,
        start_ns=start,
        end_ns=end,
        attributes={k.replace("__", "."): v for k, v in attributes.items()},
        local_root=parent is None,
    )


def chat(span_id: str, parent: str | None, start: int, end: int, text: str, **more: Any) -> Span:
    messages = json.dumps([{"role": "user", "parts": [{"type": "text", "content": text}]}])
    return span(
        span_id,
        parent,
        start,
        end,
        gen_ai__operation__name="chat",
        gen_ai__request__model="m",
        gen_ai__input__messages=messages,
        **more,
    )


def test_a_loose_retrieval_belongs_to_the_chat_call_it_fed_and_nested_chat_spans_are_one_call() -> None:
    docs = json.dumps([{"id": "d1", "score": 0.5}])
    spans = [
        span("1", None, 0, 100),  # a plain request span, not GenAI
        span("2", "1", 1, 2, gen_ai__operation__name="retrieval", gen_ai__retrieval__documents=docs),
        chat("3", "1", 3, 10, "first"),
        chat("4", "3", 4, 9, "inner"),  # an instrumented client's span inside a framework's LLM span
        chat("5", "1", 20, 30, "second"),
    ]
    first, second = plan_decisions(spans)
    assert [c.span.name for c in first.calls] == ["3"]
    assert [d.id for d in first.documents] == ["d1"]
    assert [c.span.name for c in second.calls] == ["5"] and second.documents == ()
    assert first.decision_id != second.decision_id


def test_an_unreadable_content_attribute_is_a_named_problem_not_an_invention() -> None:
    (plan,) = plan_decisions(
        [span("1", None, 0, 5, gen_ai__operation__name="chat", gen_ai__input__messages="{oops")]
    )
    assert plan.calls[0].messages is None
    assert any("gen_ai.input.messages is not JSON" in p for p in plan.problems)


def test_a_trace_is_handed_over_when_its_root_arrives_or_when_it_waited_too_long() -> None:
    now = [0.0]
    buffer = TraceBuffer(hold_seconds=10, clock=lambda: now[0])
    assert buffer.add([chat("2", "1", 1, 2, "x")]) == []
    assert len(buffer) == 1
    (whole,) = buffer.add([span("1", None, 0, 3)])
    assert [s.name for s in whole] == ["2", "1"]
    orphan = Span(  # its root lives in a process that does not export here
        trace_id="f" * 32,
        span_id="9".rjust(16, "0"),
        parent_id="8".rjust(16, "0"),
        name="9",
        start_ns=1,
        end_ns=2,
        attributes={},
        local_root=False,
    )
    assert buffer.add([orphan]) == []
    now[0] = 10.0
    assert buffer.expired() == [[orphan]]
    assert len(buffer) == 0

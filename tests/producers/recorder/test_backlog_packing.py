"""Decisions waiting in a deep backlog are packed (DecisionBuilder._pack): the capture is the same to
the byte, the GC tracks five objects per waiting decision instead of ~27, and a shallow backlog, or a
value marshal will not write, leaves the decision as it is."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from recorder_testdata import KeptTransport, StepClock, configure, make_content, new_signer, record, trust_for

from producers import recorder as recorder_module
from producers.decision import DecisionBuilder
from producers.evidence import verify_capture
from producers.policy import CapturePolicy
from producers.recorder import Recorder
from schemas.codec import decode


def _strict(value: Any) -> Any:
    """The value with every node's exact type beside it: equal only when types, order and values are."""
    if isinstance(value, dict):
        return ("dict", [(_strict(k), _strict(v)) for k, v in value.items()])
    if isinstance(value, list | tuple):
        return (type(value).__name__, [_strict(v) for v in value])
    return (type(value).__name__, repr(value))


def _unqueued(snapshot: bool = True) -> Recorder:
    rec = Recorder(
        agent_id="agt_pack",
        transport=KeptTransport(),
        signer=new_signer(),
        clock=StepClock(),
        snapshot=snapshot,
    )
    configure(rec)
    rec._submit_decision = lambda builder: None  # type: ignore[method-assign]  # kept here, not queued
    return rec


def _to_capture_both_ways(builder: DecisionBuilder) -> tuple[dict[str, Any], dict[str, Any]]:
    before = _strict(builder.to_capture())
    assert builder._pack() is True
    assert builder._pack() is False  # once
    assert builder._packed is not None and builder._memory is None  # really folded away
    return before, _strict(builder.to_capture())


@pytest.fixture
def rec() -> Iterator[Recorder]:
    rec = _unqueued()
    yield rec
    rec.close()


def test_a_packed_decision_makes_the_same_capture(rec: Recorder) -> None:
    for seed in range(6):
        builder = record(rec, make_content(3_000 + 4_000 * seed, seed=seed), consequential=seed % 2 == 0)
        before, after = _to_capture_both_ways(builder)
        assert after == before


# Values as a runtime gives them, with the edges marshal must carry exactly: -0.0 and 0.0, 1 and 1.0
# and True, lone surrogates, every plane, empty containers; and, kept as given without snapshots,
# what JSON would not carry (tuples, integer keys, bytes)
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([0.0, -0.0, 1, 1.0, True, 5e-324])
    | st.text(st.characters(codec=None, exclude_categories=()), max_size=40)
    | st.binary(max_size=4)
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=8), inner, max_size=5)
        | st.dictionaries(st.integers(-3, 3), inner, max_size=2)
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(request=_values, tool_input=_values, tool_output=_values, external=_values, memory=st.text())
def test_any_recorded_values_come_back_exactly(
    request: Any, tool_input: Any, tool_output: Any, external: Any, memory: str
) -> None:
    for snapshot in (True, False):
        rec = _unqueued(snapshot=snapshot)
        shared = [external, external]  # one object twice: marshal keeps the sharing
        with rec.decision(
            request={"r": request, "shared": shared}, decision_id="01J0000000000000000000PACK"
        ) as d:
            d.add_memory(entry_id="mem_1", tier="hot", content=memory, provenance={"writerId": "w"})
            d.render_context(user_message=memory)
            d.add_tool_call(name="t", input={"i": tool_input}, output={"o": tool_output}, latency_ms=1)
            d.observe_external(key="k", value=external)
            d.finish(output=memory, reasoning=[memory], outcome="success")
        before, after = _to_capture_both_ways(d)
        assert after == before
        rec.close()


class Opaque:
    pass


def test_a_value_marshal_will_not_write_leaves_the_decision_as_it_is() -> None:
    rec = _unqueued(snapshot=False)  # without snapshots the runtime's own objects are kept
    given = {"x": Opaque()}
    with rec.decision(request=given) as d:
        d.finish(output="done")
    assert d._pack() is False
    assert d._packed is None and d._request is given
    assert d.to_capture()["input"]["requestPayload"] is given
    rec.close()


def test_an_unfinished_decision_is_never_packed(rec: Recorder) -> None:
    d = rec.decision(request={"a": 1})
    assert d._pack() is False and d._packed is None
    d.finish(output="done")


def _tracked() -> int:
    gc.collect()
    return len(gc.get_objects())


def test_a_deep_backlog_holds_packed_decisions_and_delivers_them_verified() -> None:
    transport = KeptTransport()
    signer = new_signer()
    rec = Recorder(
        agent_id="agt_pack",
        transport=transport,
        signer=signer,
        policy=CapturePolicy(sample_one_in=0),
        clock=StepClock(),
        consequential_wait=30.0,
    )
    configure(rec)
    hold, took_first = threading.Event(), threading.Event()
    process = rec._process

    def held(item: Any) -> None:
        took_first.set()
        hold.wait(30)
        process(item)

    rec._process = held  # type: ignore[method-assign]
    contents = [make_content(4_000, seed=seed) for seed in range(4)]
    try:
        first = record(rec, contents[0], consequential=True)  # the worker takes it and is held
        assert took_first.wait(10)
        shallow = [
            record(rec, contents[i % 4], consequential=True) for i in range(recorder_module.PACK_BEHIND)
        ]
        assert all(b._packed is None for b in shallow)  # a shallow backlog costs the agent nothing
        before = _tracked()
        deep = [record(rec, contents[i % 4], consequential=True) for i in range(300)]
        per_decision = (_tracked() - before) / len(deep)
        assert all(b._packed is not None for b in deep)
        # the builder, its attribute dict, its problem and model-call lists and its lock (27 unpacked)
        assert per_decision <= 6, per_decision
        del deep, shallow
        hold.set()
        assert rec.flush(60)
    finally:
        hold.set()
        rec.close(5)
    assert len(transport.sent) == 1 + recorder_module.PACK_BEHIND + 300 and rec.stats.failed == 0
    trust = trust_for(signer)
    for data in transport.sent:
        capture = decode(data).value
        verify_capture(capture, trust)
        entries = capture["memoryState"]["workingSetEntries"]
        assert [e["entryId"] for e in entries] == [f"mem_{i:02d}" for i in range(4)]
    assert first.decision_id == decode(transport.sent[0]).value["decisionId"]


def _sent(pack_behind: int, monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    monkeypatch.setattr(recorder_module, "PACK_BEHIND", pack_behind)
    transport = KeptTransport()
    rec = Recorder(
        agent_id="agt_pack",
        transport=transport,
        signer=_SIGNER,
        runtime_id="rt_pack",
        clock=StepClock(),
        policy=CapturePolicy(sample_one_in=0),
    )
    configure(rec)
    for seed in range(8):
        record(
            rec,
            make_content(2_000 + 3_000 * seed, seed=seed),
            decision_id=f"01J00000000000000000PACK{seed:02d}",
        )
        # the worker reads the same step clock (the flight recorder's hold time): let it finish each
        # decision before the next one reads the clock, so both runs see the same times
        assert rec.flush(30)
    rec.close()
    return transport.sent


_SIGNER = new_signer()


def test_the_sealed_signed_bytes_are_the_same_packed_or_not(monkeypatch: pytest.MonkeyPatch) -> None:
    unpacked = _sent(10**9, monkeypatch)  # never packed
    packed = _sent(0, monkeypatch)  # every decision packed, even into an empty backlog
    assert len(packed) == 8 and packed == unpacked

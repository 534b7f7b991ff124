"""Values the recorder cannot record as given never raise in the agent's thread (issue 8, item 9).

Every public method that takes the runtime's values is fed a cycle, nesting 550 and 5000 deep, a
set, bytes, an object, NaN and an integer beyond 2**53: the caller never sees an exception,
``on_error`` is called once with an :class:`Unrecordable` error naming the path, ``stats`` counts
it, and the capture still reaches the spool, verifies, and holds a marker naming the path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from recorder_testdata import StepClock, configure, new_signer, trust_for

from producers.evidence import Signer, TrustStore, verify_capture
from producers.policy import CapturePolicy
from producers.recorder import CaptureFailure, Recorder
from producers.transports.spool.files import read_spool
from producers.transports.spool.sender import SpoolTransport
from producers.unrecordable import MARKER, MARKER_KEY, MAX_DEPTH
from schemas.codec import decode
from schemas.errors import Unrecordable


def _cycle() -> dict[str, Any]:
    x: dict[str, Any] = {}
    x["me"] = x
    return x


def _nested(depth: int) -> dict[str, Any]:
    root: dict[str, Any] = {}
    current = root
    for _ in range(depth):
        current["a"] = {}
        current = current["a"]
    return root


class Opaque:
    pass


# value given under the key "bad", and what the marker says (``{slot}`` is the field path)
BAD_VALUES: dict[str, tuple[Callable[[], Any], str]] = {
    "cycle": (_cycle, "cycle (the value contains itself) at {slot}.bad.me"),
    "depth-550": (lambda: _nested(550), f"nested deeper than {MAX_DEPTH} levels at {{slot}}.bad.a.a.a"),
    "depth-5000": (lambda: _nested(5000), f"nested deeper than {MAX_DEPTH} levels at {{slot}}.bad.a.a.a"),
    "set": (lambda: {1, 2}, "set is not JSON at {slot}.bad"),
    "bytes": (lambda: b"\x00raw", "bytes is not JSON at {slot}.bad"),
    "object": (Opaque, "Opaque is not JSON at {slot}.bad"),
    "nan": (lambda: float("nan"), "nan is not JSON at {slot}.bad"),
    "huge-int": (lambda: 2**64, "an integer beyond ±(2**53 - 1) (carry it as a string) at {slot}.bad"),
}

# how each method is given a JSON value, and the capture field path it lands in
Record = Callable[[Recorder, Any], None]


def _via_request(rec: Recorder, value: Any) -> None:
    rec.decision(request=value, consequential=True).finish(output="ok")


def _via_tool_input(rec: Recorder, value: Any) -> None:
    d = rec.decision(request={"q": 1}, consequential=True)
    d.add_tool_call(name="t", input=value, output={"fine": True}, latency_ms=3)
    d.finish(output="ok")


def _via_tool_output(rec: Recorder, value: Any) -> None:
    with rec.decision(request={"q": 1}, consequential=True) as d:
        d.add_tool_call(name="t", input={}, output=value)
        d.finish(output="ok")


def _via_external(rec: Recorder, value: Any) -> None:
    d = rec.decision(request={"q": 1}, consequential=True)
    d.observe_external(key="customer.balance", value=value, source="ledger")
    d.finish(output="ok")


def _via_tool_schema(rec: Recorder, value: Any) -> None:
    d = rec.decision(request={"q": 1}, consequential=True)
    d.configure(model="m", system_prompt="S", tool_schema=value)
    d.finish(output="ok")


def _via_sampling(rec: Recorder, value: Any) -> None:
    d = rec.decision(request={"q": 1}, consequential=True)
    d.configure(model="m", sampling=value)
    d.finish(output="ok")


def _via_record(rec: Recorder, value: Any) -> None:
    assert rec.record(_assembled(value))


SLOTS: dict[str, tuple[Record, str]] = {
    "decision(request)": (_via_request, "input.requestPayload"),
    "add_tool_call(input)": (_via_tool_input, "executionTrace.toolCalls[0].input"),
    "add_tool_call(output)": (_via_tool_output, "executionTrace.toolCalls[0].output"),
    "observe_external(value)": (_via_external, "externalState.observableExternals[0].capturedValue"),
    "configure(tool_schema)": (_via_tool_schema, "agentConfiguration.toolSchemaJson"),
    "configure(sampling)": (_via_sampling, "agentConfiguration.samplingParameters"),
    "record(capture)": (_via_record, "input.requestPayload"),
}


def _assembled(value: Any) -> dict[str, Any]:
    return {
        "version": "replay/v1",
        "decisionId": "dec_assembled",
        "agentId": "agt_1",
        "capturedAt": "2026-07-23T13:00:00.456Z",
        "captureLevel": "full",
        "consequential": {"flagged": True, "reason": "test"},
        "outcome": {"status": "success", "reason": None},
        "input": {"requestPayload": value},
        "agentConfiguration": {"modelIdentifier": "m", "samplingParameters": {}},
        "memoryState": {"workingSetEntries": []},
        "executionTrace": {"toolCalls": []},
        "externalState": {"observableExternals": []},
        "replayPolicy": {"retentionDays": 365, "piiRedacted": False, "replayAccessScope": "operator"},
        "signature": {"algorithm": "ed25519", "publicKeyRef": None, "signatureBytes": None},
    }


@pytest.fixture
def signer() -> Signer:
    return new_signer("did:test:agent")


@pytest.fixture
def trust(signer: Signer) -> TrustStore:
    return trust_for(signer)


@pytest.fixture
def failures() -> list[CaptureFailure]:
    return []


def _recorder(
    tmp_path: Path, signer: Signer, on_error: Callable[[CaptureFailure], None], *, snapshot: bool = True
) -> Recorder:
    rec = Recorder(
        agent_id="agt_1",
        transport=SpoolTransport(tmp_path / "spool", linger_ms=5),
        signer=signer,
        policy=CapturePolicy(sample_one_in=0),
        on_error=on_error,
        clock=StepClock(),
        snapshot=snapshot,
    )
    configure(rec)
    return rec


@pytest.fixture
def rec(tmp_path: Path, signer: Signer, failures: list[CaptureFailure]) -> Iterator[Recorder]:
    recorder = _recorder(tmp_path, signer, failures.append)
    yield recorder
    recorder.close(5)


def _emitted(tmp_path: Path) -> list[dict[str, Any]]:
    return [decode(r.value).value for r in read_spool(tmp_path / "spool")]


def _markers(value: Any) -> list[str]:
    found, stack = [], [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if set(item) == {MARKER_KEY}:
                found.append(item[MARKER_KEY])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _field(capture: dict[str, Any], path: str) -> Any:
    value: Any = capture
    for part in path.replace("[", ".[").split("."):
        value = value[int(part[1:-1])] if part.startswith("[") else value[part]
    return value


def _only_capture(tmp_path: Path, rec: Recorder, trust: TrustStore) -> dict[str, Any]:
    assert rec.flush(10)
    [capture] = _emitted(tmp_path)
    verify_capture(capture, trust)  # signed over the markers, like any other content
    return capture


@pytest.mark.parametrize("bad", sorted(BAD_VALUES))
@pytest.mark.parametrize("slot_name", sorted(SLOTS))
def test_unrecordable_value_is_marked_reported_counted_and_the_capture_still_verifies(
    tmp_path: Path,
    rec: Recorder,
    trust: TrustStore,
    failures: list[CaptureFailure],
    slot_name: str,
    bad: str,
) -> None:
    method, slot = SLOTS[slot_name]
    make, says = BAD_VALUES[bad]
    expected = says.format(slot=slot)

    method(rec, {"ok": [1, "two"], "bad": make()})  # must not raise

    capture = _only_capture(tmp_path, rec, trust)
    stats = rec.stats
    assert (stats.enqueued, stats.delivered, stats.failed, stats.unrecordable) == (1, 1, 0, 1)
    [failure] = failures
    assert failure.stage == "record" and failure.partial and failure.kind == "capture"
    assert isinstance(failure.error, Unrecordable)
    assert expected in str(failure.error)
    assert failure.decision_id == capture["decisionId"]
    content = _field(capture, slot)
    assert content["ok"] == [1, "two"]  # what could be recorded was
    [mark] = _markers(content)
    assert mark.startswith(expected)
    assert MARKER_KEY in capture["outcome"]["reason"] and expected in capture["outcome"]["reason"]


def test_the_issue_reproduction_cycle_and_depth_in_request(
    tmp_path: Path, rec: Recorder, trust: TrustStore, failures: list[CaptureFailure]
) -> None:
    x: dict[str, Any] = {}
    x["me"] = x
    rec.decision(request=x).finish(output="a")
    rec.decision(request=_nested(550)).finish(output="b")
    assert rec.flush(10)
    assert rec.stats.enqueued == 2 and rec.stats.delivered == 2 and rec.stats.unrecordable == 2
    assert len(failures) == 2
    assert "cycle (the value contains itself) at input.requestPayload.me" in str(failures[0].error)
    for capture in _emitted(tmp_path):  # routine, so structured-only: the reason still names it
        verify_capture(capture, trust)
        assert capture["captureLevel"] == "structured-only"
        assert "blackbox.unrecordable: " in capture["outcome"]["reason"]


def test_without_snapshots_the_worker_repairs_what_sealing_refused(
    tmp_path: Path, signer: Signer, trust: TrustStore
) -> None:
    failures: list[CaptureFailure] = []
    rec = _recorder(tmp_path, signer, failures.append, snapshot=False)
    rec.decision(request={"bad": _cycle()}, consequential=True).finish(output="a")
    rec.decision(request={"bad": _nested(5000)}, consequential=True).finish(output="b")
    assert rec.close(10)
    first, second = _emitted(tmp_path)
    verify_capture(first, trust)
    verify_capture(second, trust)
    assert _markers(first["input"]["requestPayload"]) == [
        "cycle (the value contains itself) at input.requestPayload.bad.me"
    ]
    [deep] = _markers(second["input"]["requestPayload"])
    assert deep.startswith(f"nested deeper than {MAX_DEPTH} levels at input.requestPayload.bad.a")
    assert [f.stage for f in failures] == ["record", "record"]


def test_recorder_configure_reports_once_and_every_capture_names_it(
    tmp_path: Path, rec: Recorder, trust: TrustStore, failures: list[CaptureFailure]
) -> None:
    config = rec.configure(model="m", system_prompt="S", tool_schema={"tools": [{1, 2}]})
    assert [f.decision_id for f in failures] == [None]
    assert "set is not JSON at agentConfiguration.toolSchemaJson.tools[0]" in str(failures[0].error)
    assert config.unrecordable and rec.stats.unrecordable == 1
    rec.decision(request={"q": 1}, consequential=True).finish(output="ok")
    capture = _only_capture(tmp_path, rec, trust)
    assert _markers(capture["agentConfiguration"]["toolSchemaJson"]) == [
        "set is not JSON at agentConfiguration.toolSchemaJson.tools[0]"
    ]
    assert "toolSchemaJson.tools[0]" in capture["outcome"]["reason"]
    assert len(failures) == 1  # reported by configure, not again per decision


def test_scalar_arguments_of_every_method(
    tmp_path: Path, rec: Recorder, trust: TrustStore, failures: list[CaptureFailure]
) -> None:
    d = rec.decision(
        request={"q": 1}, origin_user_id=42, decision_id=b"id", consequential=True, consequential_reason=1.5
    )
    d.add_memory(
        entry_id=7,  # type: ignore[arg-type]
        tier="hot",
        content=b"not text",  # type: ignore[arg-type]
        provenance="crm",  # type: ignore[arg-type]
        score=float("nan"),
        position="first",  # type: ignore[arg-type]
    )
    d.add_memory(entry_id="m2", tier="warm", content="fine")
    rendered = d.render_context(user_message=b"hi")  # type: ignore[arg-type]
    assert rendered.messages()[-1] == {"role": "user", "content": ""}
    d.add_tool_call(name=None, input={}, output={}, latency_ms="slow", sequence="x")  # type: ignore[arg-type]
    d.observe_external(key="k", value=1, captured_at=object())  # type: ignore[arg-type]
    d.set_context_tokens("many")  # type: ignore[arg-type]
    decision_id = d.finish(
        output=Opaque(),  # type: ignore[arg-type]
        stop_reason="exploded",  # type: ignore[arg-type]
        reasoning=5,  # type: ignore[arg-type]
        outcome="great",  # type: ignore[arg-type]
        total_latency_ms=float("inf"),  # type: ignore[arg-type]
    )
    capture = _only_capture(tmp_path, rec, trust)
    assert capture["decisionId"] == decision_id and decision_id.startswith("dec_")
    entry = capture["memoryState"]["workingSetEntries"][0]
    assert entry["entryId"] == MARKER and entry["renderedContent"] is None and entry["retrievalScore"] is None
    assert capture["executionTrace"]["toolCalls"][0]["toolName"] == MARKER
    assert capture["executionTrace"]["finalOutputText"] is None
    assert capture["outcome"]["status"] == "unknown"
    [failure] = failures
    message = str(failure.error)
    for path in ("decisionId", "input.originUserId", "memoryState.workingSetEntries[0].entryId"):
        assert path in message
    assert "and " in message and "more" in message  # long lists are summarized


def test_no_configuration_is_recorded_as_a_marker_not_lost(
    tmp_path: Path, signer: Signer, trust: TrustStore
) -> None:
    failures: list[CaptureFailure] = []
    rec = Recorder(
        agent_id="agt_1",
        transport=SpoolTransport(tmp_path / "spool"),
        signer=signer,
        on_error=failures.append,
    )
    rec.decision(request={"q": 1}).finish(output="x")
    assert rec.close(10)
    [capture] = _emitted(tmp_path)
    verify_capture(capture, trust)
    assert capture["agentConfiguration"]["modelIdentifier"] == MARKER
    assert "no model configuration" in str(failures[0].error)


def test_record_and_flag_of_the_wrong_shape_fail_without_raising(
    rec: Recorder, failures: list[CaptureFailure]
) -> None:
    assert rec.record([1, 2]) is False  # type: ignore[arg-type]
    assert rec.record({"not": "a capture"}) is True  # queued; the worker cannot build it
    assert rec.flag_consequential(5, "why") is False  # type: ignore[arg-type]
    assert rec.flush(5)
    assert rec.stats.failed == 3 and rec.stats.outstanding == 0
    assert sorted((f.kind, f.stage) for f in failures) == [
        ("capture", "build"),
        ("capture", "record"),
        ("flag", "record"),
    ]


@pytest.mark.parametrize("where", ["worker", "caller"])
def test_on_error_that_raises_never_reaches_the_agent(
    tmp_path: Path, signer: Signer, trust: TrustStore, where: str
) -> None:
    calls: list[CaptureFailure] = []

    def explode(failure: CaptureFailure) -> None:
        calls.append(failure)
        raise RuntimeError("callback bug")

    rec = _recorder(tmp_path, signer, explode)
    if where == "caller":  # configure reports on the caller's thread
        rec.configure(model="m", tool_schema=_cycle())
    rec.decision(request=_cycle(), consequential=True).finish(output="ok")
    assert rec.close(10)
    assert len(calls) == 2 if where == "caller" else len(calls) == 1
    assert rec.stats.on_error_raised == len(calls) and rec.stats.delivered == 1
    verify_capture(_emitted(tmp_path)[0], trust)


def test_an_exception_whose_str_raises_does_not_replace_the_agents_own(rec: Recorder) -> None:
    class Nasty(Exception):
        def __str__(self) -> str:
            raise ValueError("no str")

    with pytest.raises(Nasty), rec.decision(request=None):
        raise Nasty
    assert rec.flush(5) and rec.stats.delivered == 1

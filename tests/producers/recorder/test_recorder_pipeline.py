"""The Recorder without a broker: builder API, background pipeline, backpressure, failures, claim check.

Delivery goes through the real SpoolTransport (or small fakes that misbehave on purpose); every
emitted capture is decoded with the real codec and verified with the real evidence module.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from recorder_testdata import NullTransport, StepClock, configure, make_content, new_signer, record, trust_for

from producers.blobstore import LocalBlobStore
from producers.claimcheck import resolve_claim_check
from producers.context import render_chat_context
from producers.evidence import (
    FLAG_PAYLOAD_TYPE,
    Signer,
    TrustStore,
    canonical_json,
    verify_capture,
    verify_event,
)
from producers.evidence.dsse import b64encode
from producers.policy import CapturePolicy
from producers.recorder import CaptureFailure, Recorder
from producers.transports import DeliveryCallback, DeliveryFailed
from producers.transports.spool.files import read_spool
from producers.transports.spool.sender import SpoolTransport
from schemas.codec import Decoded, decode
from schemas.errors import ContractError, QueueFull, SignatureInvalid, TransportError

EXAMPLE = Path(__file__).resolve().parents[3] / "schemas" / "examples" / "capture.unsealed.json"


@pytest.fixture
def signer() -> Signer:
    return new_signer("did:armalo:agent:agt_1")


@pytest.fixture
def trust(signer: Signer) -> TrustStore:
    return trust_for(signer)


@pytest.fixture
def spool(tmp_path: Path) -> Path:
    return tmp_path / "spool"


@pytest.fixture
def failures() -> list[CaptureFailure]:
    return []


@pytest.fixture
def rec(spool: Path, signer: Signer, failures: list[CaptureFailure], tmp_path: Path) -> Iterator[Recorder]:
    recorder = Recorder(
        agent_id="agt_1",
        runtime_id="rt_1",
        transport=SpoolTransport(spool, linger_ms=5),
        signer=signer,
        blob_store=LocalBlobStore(tmp_path / "blobs"),
        policy=CapturePolicy(sample_one_in=0),
        on_error=failures.append,
        clock=StepClock(),
    )
    configure(recorder)
    yield recorder
    recorder.close(5)


def emitted(spool: Path) -> list[Decoded]:
    return [decode(r.value) for r in read_spool(spool)]


# --- the builder ---------------------------------------------------------------------------------


def test_decision_roundtrip_full_capture(rec: Recorder, spool: Path, trust: TrustStore) -> None:
    content = make_content(8_000)
    d = record(rec, content, consequential=True)
    assert rec.flush(5)
    [message] = emitted(spool)
    assert message.kind == "capture" and message.schema == "capture/v3"
    capture = message.value
    report = verify_capture(capture, trust)
    assert report.absent_parts == ()
    assert capture["decisionId"] == d.decision_id
    assert re.fullmatch(r"dec_[0-9A-HJKMNP-TV-Z]{26}", d.decision_id)
    assert capture["agentId"] == "agt_1" and capture["runtimeId"] == "rt_1"
    assert capture["captureLevel"] == "full"
    assert capture["consequential"] == {"flagged": True, "reason": "issues refunds"}
    assert capture["outcome"] == {"status": "success", "reason": None}
    assert re.fullmatch(r"2026-07-23T13:00:00\.\d{3}Z", capture["capturedAt"])
    assert capture["input"]["requestPayload"] == content.request
    assert capture["agentConfiguration"]["systemPromptVersion"] == "v4.7"
    assert capture["agentConfiguration"]["samplingParameters"]["stop"] == ["</done>"]
    entries = capture["memoryState"]["workingSetEntries"]
    assert [(e["entryId"], e["contextPosition"]) for e in entries] == [(f"mem_{i:02d}", i) for i in range(4)]
    assert capture["memoryState"]["contextSetLeafCount"] == 4
    expected = render_chat_context(
        system_prompt=capture["agentConfiguration"]["systemPromptText"],
        memory=list(content.memory),
        user_message=content.user_message,
    )
    assert capture["renderedContext"]["text"] == expected.text
    assert capture["renderedContext"]["spans"] == [s.to_json() for s in expected.spans]
    calls = capture["executionTrace"]["toolCalls"]
    assert [(c["sequence"], c["toolName"], c["latencyMs"]) for c in calls] == [
        (1, "get_balance", 142),
        (2, "issue_refund", 230),
    ]
    assert capture["executionTrace"]["finalOutputText"] == content.final_output
    assert capture["executionTrace"]["reasoningTokens"] == list(content.reasoning)
    assert capture["externalState"]["observableExternals"][0]["key"] == "customer.balance"
    assert capture["signature"]["publicKeyRef"].startswith("did:armalo:agent:agt_1#sha256:")
    assert rec.stats.delivered == 1 and rec.stats.outstanding == 0


def test_routine_decisions_are_structured_only_and_verify(
    rec: Recorder, spool: Path, trust: TrustStore
) -> None:
    record(rec, make_content(8_000), consequential=False)
    assert rec.flush(5)
    [message] = emitted(spool)
    capture = message.value
    assert capture["captureLevel"] == "structured-only"
    assert capture["renderedContext"]["text"] is None and capture["renderedContext"]["hash"].startswith(
        "sha256:"
    )
    assert capture["executionTrace"]["toolCalls"][0]["outputHash"].startswith("sha256:")
    report = verify_capture(capture, trust)
    assert "renderedContext.text" in report.absent_parts


def test_sampled_routine_decision_is_full(tmp_path: Path, signer: Signer, trust: TrustStore) -> None:
    with Recorder(
        agent_id="agt_1",
        transport=SpoolTransport(tmp_path),
        signer=signer,
        policy=CapturePolicy(sample_one_in=1),
    ) as rec:
        configure(rec)
        record(rec, make_content(5_000))
    [message] = emitted(tmp_path)
    assert message.value["captureLevel"] == "sampled"
    assert message.value["renderedContext"]["text"] is not None
    verify_capture(message.value, trust)


def test_exception_in_block_records_failure_and_propagates(rec: Recorder, spool: Path) -> None:
    with (
        pytest.raises(RuntimeError, match="model timed out"),
        rec.decision(request={"q": 1}, consequential=True) as d,
    ):
        d.add_tool_call(name="lookup", input={"id": 1}, output=None, error_ref="err_1")
        raise RuntimeError("model timed out")
    assert rec.flush(5)
    [message] = emitted(spool)
    assert message.value["outcome"] == {"status": "failure", "reason": "RuntimeError: model timed out"}
    assert message.value["executionTrace"]["stopReason"] == "error"
    assert message.value["executionTrace"]["toolCalls"][0]["errorRef"] == "err_1"


def test_unfinished_block_is_recorded_as_unknown(rec: Recorder, spool: Path) -> None:
    with rec.decision(request={"q": 1}, consequential=True):
        pass
    assert rec.flush(5)
    [message] = emitted(spool)
    assert message.value["outcome"]["status"] == "unknown"
    assert message.value["executionTrace"]["stopReason"] is None
    assert message.value["renderedContext"] is None


def test_builder_is_frozen_after_finish(rec: Recorder) -> None:
    d = rec.decision(request=None)
    d.finish(output="x")
    with pytest.raises(ContractError):
        d.add_tool_call(name="t", input=None, output=None)
    with pytest.raises(ContractError):
        d.finish(output="again")


def test_render_context_needs_a_system_prompt(tmp_path: Path, signer: Signer) -> None:
    with Recorder(agent_id="a", transport=SpoolTransport(tmp_path), signer=signer) as rec:
        d = rec.decision(request=None)
        with pytest.raises(ContractError):
            d.render_context(user_message="hi")
        d.configure(model="m", system_prompt="sys")
        assert d.render_context(user_message="hi").messages()[0] == {"role": "system", "content": "sys"}
        d.finish(output="ok")


def test_self_rendered_context_and_explicit_ids(rec: Recorder, spool: Path) -> None:
    rendered = render_chat_context(system_prompt="S", memory=[("m1", "M")], user_message="U")
    d = rec.decision(request={"q": 1}, decision_id="dec_given", consequential=True)
    d.add_memory(entry_id="m1", tier="hot", content="M")
    d.set_rendered_context(rendered.text, rendered.spans)
    d.observe_external(key="k", value=[1, 2], source="s", captured_at="2026-07-23T12:59:59.000Z")
    d.finish(output="o", total_latency_ms=42)
    assert rec.flush(5)
    capture = emitted(spool)[0].value
    assert capture["decisionId"] == "dec_given"
    assert capture["renderedContext"]["text"] == rendered.text
    assert capture["executionTrace"]["totalLatencyMs"] == 42
    assert capture["externalState"]["observableExternals"][0]["capturedAt"] == "2026-07-23T12:59:59.000Z"


def test_values_are_snapshotted_when_given(rec: Recorder, spool: Path) -> None:
    payload: dict[str, Any] = {"items": [1, 2]}
    output: dict[str, Any] = {"rows": [{"a": 1}]}
    d = rec.decision(request=payload, consequential=True)
    d.add_tool_call(name="t", input=payload, output=output)
    payload["items"].append(3)
    output["rows"][0]["a"] = 99
    d.finish(output="o")
    assert rec.flush(5)
    capture = emitted(spool)[0].value
    assert capture["input"]["requestPayload"] == {"items": [1, 2]}
    assert capture["executionTrace"]["toolCalls"][0]["output"] == {"rows": [{"a": 1}]}


def test_record_a_capture_assembled_by_the_runtime(rec: Recorder, spool: Path, trust: TrustStore) -> None:
    capture = json.loads(EXAMPLE.read_text("utf-8"))
    capture["signature"]["publicKeyRef"] = None
    capture["captureLevel"] = "structured-only"  # a given level is kept, content stripped after sealing
    assert rec.record(capture)
    assert rec.flush(5)
    [message] = emitted(spool)
    assert message.value["decisionId"] == "dec_01J9Z8K2V6XAMPLE"
    assert message.value["captureLevel"] == "structured-only"
    assert message.value["input"]["requestPayload"] is None
    verify_capture(message.value, trust)


def test_flag_consequential_emits_a_signed_flag_after_the_capture(
    rec: Recorder, spool: Path, signer: Signer, trust: TrustStore
) -> None:
    d = record(rec, make_content(5_000))
    assert rec.flag_consequential(d.decision_id, "customer complaint", failure=True)
    assert rec.flush(5)
    capture, flag, full = emitted(spool)  # the flight recorder held the content: it follows the flag
    assert capture.kind == "capture" and flag.kind == "flag"
    assert full.kind == "capture" and full.value["captureLevel"] == "full"
    value = flag.value
    assert {k: value[k] for k in ("decisionId", "agentId", "reason", "failure")} == {
        "decisionId": d.decision_id,
        "agentId": "agt_1",
        "reason": "customer complaint",
        "failure": True,
    }
    signature = value.pop("signature")
    envelope = {
        "payload": b64encode(canonical_json(value)),
        "payloadType": FLAG_PAYLOAD_TYPE,
        "signatures": [
            {"keyid": signature["publicKeyRef"], "sig": signature["signatureBytes"].removeprefix("base64:")}
        ],
    }
    assert verify_event(envelope, trust) == value


# --- failures never reach the agent ----------------------------------------------------------------


class BlockingTransport(NullTransport):
    """Accepts nothing until released: the worker blocks in send(), the queue fills up."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.sent: list[bytes] = []

    def send(self, key: bytes, value: bytes, on_delivery: DeliveryCallback) -> None:
        self.release.wait(30)
        self.sent.append(value)
        on_delivery(None)

    def close(self, timeout: float | None = None) -> None:
        self.release.set()


def test_queue_full_drops_routine_at_once_and_consequential_after_the_wait(signer: Signer) -> None:
    transport = BlockingTransport()
    failures: list[CaptureFailure] = []
    rec = Recorder(
        agent_id="agt_1",
        transport=transport,
        signer=signer,
        queue_size=3,
        consequential_wait=1.0,
        on_error=failures.append,
    )
    rec.configure(model="m")
    for _ in range(6):  # one in the worker (blocked), three queued, two dropped
        rec.decision(request=None).finish(output="x")
        time.sleep(0.01)
    started = time.perf_counter()
    rec.decision(request=None).finish(output="x")
    # Bounds are relative to the 1 s wait, so a busy machine cannot make them flaky.
    assert time.perf_counter() - started < 0.5  # routine: never waits for the queue
    started = time.perf_counter()
    rec.decision(request=None, consequential=True).finish(output="x")
    waited = time.perf_counter() - started
    assert 0.95 < waited < 5.0  # consequential: waited consequential_wait, then dropped
    stats = rec.stats
    assert stats.dropped_queue_full == 4 and stats.enqueued == 4
    assert [f.stage for f in failures] == ["queue"] * 4
    assert all(isinstance(f.error, QueueFull) for f in failures)
    transport.release.set()
    assert rec.close(5)
    assert rec.stats.delivered == 4 and len(transport.sent) == 4


class FlakyTransport:
    """Raises on some sends, fails some deliveries, succeeds otherwise."""

    def __init__(self) -> None:
        self.n = 0
        self.pending: list[tuple[DeliveryCallback, DeliveryFailed | None]] = []

    def send(self, key: bytes, value: bytes, on_delivery: DeliveryCallback) -> None:
        self.n += 1
        if self.n % 3 == 1:
            raise TransportError("local queue full")
        self.pending.append(
            (
                on_delivery,
                DeliveryFailed("timed out", code="_MSG_TIMED_OUT", ambiguous=True)
                if self.n % 3 == 2
                else None,
            )
        )

    def poll(self, timeout: float = 0.0) -> int:
        pending, self.pending = self.pending, []
        for callback, result in pending:
            callback(result)
        return len(pending)

    def flush(self, timeout: float | None = None) -> int:
        self.poll()
        return 0

    def close(self, timeout: float | None = None) -> None:
        self.poll()


def test_send_and_delivery_failures_are_counted_and_reported(signer: Signer) -> None:
    failures: list[CaptureFailure] = []
    rec = Recorder(agent_id="agt_1", transport=FlakyTransport(), signer=signer, on_error=failures.append)
    rec.configure(model="m")
    ids = [rec.decision(request={"i": i}).finish(output="x") for i in range(9)]
    assert rec.flush(5)
    stats = rec.stats
    assert (stats.enqueued, stats.delivered, stats.failed, stats.outstanding) == (9, 3, 6, 0)
    assert sorted(f.stage for f in failures) == ["delivery"] * 3 + ["send"] * 3
    assert {f.decision_id for f in failures} <= set(ids)
    delivery = [f for f in failures if f.stage == "delivery"]
    assert all(isinstance(f.error, DeliveryFailed) and f.error.ambiguous for f in delivery)
    rec.close()


def test_bad_content_is_replaced_by_a_marker_naming_its_path(
    rec: Recorder, spool: Path, failures: list[CaptureFailure], trust: TrustStore
) -> None:
    d = rec.decision(request={"ok": True}, consequential=True)
    d.add_tool_call(name="t", input={"x": float("nan")}, output=None)
    d.finish(output="x")
    good = record(rec, make_content(5_000), consequential=True)
    assert rec.flush(5)
    partial, complete = (m.value for m in emitted(spool))
    assert [partial["decisionId"], complete["decisionId"]] == [d.decision_id, good.decision_id]
    assert partial["executionTrace"]["toolCalls"][0]["input"] == {
        "x": {"blackbox.unrecordable": "nan is not JSON at executionTrace.toolCalls[0].input.x"}
    }
    verify_capture(partial, trust)
    [failure] = failures
    assert failure.decision_id == d.decision_id and failure.stage == "record" and failure.partial
    assert isinstance(failure.error, ContractError)
    assert "executionTrace.toolCalls[0].input.x" in str(failure.error)


def test_on_error_that_raises_does_not_stop_the_worker(signer: Signer) -> None:
    def explode(_failure: CaptureFailure) -> None:
        raise RuntimeError("callback bug")

    rec = Recorder(agent_id="agt_1", transport=FlakyTransport(), signer=signer, on_error=explode)
    rec.configure(model="m")
    for i in range(6):
        rec.decision(request={"i": i}).finish(output="x")
    assert rec.flush(5)
    assert rec.stats.delivered == 2 and rec.stats.failed == 4
    rec.close()


class SilentTransport(FlakyTransport):
    """Accepts everything and never reports (breaks the contract): close must still account for it."""

    def send(self, key: bytes, value: bytes, on_delivery: DeliveryCallback) -> None:
        self.n += 1

    def poll(self, timeout: float = 0.0) -> int:
        return 0


def test_close_reports_what_was_never_delivered(signer: Signer) -> None:
    failures: list[CaptureFailure] = []
    rec = Recorder(agent_id="agt_1", transport=SilentTransport(), signer=signer, on_error=failures.append)
    rec.configure(model="m")
    for i in range(3):
        rec.decision(request={"i": i}).finish(output="x")
    assert not rec.flush(0.3)
    assert rec.stats.outstanding == 3
    assert not rec.close(1)
    assert rec.stats.failed == 3 and rec.stats.outstanding == 0
    assert [f.stage for f in failures] == ["close"] * 3


def test_after_close_decisions_fail_without_raising(tmp_path: Path, signer: Signer) -> None:
    failures: list[CaptureFailure] = []
    rec = Recorder(
        agent_id="agt_1", transport=SpoolTransport(tmp_path), signer=signer, on_error=failures.append
    )
    rec.configure(model="m")
    assert rec.close()
    rec.decision(request=None).finish(output="late")
    assert rec.stats.failed == 1 and failures[0].stage == "close"


def test_clock_is_injectable(tmp_path: Path, signer: Signer) -> None:
    clock = StepClock(start=datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC))
    with Recorder(
        agent_id="a",
        transport=SpoolTransport(tmp_path),
        signer=signer,
        clock=clock,
        policy=CapturePolicy(sample_one_in=1),
    ) as rec:
        rec.configure(model="m")
        d = rec.decision(request=None)
        d.observe_external(key="k", value=1)
        d.finish(output="x")
        rec.flag_consequential(d.decision_id, "r")
    capture, flag = emitted(tmp_path)
    assert (
        capture.value["externalState"]["observableExternals"][0]["capturedAt"] == "2030-01-02T03:04:05.002Z"
    )
    assert capture.value["capturedAt"] == "2030-01-02T03:04:05.003Z"
    assert flag.value["flaggedAt"] == "2030-01-02T03:04:05.004Z"


# --- claim check -----------------------------------------------------------------------------------


def test_oversized_capture_goes_by_claim_check(tmp_path: Path, signer: Signer, trust: TrustStore) -> None:
    store = LocalBlobStore(tmp_path / "blobs")
    with Recorder(
        agent_id="agt_1",
        transport=SpoolTransport(tmp_path / "spool"),
        signer=signer,
        blob_store=store,
        max_message_bytes=100_000,
    ) as rec:
        configure(rec)
        big = record(rec, make_content(300_000), consequential=True)
        small = record(rec, make_content(5_000), consequential=True)
    assert rec.stats.claim_checked == 1 and rec.stats.delivered == 2
    claim, direct = emitted(tmp_path / "spool")
    assert claim.kind == "claim_check" and direct.kind == "capture"
    value = claim.value
    assert value["decisionId"] == big.decision_id and value["agentId"] == "agt_1"
    assert (
        value["blobKey"] == f"claims/agt_1/{big.decision_id}/{value['sha256'].removeprefix('sha256:')}.avro"
    )
    assert value["size"] > 100_000 and value["captureLevel"] == "full" and value["consequential"] is True
    body = resolve_claim_check(store, value)
    capture = decode(body).value
    assert capture["decisionId"] == big.decision_id
    verify_capture(capture, trust)
    assert direct.value["decisionId"] == small.decision_id


def test_claim_check_without_blob_store_fails_loudly(tmp_path: Path, signer: Signer) -> None:
    failures: list[CaptureFailure] = []
    with Recorder(
        agent_id="agt_1",
        transport=SpoolTransport(tmp_path),
        signer=signer,
        max_message_bytes=10_000,
        on_error=failures.append,
    ) as rec:
        configure(rec)
        record(rec, make_content(50_000), consequential=True)
    assert rec.stats.failed == 1 and failures[0].stage == "claim_check"
    assert list(read_spool(tmp_path)) == []


def test_claim_check_refuses_a_tampered_blob(tmp_path: Path, signer: Signer) -> None:
    store = LocalBlobStore(tmp_path / "blobs")
    with Recorder(
        agent_id="agt_1",
        transport=SpoolTransport(tmp_path / "spool"),
        signer=signer,
        blob_store=store,
        max_message_bytes=10_000,
    ) as rec:
        configure(rec)
        record(rec, make_content(50_000), consequential=True)
    [claim] = emitted(tmp_path / "spool")
    data = bytearray(store.get(claim.value["blobKey"]))
    data[-1] ^= 1
    store.put(claim.value["blobKey"], bytes(data))
    from schemas.errors import ContentHashMismatch

    with pytest.raises(ContentHashMismatch):
        resolve_claim_check(store, claim.value)


def test_from_settings_embedded_defaults(tmp_path: Path, signer: Signer) -> None:
    from producers.settings import load_settings

    settings = load_settings(data_dir=tmp_path / "bb", signing_key_b64=b64encode(signer.seed()))
    with Recorder.from_settings(settings, agent_id="agt_1", runtime_id="rt_1") as rec:
        configure(rec)
        record(rec, make_content(5_000), consequential=True)
    [message] = emitted(settings.resolved_spool_dir)
    assert message.value["signature"]["publicKeyRef"] == signer.key_id


def test_a_recorder_left_open_is_flushed_at_interpreter_exit(tmp_path: Path) -> None:
    import subprocess
    import sys

    script = f"""
import sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from recorder_testdata import configure, make_content, new_signer, record
from producers.recorder import Recorder
from producers.transports.spool.sender import SpoolTransport
rec = Recorder(agent_id="agt_exit", transport=SpoolTransport({str(tmp_path)!r}, linger_ms=60_000), signer=new_signer())
configure(rec)
for _ in range(3):
    record(rec, make_content(5_000), consequential=True)
# no close(): the atexit hook must deliver
"""
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    assert [m.value["agentId"] for m in emitted(tmp_path)] == ["agt_exit"] * 3


def test_a_decision_states_its_fidelity_and_the_signature_covers_it(
    rec: Recorder, spool: Path, failures: list[CaptureFailure], trust: TrustStore
) -> None:
    with rec.decision(request={"q": 1}, consequential=True, fidelity="semantic") as d:
        d.finish(output="rebuilt from spans")
    with rec.decision(request={"q": 2}, consequential=True) as d:
        d.finish(output="by hand")
    with rec.decision(request={"q": 3}, consequential=True, fidelity="wire-ish") as d:  # type: ignore[arg-type]
        d.finish(output="bad value")
    assert rec.flush(5)
    semantic, by_hand, bad = (m.value for m in emitted(spool))
    assert [semantic["fidelity"], by_hand["fidelity"], bad["fidelity"]] == ["semantic", "sdk", "sdk"]
    for capture in (semantic, by_hand, bad):
        verify_capture(capture, trust)
    assert len(failures) == 1 and "fidelity 'wire-ish'" in str(failures[0].error)
    forged = {**semantic, "fidelity": "wire"}
    with pytest.raises(SignatureInvalid):
        verify_capture(forged, trust)

"""The flight recorder: a late flag brings a routine decision's full content in; failure indicators
capture it at once; the window and the byte cap bound what is held, and say so when it is gone.

Every message goes through the real SpoolTransport and is decoded and verified with the real codec
and evidence modules; time is moved with an injected clock, never slept.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from recorder_testdata import configure, make_content, new_signer, record, trust_for

from producers.evidence import Signer, TrustStore, verify_capture
from producers.evidence.manifest import manifest
from producers.evidence.parts import iter_parts
from producers.flight import FlightPolicy
from producers.policy import CapturePolicy
from producers.recorder import CaptureFailure, Recorder
from producers.settings import load_settings
from producers.transports.spool.files import read_spool
from producers.transports.spool.sender import SpoolTransport
from schemas.codec import Decoded, decode
from schemas.errors import ContentNotHeld, FailurePredicateFailed

START = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


class ManualClock:
    """Time stands still until the test moves it."""

    def __init__(self, start: datetime = START) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@pytest.fixture
def signer() -> Signer:
    return new_signer("did:test:agent:agt_1")


@pytest.fixture
def trust(signer: Signer) -> TrustStore:
    return trust_for(signer)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def failures() -> list[CaptureFailure]:
    return []


@pytest.fixture
def make(tmp_path: Path, signer: Signer, clock: ManualClock, failures: list[CaptureFailure]) -> Iterator[Any]:
    made: list[Recorder] = []

    def recorder(**options: Any) -> Recorder:
        rec = Recorder(
            agent_id="agt_1",
            transport=SpoolTransport(tmp_path / "spool", linger_ms=1),
            signer=signer,
            policy=CapturePolicy(sample_one_in=0),
            clock=clock,
            on_error=failures.append,
            **options,
        )
        configure(rec)
        made.append(rec)
        return rec

    yield recorder
    for rec in made:
        rec.close(5)


def emitted(tmp_path: Path) -> list[Decoded]:
    return [decode(r.value) for r in read_spool(tmp_path / "spool")]


def _structure(capture: dict[str, Any]) -> dict[str, Any]:
    """The signed manifest without what an upgrade may change."""
    view = manifest(capture)
    for key in ("captureLevel", "consequential"):
        view.pop(key)
    view["signature"].pop("signatureBytes", None)
    return view


def _hashes(capture: dict[str, Any]) -> dict[str, Any]:
    return {ref.hash_path: ref.recorded_hash for ref in iter_parts(capture)}


# --- a late flag -------------------------------------------------------------------------------------


def test_a_late_flag_within_the_window_emits_the_full_capture_with_the_same_hashes(
    make: Any, tmp_path: Path, clock: ManualClock, trust: TrustStore, failures: list[CaptureFailure]
) -> None:
    rec = make()
    content = make_content(8_000)
    d = record(rec, content)
    assert rec.flush(5)
    assert rec.stats.flight.held == 1 and rec.stats.flight.held_bytes > 8_000
    clock.advance(minutes=14)

    assert rec.flag_consequential(d.decision_id, "customer disputes the refund")
    assert rec.flush(5)
    structured, flag, full = emitted(tmp_path)
    assert structured.value["captureLevel"] == "structured-only" and flag.kind == "flag"
    assert full.kind == "capture" and full.value["decisionId"] == d.decision_id
    assert full.value["captureLevel"] == "full"
    assert full.value["consequential"] == {"flagged": True, "reason": "customer disputes the refund"}
    assert verify_capture(full.value, trust).absent_parts == ()
    assert "executionTrace.finalOutputText" in verify_capture(structured.value, trust).absent_parts
    # the structured-only manifest already signed every content hash; the full capture adds content only
    hashes = _hashes(structured.value)
    assert hashes and all(h is not None and h.startswith("sha256:") for h in hashes.values())
    assert hashes == _hashes(full.value)
    assert _structure(structured.value) == _structure(full.value)
    assert full.value["executionTrace"]["finalOutputText"] == content.final_output
    assert full.value["input"]["requestPayload"] == content.request
    assert full.value["capturedAt"] == structured.value["capturedAt"]

    stats = rec.stats
    assert stats.flight.upgraded == 1 and stats.flight.held == 0 and stats.flight.held_bytes == 0
    assert stats.enqueued == 3 == stats.delivered and stats.outstanding == 0
    assert not failures
    # a second flag finds it brought in already: the flag only, nothing to report
    assert rec.flag_consequential(d.decision_id, "again")
    assert rec.flush(5) and len(emitted(tmp_path)) == 4 and not failures


def test_after_the_window_the_flag_is_sent_and_says_the_content_is_no_longer_held(
    make: Any, tmp_path: Path, clock: ManualClock, failures: list[CaptureFailure]
) -> None:
    rec = make()
    d = record(rec, make_content(5_000))
    assert rec.flush(5)
    clock.advance(minutes=15, seconds=1)

    assert rec.flag_consequential(d.decision_id, "complaint a day later")
    assert rec.flush(5)
    assert [m.kind for m in emitted(tmp_path)] == ["capture", "flag"]  # the flag still goes out
    [failure] = failures
    assert failure.kind == "flag" and failure.stage == "flight" and failure.partial
    assert failure.decision_id == d.decision_id and isinstance(failure.error, ContentNotHeld)
    text = str(failure)
    assert text.startswith(
        f"flag {d.decision_id}: flag sent, but the flight recorder does not hold the content"
    )
    assert "older than the 900 s window (BLACKBOX_FLIGHT_WINDOW_SECONDS)" in text
    assert "no full capture follows" in text
    assert rec.stats.flight.not_held == 1 and rec.stats.flight.evicted_window == 1
    assert rec.stats.failed == 0  # nothing was lost: the flag was delivered


def test_a_flag_for_a_decision_captured_in_full_needs_nothing(
    make: Any, tmp_path: Path, failures: list[CaptureFailure]
) -> None:
    rec = make()
    d = record(rec, make_content(3_000), consequential=True)
    assert rec.flag_consequential(d.decision_id, "refund disputed")
    assert rec.flag_consequential("dec_never_seen_here", "from another process")
    assert rec.flush(5)
    assert [(m.kind, m.value.get("captureLevel")) for m in emitted(tmp_path)] == [
        ("capture", "full"),
        ("flag", None),
        ("flag", None),
    ]
    [failure] = failures  # only the decision this recorder never saw is reported
    assert failure.decision_id == "dec_never_seen_here" and isinstance(failure.error, ContentNotHeld)
    assert "not recorded by this recorder as a routine decision in the last 900 s" in str(failure)


# --- failure indicators --------------------------------------------------------------------------------


def _routine(
    rec: Recorder, *, error_ref: str | None = None, stop: Any = "end_turn", outcome: Any = "success"
) -> str:
    with rec.decision(request={"message": "what is my balance?"}) as d:
        d.add_memory(entry_id="mem_1", tier="hot", content="customer since 2019")
        d.add_tool_call(
            name="get_balance", input={"customer_id": "cus_1"}, output={"e": 1}, error_ref=error_ref
        )
        d.finish(
            output="Your balance is 880 USD.", stop_reason=stop, outcome=outcome, outcome_reason="ledger"
        )
    return d.decision_id


@pytest.mark.parametrize(
    ("given", "reason"),
    [
        ({"error_ref": "err:timeout"}, "failure indicator: tool error in get_balance"),
        ({"stop": "error"}, "failure indicator: stop_reason error"),
        ({"outcome": "failure"}, "failure indicator: outcome failure (ledger)"),
    ],
)
def test_a_failure_indicator_captures_the_decision_in_full_at_once(
    make: Any, tmp_path: Path, trust: TrustStore, given: dict[str, Any], reason: str
) -> None:
    rec = make()
    did = _routine(rec, **given)
    assert rec.flush(5)
    [message] = emitted(tmp_path)  # one capture, in full: nothing waits for a flag
    capture = message.value
    assert capture["decisionId"] == did and capture["captureLevel"] == "full"
    assert capture["consequential"] == {"flagged": True, "reason": reason}
    assert capture["executionTrace"]["finalOutputText"] == "Your balance is 880 USD."
    assert verify_capture(capture, trust).absent_parts == ()
    assert rec.stats.flight.fired == 1 and rec.stats.flight.held == 0


def test_a_failure_when_predicate_fires_the_recorder_with_its_reason(
    make: Any, tmp_path: Path, trust: TrustStore
) -> None:
    seen: list[dict[str, Any]] = []

    def negative_balance(capture: dict[str, Any]) -> str | None:
        seen.append(capture)
        refunded = "refund" in (capture["executionTrace"]["finalOutputText"] or "")
        return "refund after a lookup" if refunded else None

    rec = make(failure_when=negative_balance)
    plain = _routine(rec)
    refund = record(rec, make_content(3_000)).decision_id  # its answer says "refunded"
    assert rec.flush(5)
    levels = {m.value["decisionId"]: m.value for m in emitted(tmp_path)}
    assert levels[plain]["captureLevel"] == "structured-only"
    assert levels[refund]["captureLevel"] == "full"
    assert levels[refund]["consequential"]["reason"] == "failure indicator: refund after a lookup"
    verify_capture(levels[refund], trust)
    assert [c["decisionId"] for c in seen] == [plain, refund]  # called with the built capture
    assert seen[0]["executionTrace"]["finalOutputText"] == "Your balance is 880 USD."
    assert rec.stats.flight.fired == 1


def test_a_predicate_that_raises_is_reported_not_raised(
    make: Any, tmp_path: Path, failures: list[CaptureFailure], clock: ManualClock
) -> None:
    def broken(capture: dict[str, Any]) -> bool:
        raise KeyError("outcome_code")

    rec = make(failure_when=broken)
    did = _routine(rec)  # no exception here, in the agent's thread
    assert rec.flush(5)
    [message] = emitted(tmp_path)
    assert message.value["captureLevel"] == "structured-only"  # as the capture policy decided
    [failure] = failures
    assert failure.stage == "flight" and failure.partial and failure.decision_id == did
    assert isinstance(failure.error, FailurePredicateFailed)
    assert "failure_when raised KeyError: 'outcome_code'" in str(failure)
    assert rec.stats.flight.predicate_raised == 1 and rec.stats.failed == 0
    # the decision is still held: a late flag brings it in
    clock.advance(minutes=1)
    rec.flag_consequential(did, "found later")
    assert rec.flush(5)
    assert emitted(tmp_path)[-1].value["captureLevel"] == "full"


# --- bounds ----------------------------------------------------------------------------------------------


def test_the_byte_cap_evicts_the_oldest_first_and_counts(
    make: Any, tmp_path: Path, failures: list[CaptureFailure]
) -> None:
    probe = make()
    record(probe, make_content(6_000, seed=1))
    assert probe.flush(5)
    size = probe.stats.flight.held_bytes
    probe.close(5)
    (tmp_path / "spool").rename(tmp_path / "probe-spool")

    rec = make(flight=FlightPolicy(max_bytes=size * 5 // 2))  # room for two
    ids = [record(rec, make_content(6_000, seed=1 + n)).decision_id for n in range(3)]
    assert rec.flush(5)
    assert rec.stats.flight.held == 2 and rec.stats.flight.evicted_bytes == 1
    assert rec.stats.flight.held_bytes <= size * 5 // 2

    rec.flag_consequential(ids[0], "oldest")  # evicted first
    rec.flag_consequential(ids[2], "newest")  # still held
    assert rec.flush(5)
    kinds = [(m.kind, m.value["decisionId"], m.value.get("captureLevel")) for m in emitted(tmp_path)[3:]]
    assert kinds == [("flag", ids[0], None), ("flag", ids[2], None), ("capture", ids[2], "full")]
    [failure] = failures
    assert failure.decision_id == ids[0]
    assert f"evicted to stay under BLACKBOX_FLIGHT_MAX_BYTES={size * 5 // 2}" in str(failure)


def test_content_spilled_to_files_comes_back_the_same_and_leaves_no_file(
    make: Any, tmp_path: Path, trust: TrustStore, clock: ManualClock
) -> None:
    spill = tmp_path / "flight"
    rec = make(flight=FlightPolicy(spill_dir=spill))
    content = make_content(8_000)
    d = record(rec, content)
    assert rec.flush(5) and rec.stats.flight.held == 1
    assert list(spill.iterdir()) == []  # anonymous files: nothing named is left, even after a crash
    clock.advance(minutes=5)
    rec.flag_consequential(d.decision_id, "disputed")
    assert rec.flush(5)
    structured, _, full = emitted(tmp_path)
    assert verify_capture(full.value, trust).absent_parts == ()
    assert _hashes(full.value) == _hashes(structured.value)
    assert full.value["executionTrace"]["finalOutputText"] == content.final_output
    rec.close(5)
    assert list(spill.iterdir()) == []


def test_with_the_flight_recorder_off_nothing_is_held_and_nothing_fires(
    make: Any, tmp_path: Path, failures: list[CaptureFailure]
) -> None:
    rec = make(flight=FlightPolicy(max_bytes=0))
    d = record(rec, make_content(3_000))
    _routine(rec, error_ref="err:timeout")
    rec.flag_consequential(d.decision_id, "late")
    assert rec.flush(5)
    assert [(m.kind, m.value.get("captureLevel")) for m in emitted(tmp_path)] == [
        ("capture", "structured-only"),
        ("capture", "structured-only"),
        ("flag", None),
    ]
    assert not failures and rec.stats.flight.held == 0 and rec.stats.flight.fired == 0


def test_the_flight_settings_are_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("BLACKBOX_FLIGHT_WINDOW_SECONDS", "60")
    monkeypatch.setenv("BLACKBOX_FLIGHT_MAX_BYTES", "0")
    monkeypatch.setenv("BLACKBOX_FLIGHT_SPILL_DIR", str(tmp_path / "f"))
    policy = FlightPolicy.from_settings(load_settings())
    assert policy == FlightPolicy(window_seconds=60, max_bytes=0, spill_dir=tmp_path / "f")
    assert not policy.enabled
    assert FlightPolicy.from_settings(load_settings(flight_max_bytes=None)).max_bytes == 0
    defaults = FlightPolicy()
    assert defaults.enabled and defaults.window_seconds == 900 and defaults.max_bytes == 64 * 1024 * 1024

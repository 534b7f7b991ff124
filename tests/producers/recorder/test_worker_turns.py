"""The recorder's worker takes turns with the runtime's threads for the GIL (producers/turns.py)."""

from __future__ import annotations

import statistics
import sys
import threading
import time
from datetime import UTC, datetime
from typing import Any

from recorder_testdata import NullTransport, configure, make_content, new_signer, record, record_tiny

from producers.flight import FlightPolicy
from producers.pipeline import prepare_capture
from producers.policy import CapturePolicy
from producers.privacy.protect import Redactor
from producers.recorder import Recorder
from producers.turns import WorkerTurns


class FakeTime:
    """The worker's CPU clock, the wall clock, and a sleep during which another thread may keep the
    GIL for ``kept`` seconds."""

    def __init__(self) -> None:
        self.cpu = 100.0
        self.wall = 500.0
        self.kept = 0.0
        self.slept: list[float] = []

    def turns(self) -> WorkerTurns:
        turns = WorkerTurns(
            turn=0.001,
            longest=0.004,
            rest=0.00002,
            cpu=lambda: self.cpu,
            wall=lambda: self.wall,
            sleep=self.sleep,
        )
        turns.waited()
        return turns

    def work(self, seconds: float) -> None:
        self.cpu += seconds
        self.wall += seconds

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.wall += seconds + self.kept


def test_the_worker_rests_once_its_turn_is_used_and_a_wait_starts_a_new_turn() -> None:
    fake = FakeTime()
    turns = fake.turns()
    fake.work(0.0009)
    turns.pause()
    assert fake.slept == []  # within its turn: no cost at all
    fake.work(0.0002)
    turns.pause()
    assert fake.slept == [0.00002] and turns.rests == 1
    fake.work(0.0009)
    turns.pause()  # the rest started a new turn
    assert turns.rests == 1
    fake.wall += 0.004  # waiting for the GIL (wall time, no CPU) is not the worker's turn
    turns.pause()
    assert turns.rests == 1
    fake.work(0.0005)
    turns.waited()  # blocked on an empty queue: the GIL was free, a new turn
    fake.work(0.0009)
    turns.pause()
    assert turns.rests == 1


def test_a_thread_that_keeps_the_gil_a_switch_interval_lengthens_the_workers_turns() -> None:
    """A computing thread gets the GIL at every rest and keeps it a switch interval; the worker's
    turns double (up to ``longest``) so it keeps its share, and return to short when a waiter
    hands the GIL back quickly."""
    fake = FakeTime()
    turns = fake.turns()
    fake.kept = sys.getswitchinterval()
    turn_after_rest: list[float] = []
    for _ in range(80):  # stages of 0.25 ms
        fake.work(0.00025)
        before = turns.rests
        turns.pause()
        if turns.rests > before:
            turn_after_rest.append(turns._turn)
    assert turn_after_rest[:3] == [0.002, 0.004, 0.004]  # doubled, then capped at `longest`
    fake.kept = 0.00005  # a waiter that needed a moment
    fake.work(0.004)
    turns.pause()
    fake.work(0.001)
    turns.pause()
    assert turns.rests == len(turn_after_rest) + 2 and turns._turn == 0.001  # short turns again


def test_prepare_capture_pauses_after_redaction_and_after_sealing() -> None:
    capture = _built_capture()
    calls: list[str] = []
    prepare_capture(
        capture,
        signer=new_signer(),
        policy=CapturePolicy(),
        claims=None,
        max_message_bytes=10_000_000,
        owned=True,
        redactor=Redactor.create("builtin"),
        pause=lambda: calls.append("pause"),
    )
    assert calls == ["pause", "pause"]
    calls.clear()
    prepare_capture(
        _built_capture(),
        signer=new_signer(),
        policy=CapturePolicy(),
        claims=None,
        max_message_bytes=10_000_000,
        owned=True,
        pause=lambda: calls.append("pause"),
    )
    assert calls == ["pause"]  # no redaction: only after sealing


class SpinningTransport(NullTransport):
    """Each send holds the GIL for ``spin`` seconds (pure Python): a busy worker stage."""

    def __init__(self, spin: float) -> None:
        self.spin = spin
        self.sent = 0

    def send(self, key: bytes, value: bytes, on_delivery: Any) -> None:
        end = time.perf_counter() + self.spin
        while time.perf_counter() < end:
            pass
        self.sent += 1
        on_delivery(None)


def test_a_runtime_thread_waiting_for_the_gil_gets_it_at_the_workers_next_rest() -> None:
    """Without turns the runtime's thread, waking from a 1 ms sleep while the worker is busy, waits
    CPython's 5 ms switch interval for the GIL; with them, until the worker's next rest (here after
    each 1 ms send)."""
    transport = SpinningTransport(spin=0.001)
    rec = Recorder(
        agent_id="agt_turns",
        transport=transport,
        signer=new_signer(),
        redact="off",
        flight=FlightPolicy(max_bytes=0),
        policy=CapturePolicy(sample_one_in=0),
    )
    try:
        for _ in range(600):  # ~0.6 s of work queued: the worker stays busy while we measure
            record_tiny(rec, consequential=True)
        time.sleep(0.01)
        late: list[float] = []
        for _ in range(60):
            queued = _run_queue_wait()
            target = time.perf_counter() + 0.001
            time.sleep(0.001)
            woke = time.perf_counter()
            # the GIL wait: lateness less this thread's wait for a CPU (a busy machine's share)
            late.append(woke - target - (_run_queue_wait() - queued))
        busy = rec.stats.outstanding > 0
    finally:
        rec.close(30)
    assert busy, "the worker finished before the measurement ended; queue more work"
    assert rec._turns.rests > 0
    # waking at a random point of a ~1 ms stage: ~0.5 ms late in the median; without turns ~5 ms
    assert statistics.median(late) < 0.0025, f"median lateness {statistics.median(late) * 1e3:.2f} ms"


def _run_queue_wait() -> float:
    """Seconds this thread has been runnable but not running (Linux schedstat; 0 elsewhere)."""
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/schedstat", "rb") as handle:
            return int(handle.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def test_turns_change_no_byte_of_what_is_sent() -> None:
    """Resting between stages only changes when the worker runs, never what it produces."""
    sent: list[bytes] = []
    signer = new_signer()
    content = make_content(20_000, seed=3)

    class Keep(SpinningTransport):
        def send(self, key: bytes, value: bytes, on_delivery: Any) -> None:
            sent.append(value)
            on_delivery(None)

    def run(turn: float) -> list[bytes]:
        sent.clear()
        rec = Recorder(agent_id="agt_turns", transport=Keep(0), signer=signer, clock=lambda: AT)
        rec._turns = WorkerTurns(turn=turn)
        configure(rec)
        with rec.decision(request=content.request, consequential=True, decision_id="dec_turns") as d:
            for entry_id, text in content.memory:
                d.add_memory(entry_id=entry_id, tier="hot", content=text)
            d.render_context(user_message=content.user_message)
            d.add_tool_call(name="get_balance", input={"customer_id": "c"}, output=content.tool_outputs[0])
            d.finish(output=content.final_output, reasoning=content.reasoning, total_latency_ms=7)
        rec.close(30)
        return list(sent)

    assert run(0.0) == run(3600.0)  # resting before every stage vs never


AT = datetime(2026, 7, 23, 13, 0, tzinfo=UTC)


def _built_capture() -> dict[str, Any]:
    """One decision as the recorder's worker builds it (unsealed), without a worker."""
    built: list[Any] = []

    rec = Recorder(agent_id="agt_turns", transport=NullTransport(), signer=new_signer(), redact="off")
    rec._submit_decision = built.append  # type: ignore[method-assign]
    configure(rec)
    record(rec, make_content(5_000, seed=1), consequential=True)
    rec.close(5)
    capture: dict[str, Any] = built[0].to_capture()
    return capture

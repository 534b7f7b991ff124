"""The recorder's backlog (producers/backlog.py): a writer blocked on a full queue resumes once a
quarter is free — fewer wake-ups — and nothing else about the queue changes."""

from __future__ import annotations

import queue
import threading
import time

import pytest

from producers import backlog as backlog_module
from producers.backlog import Backlog


def _full(size: int) -> Backlog[int]:
    backlog: Backlog[int] = Backlog(size)
    for item in range(size):
        backlog.put_nowait(item)
    return backlog


def _blocked_writer(backlog: Backlog[int], item: int, timeout: float) -> tuple[threading.Thread, list[str]]:
    outcome: list[str] = []

    def write() -> None:
        try:
            backlog.put(item, timeout=timeout)
            outcome.append("put")
        except queue.Full:
            outcome.append("full")

    writer = threading.Thread(target=write)
    writer.start()
    return writer, outcome


def test_a_blocked_writer_resumes_only_when_a_quarter_is_free(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backlog_module, "_LOOK_AGAIN", 30.0)  # only a notice can wake it here
    backlog = _full(8)
    writer, outcome = _blocked_writer(backlog, 99, timeout=10.0)
    time.sleep(0.05)
    assert backlog.get_nowait() == 0  # one free slot: the stock queue would wake the writer here
    time.sleep(0.2)
    assert outcome == [] and backlog.qsize() == 7
    assert backlog.get_nowait() == 1  # two free (a quarter of 8): it resumes
    writer.join(5)
    assert outcome == ["put"] and backlog.qsize() == 7
    assert [backlog.get_nowait() for _ in range(7)] == [2, 3, 4, 5, 6, 7, 99]  # order kept


def test_a_writer_finds_a_single_free_slot_by_itself_within_50_ms() -> None:
    """A worker that frees one slot and stalls: the writer is not woken, but looks again itself."""
    backlog = _full(8)
    writer, outcome = _blocked_writer(backlog, 99, timeout=30.0)
    time.sleep(0.02)
    backlog.get_nowait()
    freed = time.monotonic()
    writer.join(5)
    assert outcome == ["put"] and time.monotonic() - freed < 1.0  # not its 30 s timeout


def test_a_writer_that_waits_too_long_still_gets_full() -> None:
    backlog = _full(8)
    writer, outcome = _blocked_writer(backlog, 100, timeout=0.2)
    writer.join(5)
    assert outcome == ["full"]  # nobody took anything: Full after the timeout, as with the stock queue


def test_the_rest_is_the_stock_queue() -> None:
    backlog: Backlog[str] = Backlog(2)
    backlog.put_nowait("a")
    backlog.put_nowait("b")
    with pytest.raises(queue.Full):
        backlog.put_nowait("c")
    assert backlog.get(timeout=1) == "a" and backlog.get_nowait() == "b"
    with pytest.raises(queue.Empty):
        backlog.get(timeout=0.01)
    unbounded: Backlog[int] = Backlog(0)
    for item in range(1_000):
        unbounded.put_nowait(item)
    assert unbounded.qsize() == 1_000 and unbounded.resume_at == 0
    assert Backlog(1).resume_at == 0 and Backlog(2_000).resume_at == 1_500

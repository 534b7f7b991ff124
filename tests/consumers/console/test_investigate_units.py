"""The console's replay jobs (real threads: bounded concurrency, queue positions, progress, cancel,
owners) and the result page's word-level diff."""

from __future__ import annotations

import re
import threading
import time
from typing import Any

import pytest

from consumers.console.jobs import JobControl, JobView, ReplayJobs
from consumers.console.replay_view import DiffPart, word_diff
from schemas.errors import ContractError


def _wait(jobs: ReplayJobs, job_id: str, owner: str, *, until: str) -> JobView:
    deadline = time.monotonic() + 10
    while True:
        view = jobs.view(job_id, owner=owner)
        assert view is not None
        if view.state == until or time.monotonic() > deadline:
            return view
        time.sleep(0.01)


def test_one_worker_queues_the_rest_in_order_and_cancel_stops_them() -> None:
    jobs = ReplayJobs(workers=1)
    gate, started = threading.Event(), threading.Event()

    def blocking(control: JobControl) -> str:
        started.set()
        control.step()
        assert gate.wait(10)
        control.step()
        return "first done"

    def quick(control: JobControl) -> str:
        control.step()
        return "quick done"

    try:
        first = jobs.submit(owner="ann", decision_id="d1", label="a", total=2, work=blocking)
        assert started.wait(10)
        second = jobs.submit(owner="ann", decision_id="d1", label="b", total=1, work=quick)
        third = jobs.submit(owner="ann", decision_id="d1", label="c", total=1, work=quick)
        running = jobs.view(first, owner="ann")
        assert running is not None and running.state == "running" and running.done == 1 and running.total == 2
        assert [jobs.view(j, owner="ann").position for j in (second, third)] == [1, 2]  # type: ignore[union-attr]
        assert jobs.view(first, owner="bob") is None and not jobs.cancel(first, owner="bob")  # not bob's
        assert jobs.cancel(second, owner="ann")
        cancelled = jobs.view(second, owner="ann")
        assert cancelled is not None and cancelled.state == "cancelled" and cancelled.finished
        assert jobs.view(third, owner="ann").position == 1  # type: ignore[union-attr]
        gate.set()
        assert _wait(jobs, first, "ann", until="done").result == "first done"
        assert _wait(jobs, third, "ann", until="done").result == "quick done"
        assert _wait(jobs, second, "ann", until="cancelled").result is None  # never ran
    finally:
        gate.set()
        jobs.close()


def test_cancel_stops_a_running_job_between_steps_and_failures_are_shown() -> None:
    jobs = ReplayJobs(workers=2)
    started, release = threading.Event(), threading.Event()
    steps: list[int] = []

    def long(control: JobControl) -> str:
        for i in range(1000):
            started.set()
            steps.append(i)
            release.wait(0.01)
            control.step()
        return "should not finish"

    def bad(control: JobControl) -> Any:
        raise ContractError("no such variable", path="vary")

    try:
        running = jobs.submit(owner="ann", decision_id="d", label="long", total=1000, work=long)
        failing = jobs.submit(owner="ann", decision_id="d", label="bad", total=1, work=bad)
        assert started.wait(10)
        assert jobs.cancel(running, owner="ann")
        view = _wait(jobs, running, "ann", until="cancelled")
        assert view.state == "cancelled" and view.result is None and len(steps) < 1000
        failed = _wait(jobs, failing, "ann", until="failed")
        assert failed.state == "failed" and "no such variable" in failed.error
        assert not jobs.cancel(failing, owner="ann")  # finished already
    finally:
        jobs.close()


def test_workers_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        ReplayJobs(workers=0)


def test_word_diff_marks_only_the_changed_words_and_keeps_every_character() -> None:
    before = "I have refunded $4566.12 to Customer 269."
    after = "I have refunded $42.50 to Customer 269."
    parts = word_diff(before, after)
    assert [p for p in parts if p.op != "same"] == [
        DiffPart("removed", "$4566.12 "),
        DiffPart("added", "$42.50 "),
    ]
    assert "".join(p.text for p in parts if p.op != "added") == before
    assert "".join(p.text for p in parts if p.op != "removed") == after
    assert word_diff("same  text", "same  text") == (DiffPart("same", "same  text"),)
    assert word_diff("", "new answer") == (DiffPart("added", "new answer"),)
    assert word_diff("old", "") == (DiffPart("removed", "old"),)


def test_the_result_page_shows_hostile_outputs_and_tool_names_as_text() -> None:
    from hostile import HOSTILE

    from consumers.console.jobs import JobView
    from consumers.console.replay_view import ReplayView, RowView, ToolPair
    from consumers.console.web import html

    row = RowView(
        label=HOSTILE,
        variable=HOSTILE,
        verdict=HOSTILE,
        changed=True,
        reference_label="the capture",
        diff=word_diff("FINAL " + HOSTILE, "FINAL ok"),
        tools=(ToolPair(step=1, reference=HOSTILE, replayed="lookup", differs=True),),
        first_divergent_step=1,
        stop_reason=HOSTILE,
        model=HOSTILE,
        runs=1,
        distribution=(),
    )
    view = ReplayView(
        decision_id="dec_1", reproduces=False, fidelity="sdk", fidelity_note=HOSTILE, verified=True,
        caveats=(HOSTILE,), rows=(row,), run_id="run1",
    )  # fmt: skip
    job = JobView(job_id="job_1", owner="ann", decision_id="dec_1", label=HOSTILE, state="done", done=1,
                  total=1, position=None, result=view)  # fmt: skip
    body = bytes(html("replay_job.html", who=None, base="/console", job=job, result=view).body).decode()
    assert not re.search(r"<(script|img|svg|iframe|style)\b", body)  # no element made from the content
    assert not re.search(r"<[^>]*\s(onerror|onload)=", body) and 'href="javascript:' not in body
    assert "&lt;script&gt;alert(" in body and body.count("U+202E") >= 5  # shown as text, marks visible


def test_wait_returns_when_the_job_finishes_or_the_time_is_up() -> None:
    jobs = ReplayJobs(workers=1)
    release = threading.Event()
    try:
        quick = jobs.submit(owner="ann", decision_id="d", label="q", total=1, work=lambda c: "ok")
        jobs.wait(quick, owner="ann", seconds=10)
        assert jobs.view(quick, owner="ann").state == "done"  # type: ignore[union-attr]
        slow = jobs.submit(owner="ann", decision_id="d", label="s", total=1, work=lambda c: release.wait(10))
        started = time.monotonic()
        jobs.wait(slow, owner="ann", seconds=0.2)
        assert 0.15 < time.monotonic() - started < 5 and not jobs.view(slow, owner="ann").finished  # type: ignore[union-attr]
    finally:
        release.set()
        jobs.close()

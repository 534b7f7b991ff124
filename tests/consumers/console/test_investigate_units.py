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
    # the page's one script is the console's own file; no element is made from the content
    assert re.findall(r"<script\b[^>]*>", body) == ['<script src="/console/static/console.js" defer>']
    assert not re.search(r"<(img|svg|iframe|style)\b", body.replace("<script src=", ""))
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


def test_a_job_publishes_what_it_has_so_far_until_its_result() -> None:
    jobs = ReplayJobs(workers=1)
    published, release = threading.Event(), threading.Event()

    def work(control: JobControl) -> str:
        control.publish(("first point",))
        published.set()
        assert release.wait(10)
        return "done"

    try:
        job = jobs.submit(owner="ann", decision_id="d", label="p", total=1, work=work)
        assert published.wait(10)
        running = jobs.view(job, owner="ann")
        assert running is not None and running.partial == ("first point",) and running.result is None
        release.set()
        assert _wait(jobs, job, "ann", until="done").result == "done"
    finally:
        release.set()
        jobs.close()


def test_the_boundary_chart_draws_judged_points_and_leaves_the_rest_open() -> None:
    from hostile import HOSTILE

    from consumers.console.probe_chart import FILL, chart_layout
    from consumers.console.search_jobs import PointView, ProbeChart
    from consumers.console.web import svg

    xs = tuple(f"memory.truncate={k}KB" for k in range(17))
    chart = ProbeChart(xs=xs, series=("system_prompt=v4.7", HOSTILE))
    judged = (
        PointView(x=xs[0], series="system_prompt=v4.7", measure="0 B", runs=1, state="miss", column=0, row=0),
        PointView(x=xs[9], series="system_prompt=v4.7", measure="9 KB", runs=1, state="hit", column=9, row=0),
        PointView(x=xs[3], series=HOSTILE, measure="3 KB", runs=1, state="undecided", column=3, row=1),
    )
    layout = chart_layout(ProbeChart(xs=xs, series=chart.series, points=judged))
    states = [c.state for c in layout.cells]
    assert len(states) == 17 * 2 and states.count("pending") == 17 * 2 - 3
    assert states[0] == "miss" and states[9] == "hit" and states[17 + 3] == "undecided"
    assert layout.cells[9].fill == FILL["hit"] and (layout.done, layout.planned) == (3, 34)
    assert layout.columns[0].text == "0KB" and layout.columns[-1].text == "16KB"  # the ends are labelled
    # a row label as long as labels get (18 characters) ends at the cells and starts inside the image
    from consumers.console.probe_chart import CHAR

    long = chart_layout(ProbeChart(xs=xs, series=("system_prompt=support-agent-v4.7-rc2", "a=1"), points=()))
    assert long.rows[0].text == "support-agent-v4.…" and long.rows[0].x - CHAR * 18 >= 0
    assert long.cells[0].x > long.rows[0].x and long.cells[0].x + 17 * (long.cells[0].width + 1) <= long.width
    body = bytes(svg("probe_chart.svg", c=layout).body).decode()
    assert body.count("<rect ") == 34 + 5  # the cells and the legend's swatches
    assert "<script" not in body and "&lt;" in body and "<style" not in body  # the hostile label is text


def test_the_console_script_is_first_party_and_writes_text_only() -> None:
    from consumers.console.web import CSP, static_file

    found = static_file("console.js")
    assert found is not None and found[1].startswith("text/javascript")
    source = found[0].decode()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "Function("):
        assert sink not in source, sink
    assert "textContent" in source
    directives = dict(d.strip().split(" ", 1) for d in CSP.split(";"))
    assert directives["script-src"] == "'self'" and directives["connect-src"] == "'self'"
    assert "unsafe" not in CSP and directives["default-src"] == "'none'"


@pytest.mark.parametrize(
    ("rule", "error"),
    [
        ("decision.tool_calls.exists(t, ", "does not compile"),
        ("decison.prompt_version == 'v4.7'", "decison"),
        ("   ", "empty"),
    ],
)
def test_the_rule_check_names_the_compile_error_before_reading_anything(rule: str, error: str) -> None:
    from consumers.console.finding_pages import rule_preview

    # nothing is read for a rule that does not compile: no console, no session needed to answer
    answer = rule_preview(None, None, rule=rule, candidates=["dec_1"])  # type: ignore[arg-type]
    assert answer["ok"] is False and error in answer["error"], answer


def test_a_request_diff_names_the_one_changed_range_and_the_recorded_part_holding_it() -> None:
    from consumers.console.wire_diff import request_diff

    recorded = '{"messages":[{"content":"prefers Celsius ☕"}],"model":"m"}'.encode()
    start = recorded.index(b"Celsius")
    spans = [{"part": "memory:mem_pref", "start": start - 8, "end": start + len("Celsius ☕".encode())}]
    same = request_diff(1, recorded, recorded, spans)
    assert same.identical and same.recorded_size == same.sent_size == len(recorded)

    sent = recorded.replace(b"Celsius", b"Fahrenheit")
    changed = request_diff(1, recorded, sent, spans)
    assert not changed.identical and changed.parts == ("memory:mem_pref",)
    assert recorded[: changed.start] == sent[: changed.start]  # every byte before, identical
    assert recorded[changed.recorded_end :] == sent[changed.sent_end :]  # and after
    assert changed.same_bytes == len(recorded) - (changed.recorded_end - changed.start)

    elsewhere = request_diff(2, recorded, recorded.replace(b'"m"', b'"n"'), spans)
    assert elsewhere.parts == () and elsewhere.sequence == 2  # outside every recorded part: said so


def test_the_readmes_allow_list_entry_is_one_the_console_offers_by_name(tmp_path: Any) -> None:
    from pathlib import Path
    from types import SimpleNamespace

    from consumers.console.model_choice import model_choices

    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")
    (snippet,) = [b for b in re.findall(r"```toml\n(.*?)```", readme, flags=re.DOTALL) if "[[endpoint]]" in b]
    path = tmp_path / "model_endpoints.toml"
    path.write_text(snippet, encoding="utf-8")
    console = SimpleNamespace(rt=SimpleNamespace(settings=SimpleNamespace(resolved_model_endpoints=path)))
    choices = model_choices(console)  # type: ignore[arg-type]
    assert list(choices) == ["vllm-eu", "demo-scripted"]
    assert choices["vllm-eu"].described == "allow-listed endpoint https://vllm.eu.internal/v1"

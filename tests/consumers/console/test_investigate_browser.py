"""Investigate in a real browser (the console's harness: Debian's chromium, a real ``blackbox serve`` on
the demo's data): replay the flagged decision as captured with the demo's in-process model, chosen by
name; the job outlives its page; vary the system prompt to v4.6 and the outcome changes; every run is
in the decision's run history (``replay_runs``) and every read in the access log."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from console_world import ConsoleWorld, shot

pytestmark = pytest.mark.slow
WAIT_MS = 120_000


@pytest.fixture
def operator(world: ConsoleWorld, browser: Any, operator_state: dict[str, Any]) -> Iterator[Any]:
    context = browser.new_context(storage_state=operator_state)
    yield context
    context.close()


def _start(page: Any, world: ConsoleWorld, *, vary: str = "", runs: int = 1) -> str:
    page.goto(f"{world.console}/decisions/{world.failed_id}")
    page.click("#investigate")
    page.select_option("#model", "demo-scripted")
    page.fill("#runs", str(runs))
    if vary:
        page.select_option("#vary", vary)
    page.click("#start-replay")
    page.wait_for_url(f"{world.console}/jobs/*")
    url: str = page.url
    return url


def test_replay_as_captured_reproduces_the_flagged_decision(world: ConsoleWorld, operator: Any) -> None:
    page = operator.new_page()
    options = page.goto(f"{world.console}/decisions/{world.failed_id}/investigate")
    assert options is not None and options.status == 200
    names = page.locator("#model option").evaluate_all("os => os.map(o => o.value)")
    assert "demo-scripted" in names and not any("key" in n.lower() for n in names)
    job_url = _start(page, world, runs=3)
    page.close()  # the job belongs to the server, not to the page

    later = operator.new_page()
    later.goto(job_url)
    later.wait_for_selector("#reproduces", timeout=WAIT_MS)  # the page reloads itself until done
    assert later.inner_text("#job-state") == "done"
    assert "reproduces the capture" in later.inner_text("#reproduces")
    assert "does not" not in later.inner_text("#reproduces")
    captured = later.locator("#run-0")
    assert "reproduces the capture" in captured.locator(".row-verdict").inner_text()
    assert captured.locator(".first-divergent").inner_text() == "none"
    assert captured.locator("table.tools tr.differs").count() == 0
    assert captured.locator("table.tools tbody tr").count() >= 3  # lookup, balance, refund
    assert captured.locator(".diff del, .diff ins").count() == 0
    dist = captured.locator("table.distribution tbody tr")
    assert dist.count() == 1 and dist.first.locator("td").first.inner_text() == "3"
    assert "Fidelity" in later.inner_text("#fidelity")
    shot(later, "20-replay-as-captured")

    later.click("#run-history")
    rows = later.locator("#run-list tbody tr")
    kinds = [rows.nth(i).locator("td").nth(2).inner_text() for i in range(rows.count())]
    assert kinds.count("variance") + kinds.count("replay") >= 3, kinds
    later.goto(f"{world.console}/decisions/{world.failed_id}")  # the reads, as from the CLI
    history = later.locator("#access-history tbody tr")
    actions = [
        (history.nth(i).locator("td").nth(4).inner_text(), history.nth(i).locator("td").nth(6).inner_text())
        for i in range(history.count())
    ]
    assert any(a == "replay" and "console job" in d for a, d in actions), actions
    assert any(a == "replay" and "console job" not in d for a, d in actions), actions  # the replayer's gate


def test_vary_system_prompt_to_v46_changes_the_outcome(world: ConsoleWorld, operator: Any) -> None:
    page = operator.new_page()
    job_url = _start(page, world, vary="system_prompt=v4.6")
    page.wait_for_selector("#reproduces", timeout=WAIT_MS)
    assert job_url == page.url
    varied = page.locator("#run-1")
    assert varied.locator(".variable").inner_text() == "system_prompt"
    assert "outcome changed → system_prompt is implicated" in varied.locator(".row-verdict").inner_text()
    step = varied.locator(".first-divergent").inner_text()
    assert step != "none" and int(step) >= 1
    assert varied.locator(".diff del").count() >= 1 and varied.locator(".diff ins").count() >= 1
    shot(page, "21-vary-system-prompt-v4.6")

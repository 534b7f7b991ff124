"""Revealing personal data in the console, in Debian's chromium: a caller whose grant includes personal
data opens a decision with reveal and sees the original value, and ``access_log`` gets an allowed
``reveal`` row for it; a caller whose grant does not sees only placeholders, and no ``reveal`` row is
written for it.

The decision is made here: the demo's failed decision with an email address in its final output,
recorded with ``blackbox capture`` (the producer redacts the address and seals the original) and
ingested by the running ``blackbox serve``. (The demo's own captures carry no redacted content.)"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from console_world import ConsoleWorld, run, shot, token

from consumers.access.grants import Grant, append_grant

pytestmark = pytest.mark.slow

ORIGINAL = "jane.doe@example.com"
DECISION = "dec_01REVEAL00000000000000001"
REVEALER, READER = "privacy-officer", "plain-reader"


def _unsealed(value: Any) -> Any:
    """``value`` without its hashes (``blackbox capture`` computes them again when it seals)."""
    if isinstance(value, dict):
        return {k: _unsealed(v) for k, v in value.items() if not (k.endswith("Hash") or k == "hash")}
    if isinstance(value, list):
        return [_unsealed(v) for v in value]
    return value


@pytest.fixture(scope="module")
def operator(browser: Any, operator_state: dict[str, Any]) -> Iterator[Any]:
    context = browser.new_context(storage_state=operator_state)
    yield context.new_page()
    context.close()


@pytest.fixture(scope="module")
def with_personal_data(world: ConsoleWorld, operator: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The id of a decision whose final output held :data:`ORIGINAL`, redacted and sealed at capture."""
    stored = operator.request.get(f"{world.console}/decisions/{world.failed_id}/capture.json")
    assert stored.status == 200
    capture = copy.deepcopy(stored.json())
    for part in ("signature", "privacy"):  # a capture with a privacy section is left as it is
        capture.pop(part, None)
    capture["decisionId"] = DECISION
    capture["input"]["originUserId"] = "usr_reveal"  # nobody else's subject
    capture["agentConfiguration"]["systemPromptVersion"] = "privacy-test"  # outside the others' filters
    capture["executionTrace"]["finalOutputText"] = f"Refund sent; the receipt goes to {ORIGINAL}."
    path = tmp_path_factory.mktemp("reveal") / f"{DECISION}.json"
    path.write_text(json.dumps(_unsealed(capture)), encoding="utf-8")
    signing = {**world.env, "BLACKBOX_SIGNING_KEY": (world.data_dir / "signing-key.path").read_text().strip()}
    run(["capture", str(path)], signing)  # to the spool; the running server ingests it
    deadline = time.monotonic() + 90
    while operator.request.get(f"{world.console}/decisions/{DECISION}").status != 200:
        assert time.monotonic() < deadline, "blackbox serve did not ingest the capture"
        time.sleep(0.5)
    return DECISION


@pytest.fixture
def grants(world: ConsoleWorld) -> Iterator[None]:
    """Two regulators' grants over every agent, one with personal data; the grants file is put back as
    it was afterwards (the running server re-reads it when it changes)."""
    path = world.data_dir / "grants.toml"
    before = path.read_bytes() if path.exists() else None
    append_grant(
        path, Grant(caller=REVEALER, scope="regulator", purpose="subject access", personal_data=True)
    )
    append_grant(path, Grant(caller=READER, scope="regulator", purpose="complaint review"))
    try:
        yield
    finally:
        if before is None:
            path.unlink()
        else:
            path.write_bytes(before)


def _signed_in(browser: Any, world: ConsoleWorld, caller: str) -> Any:
    bearer = token(world.env, "--caller", caller, "--scope", "regulator")
    page = browser.new_context().new_page()
    page.goto(f"{world.console}/signin")
    page.fill("#token", bearer)
    page.click("button[type=submit]")
    page.wait_for_url(f"{world.console}/decisions")
    return page


def _history(operator: Any, world: ConsoleWorld, caller: str) -> list[tuple[str, str]]:
    """``(action, outcome)`` of ``caller``'s rows in the decision's access history (the operator's view)."""
    operator.goto(f"{world.console}/decisions/{DECISION}")
    rows = operator.locator("#access-history tbody tr")
    found = []
    for number in range(rows.count()):
        cells = rows.nth(number).locator("td").all_inner_texts()
        if cells[2] == caller:
            found.append((cells[4], cells[5]))
    return found


@pytest.mark.usefixtures("grants")
def test_a_personal_data_grant_reveals_the_original_and_logs_it(
    world: ConsoleWorld, browser: Any, operator: Any, with_personal_data: str
) -> None:
    page = _signed_in(browser, world, REVEALER)
    page.goto(f"{world.console}/decisions/{with_personal_data}")
    assert "Redacted at capture" in page.inner_text("#placeholders")
    assert page.inner_text("#final-output") == "Refund sent; the receipt goes to [EMAIL_1]."
    assert ORIGINAL not in page.content()  # placeholders until asked
    assert ("reveal", "allowed") not in _history(operator, world, REVEALER)
    page.click("#reveal")
    page.wait_for_url(f"{world.console}/decisions/{with_personal_data}?reveal=1")
    assert "Shown as the model saw it" in page.inner_text("#revealed")
    assert page.inner_text("#final-output") == f"Refund sent; the receipt goes to {ORIGINAL}."
    shot(page, "20-revealed")
    revealer = _history(operator, world, REVEALER)  # each page is a `show`; the revealed one also a `reveal`
    assert revealer.count(("reveal", "allowed")) == 1 and ("show", "allowed") in revealer
    assert [row for row in revealer if row[0] == "reveal"] == [("reveal", "allowed")]
    page.context.close()

    reader = _signed_in(browser, world, READER)
    reader.goto(f"{world.console}/decisions/{with_personal_data}")
    assert "Redacted at capture" in reader.inner_text("#placeholders")
    assert reader.inner_text("#final-output") == "Refund sent; the receipt goes to [EMAIL_1]."
    assert ORIGINAL not in reader.content() and reader.locator("#revealed").count() == 0
    assert set(_history(operator, world, READER)) == {("show", "allowed")}  # no reveal was logged for it
    reader.context.close()

"""The console in a real browser (Debian's chromium via Playwright) against a real ``blackbox serve``
on the demo's data: sign in, filter, open a decision, see its spans, verification and log inclusion,
download the bundle and verify it offline, scopes, and hostile content rendered inert."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from big import ENTRIES, NEEDLE
from console_world import ConsoleWorld, run, shot
from hostile import HOSTILE, MARKER

pytestmark = pytest.mark.slow
# Elements on the 200 KB / 50-span decision page: ~600 fixed, plus at most 40 per memory entry (its span,
# its provenance card and its table row); the context text itself adds none however long it is.
DOM_BUDGET = 600 + 40 * ENTRIES


@pytest.fixture
def operator(world: ConsoleWorld, browser: Any, operator_state: dict[str, Any]) -> Iterator[Any]:
    context = browser.new_context(storage_state=operator_state, accept_downloads=True)
    yield context.new_page()
    context.close()


def _signed_in_with_token(browser: Any, world: ConsoleWorld, token: str) -> Any:
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{world.console}/signin")
    page.fill("#token", token)
    page.click("button[type=submit]")
    page.wait_for_url(f"{world.console}/decisions")
    return page


def test_the_demo_link_signs_in_once(
    world: ConsoleWorld, browser: Any, operator_state: dict[str, Any]
) -> None:
    names = {c["name"]: c for c in operator_state["cookies"]}
    session = names["bbx_console"]
    assert session["httpOnly"] and session["sameSite"] == "Strict"
    context = browser.new_context()
    page = context.new_page()
    page.goto(world.link)
    page.click("#use-link")
    assert "unknown, used or expired" in page.inner_text("#problem")
    page.goto(f"{world.console}/decisions")
    assert page.url.endswith("/console/signin")  # no session was made
    context.close()


def test_filter_failed_decisions_on_v47_and_open_one(world: ConsoleWorld, operator: Any) -> None:
    page = operator
    page.goto(f"{world.console}/decisions")
    first = page.locator("a.decision-link").all_inner_texts()
    whole = int(page.inner_text("#count strong").replace(",", "").rstrip("+"))
    page.click("#next-page")  # keyset pages: the next 50, older, none repeated
    second = page.locator("a.decision-link").all_inner_texts()
    assert whole >= 300 and len(first) == len(second) == 50 and not set(first) & set(second)
    times = page.locator("#decision-list tbody tr td:first-child").all_inner_texts()
    assert times == sorted(times, reverse=True)
    page.goto(f"{world.console}/decisions")
    page.fill("input[name=prompt_version]", "v4.7")
    page.select_option("select[name=failed]", "yes")
    page.click("#apply")
    page.wait_for_load_state()
    assert "prompt_version=v4.7" in page.url and "failed=yes" in page.url  # the view is shareable
    total = int(page.inner_text("#count strong").replace(",", ""))
    rows = page.locator("#decision-list tbody tr")
    assert total >= 1 and rows.count() == min(total, 50)
    for i in range(rows.count()):
        cells = rows.nth(i).locator("td")
        assert cells.nth(10).inner_text() == "v4.7" and cells.nth(4).inner_text() == "failed"
    shot(page, "01-decisions-failed-v4.7")

    page.locator("a.decision-link").first.click()
    page.wait_for_load_state()
    assert page.inner_text("#verdict").startswith("verified: key sha256:")
    inclusion = page.inner_text("#log-inclusion")
    assert re.search(r"included: leaf \d+ of \d+ in blackbox\.local/log", inclusion), inclusion

    spans = page.locator("#context-text a.span.mem")
    assert spans.count() >= 1
    assert page.locator("#context-text mark.span.sys").count() == 1
    assert page.locator("#context-text mark.span.user").count() == 1
    assert page.locator(".prov:visible").count() == 0  # nothing selected yet
    spans.nth(1).click()
    card = page.locator(".prov:visible")
    assert card.count() == 1
    text = card.inner_text()
    target = spans.nth(1).get_attribute("href") or ""
    entry_id = page.locator(f"{target} h3").inner_text()
    assert entry_id.startswith("mem_") and "wrt_crm_sync" in text and "sha256:" in text
    # the memory table lists the same entry, in context order
    positions = [int(t) for t in page.locator("#memory tbody tr td:first-child").all_inner_texts()]
    assert positions == sorted(positions) and len(positions) >= spans.count()
    shot(page, "02-decision-span-selected")


def test_the_bundle_downloads_and_verifies_offline(
    world: ConsoleWorld, operator: Any, tmp_path: Path
) -> None:
    page = operator
    page.goto(f"{world.console}/decisions/{world.failed_id}")
    with page.expect_download() as info:
        page.click("#download-bundle")
    saved = tmp_path / info.value.suggested_filename
    info.value.save_as(saved)
    assert saved.name == f"{world.failed_id}.bundle.json"
    out = run(
        [
            "verify",
            "--bundle",
            str(saved),
            "--trust",
            str(world.data_dir / "trust.toml"),
            "--log-key",
            world.log_key,
        ],
        world.env,
    )
    assert out.stdout.startswith(f"verified: {world.failed_id}"), out.stdout
    assert "in log" in out.stdout


def test_a_counterparty_sees_only_its_subjects_decisions(
    world: ConsoleWorld, browser: Any, operator: Any
) -> None:
    page = _signed_in_with_token(browser, world, world.counterparty_token)
    assert page.locator("a.decision-link").count() == 0  # no grant yet: the capture admits operators only

    page.goto(f"{world.console}/access")  # it asks for access in the console, naming its authority
    ask = page.locator("#ask form")
    ask.locator("input[name=legal_basis]").fill("contract")
    ask.locator("input[name=reference]").fill("dispute-2026-17")
    ask.locator("input[name=purpose]").fill("a disputed refund")
    ask.locator("input[name=agent]").fill("agt_support")
    ask.locator("input[name=since]").fill("2020-01-01")
    ask.locator("input[name=until]").fill("2030-01-01")
    ask.locator("button").click()
    page.wait_for_load_state()
    mine = page.locator("#requests tbody tr", has_text="dispute-2026-17")
    assert mine.count() == 1 and "pending" in mine.inner_text()
    request_id = mine.locator("td").first.inner_text()
    operator.goto(f"{world.console}/access")  # the operator approves it in the console, with a reason
    form = operator.locator(f"form[action$='/access/requests/{request_id}/approve']")
    form.locator("input[name=reason]").fill("contract dispute, checked")
    form.locator("button").click()
    operator.wait_for_load_state()
    assert "approved by local-operator" in operator.inner_text("#requests")
    shot(operator, "03-access-approved")

    page.goto(f"{world.console}/decisions")
    listed = set(page.locator("a.decision-link").all_inner_texts())
    assert listed == set(world.counterparty_ids)  # all of its subject's decisions, nothing else
    assert world.hostile_id not in listed
    shot(page, "04-counterparty-list")
    page.goto(f"{world.console}/decisions/{sorted(listed)[0]}")
    assert page.inner_text("#verdict").startswith("verified")
    page.goto(f"{world.console}/decisions/{world.hostile_id}")  # about another person
    assert page.inner_text("h1") == "Refused"
    assert "not tied to counterparty" in page.inner_text("#problem")
    response = page.request.get(f"{world.console}/decisions/{world.hostile_id}/bundle.json")
    assert response.status == 403
    page.goto(f"{world.console}/access")
    assert page.locator("#tokens").count() == 0  # operators only
    page.context.close()


def test_a_regulator_without_a_grant_is_refused_content(world: ConsoleWorld, browser: Any) -> None:
    page = _signed_in_with_token(browser, world, world.regulator_token)
    assert page.locator("a.decision-link").count() == 0
    assert "outside your scope" in page.inner_text("#count")
    response = page.goto(f"{world.console}/decisions/{world.failed_id}")
    assert response is not None and response.status == 403
    assert "admits scope operator, not regulator" in page.inner_text("#problem")
    assert page.request.get(f"{world.console}/decisions/{world.failed_id}/capture.json").status == 403
    shot(page, "05-regulator-refused")
    page.context.close()


def test_hostile_content_renders_inert_and_is_shown(world: ConsoleWorld, operator: Any) -> None:
    page = operator
    dialogs: list[str] = []
    outside: list[str] = []

    def dialog(opened: Any) -> None:
        dialogs.append(opened.message)
        opened.dismiss()

    page.on("dialog", dialog)

    def leaving(request: Any) -> None:
        if not request.url.startswith(world.url):
            outside.append(request.url)

    page.on("request", leaving)
    page.goto(f"{world.console}/decisions?id_prefix=dec_01HOSTILE")
    page.goto(f"{world.console}/decisions/{world.hostile_id}")
    page.locator("#context-text a.span.mem").first.click()
    page.wait_for_timeout(300)
    shot(page, "06-hostile-decision")
    assert dialogs == [] and outside == []
    assert page.evaluate("document.scripts.length") == 0
    for selector in (
        "img",
        "iframe",
        "svg",
        "style:not(head style)",
        "[onerror]",
        "[onload]",
        "[href^='javascript:']",
    ):
        assert page.locator(selector).count() == 0, selector
    visible = HOSTILE.split(" mail ")[0]  # up to the address (redacted at capture), shown as text
    for where in ("#final-output", "#system-prompt", "#reasoning", "#context-text"):  # text parts
        assert visible in (page.locator(where).text_content() or ""), where
    as_json = json.dumps(visible, ensure_ascii=False)[1:-1]
    for where in (
        "#request-payload",
        "#tool-schema",
        "#tool-calls",
        "#external",
    ):  # JSON parts, pretty-printed
        assert as_json in (page.locator(where).text_content() or ""), where
    context = page.inner_text("#context-text")
    for mark in ("U+202E", "U+202C", "U+2066", "U+2069", "U+200B", "U+0007", "U+001B"):
        assert mark in context, mark
    assert "javascript:alert('xss-endpoint')" in page.inner_text("#configuration")  # shown, never a link
    assert MARKER not in " ".join(dialogs)
    # personal data (the producer redacted an address here) shows as placeholders; revealing needs a grant
    assert "Redacted at capture" in page.inner_text("#placeholders")
    page.click("#reveal")
    assert page.inner_text("h1") == "Refused"
    assert "personal_data = true" in page.inner_text("#problem")
    # the list shows the hostile row too, inert
    page.goto(f"{world.console}/decisions?id_prefix=dec_01HOSTILE")
    assert page.locator("a.decision-link").all_inner_texts() == [world.hostile_id]
    assert dialogs == [] and outside == []


def test_a_200kb_context_with_50_spans_is_findable_within_the_dom_budget(
    world: ConsoleWorld, operator: Any
) -> None:
    page = operator
    page.goto(f"{world.console}/decisions/{world.big_id}")
    assert page.locator("#context-text a.span.mem").count() == ENTRIES
    elements = page.evaluate("document.getElementsByTagName('*').length")
    assert elements <= DOM_BUDGET, elements
    assert page.evaluate(f"window.find({NEEDLE!r})")  # the browser's own find reaches the last entry
    text = page.inner_text("#context-text")
    assert len(text.encode("utf-8")) >= 200_000 - 2_000 and NEEDLE in text
    shot(page, "07-big-context")


def test_headers_csrf_and_sign_out(world: ConsoleWorld, operator: Any) -> None:
    page = operator
    response = page.goto(f"{world.console}/decisions")
    assert response is not None
    headers = response.headers
    assert headers["x-frame-options"] == "DENY"
    csp = dict(d.strip().split(" ", 1) for d in headers["content-security-policy"].split(";"))
    assert csp["default-src"] == "'none'" and csp["script-src"] == "'self'"  # the console's own files only
    assert "unsafe" not in headers["content-security-policy"]
    assert page.evaluate("document.scripts.length") == 0  # the list pages need none
    refused = page.request.post(f"{world.console}/signout", form={"csrf": "wrong"})
    assert refused.status == 403
    page.goto(f"{world.console}/decisions")
    assert page.url.endswith("/console/decisions")  # still signed in: the forged sign-out did nothing


def test_an_operator_creates_a_token_then_revokes_its_session_and_the_token(
    world: ConsoleWorld, browser: Any, operator: Any
) -> None:
    operator.goto(f"{world.console}/access")
    create = operator.locator("form[action$='/access/tokens']")
    create.locator("input[name=caller]").fill("temp-auditor")
    create.locator("select[name=scope]").select_option("regulator")
    create.locator("button").click()
    made = operator.inner_text("#new-token").strip()  # shown once
    assert made.startswith("bbx_")
    operator.goto(f"{world.console}/access")
    assert made not in operator.content()  # never again

    auditor = _signed_in_with_token(browser, world, made)
    row = operator.locator("#sessions tbody tr", has_text="temp-auditor").filter(has_text="active")
    operator.goto(f"{world.console}/access")
    row.first.locator("button").click()  # revoke the session
    auditor.goto(f"{world.console}/decisions")
    assert auditor.url.endswith("/console/signin")

    auditor.fill("#token", made)  # a new session with the same token, until the token is revoked
    auditor.click("button[type=submit]")
    auditor.wait_for_url(f"{world.console}/decisions")
    operator.goto(f"{world.console}/access")
    operator.locator("#tokens tbody tr", has_text="temp-auditor").locator("button").click()
    auditor.goto(f"{world.console}/decisions")
    assert auditor.url.endswith("/console/signin")  # the session died with its token
    auditor.fill("#token", made)
    auditor.click("button[type=submit]")
    assert "token revoked" in auditor.inner_text("#problem")
    log = operator.goto(f"{world.console}/access")
    assert log is not None and "chain intact" in operator.inner_text("#chain")
    auditor.context.close()


def test_a_trend_cell_opens_the_decisions_it_counts(world: ConsoleWorld, operator: Any) -> None:
    page = operator
    page.goto(f"{world.console}/trends?name=failure_rate&since=365d&until=now")
    assert page.title() == "Trends · blackbox console"
    assert page.locator("#findings").count() == 1 and page.locator("#replays").count() == 1  # each once
    assert page.locator("svg.chart rect.bar").count() >= 1  # the server's own chart, no script
    replayed = page.locator("#replays tbody tr a").all_inner_texts()  # the demo replayed and bisected one
    assert world.failed_id in replayed
    header = page.locator("#trend-table thead th").all_inner_texts()
    rows = page.locator("#trend-table tbody tr")
    picked = None
    for i in range(rows.count()):
        cells = dict(zip(header, rows.nth(i).locator("td").all_inner_texts(), strict=False))
        if cells.get("prompt_version") == "v4.7" and int(cells.get("failures") or 0) > 0:
            picked = i, cells
            break
    assert picked is not None, header
    shot(page, "08-trends")
    rows.nth(picked[0]).locator("a").click()
    page.wait_for_load_state()
    assert "prompt_version=v4.7" in page.url and "failed=yes" in page.url and "since=" in page.url
    assert page.inner_text("#count strong") == picked[1]["failures"]

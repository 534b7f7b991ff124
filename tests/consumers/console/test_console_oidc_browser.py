"""Signing in to the console at a real OpenID provider, in Debian's chromium: the sign-in page offers the
issuer, the provider authenticates the user, the console lands signed in with the scope of the ID
token's claim (a counterparty sees only its own decisions), the session is listed and revoked like any
other; a tampered state, the provider's refusal and a code issued to another client are refused with a
page that says why, and logged."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlparse

import pytest
from console_world import ConsoleWorld, shot
from idp import CLIENT_ID

from consumers.console.oidc import pkce_challenge

pytestmark = pytest.mark.slow


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context()
    yield context.new_page()
    context.close()


@pytest.fixture
def operator(browser: Any, operator_state: dict[str, Any]) -> Iterator[Any]:
    context = browser.new_context(storage_state=operator_state)
    yield context.new_page()
    context.close()


def _to_provider(world: ConsoleWorld, page: Any) -> None:
    page.goto(f"{world.console}/signin")
    assert page.inner_text("#signin-oidc") == f"Sign in with {world.idp.url}"
    page.click("#signin-oidc")
    page.wait_for_url(f"{world.idp.url}/oauth2/authorize?*", wait_until="domcontentloaded")


def _authenticate(page: Any, sub: str) -> None:
    page.get_by_placeholder("sub").fill(sub)
    page.get_by_role("button", name="Authorize").click()


def _with_query(url: str, **changes: str) -> str:
    parsed = urlparse(url)
    query = dict(parse_qsl(parsed.query))
    return parsed._replace(query=urlencode({**query, **changes})).geturl()


def test_a_counterparty_signs_in_at_the_provider_and_sees_only_its_decisions(
    world: ConsoleWorld, page: Any, operator: Any
) -> None:
    world.idp.user(world.user, blackbox_scope="counterparty")
    sent: list[str] = []
    page.on("request", lambda request: sent.append(request.url))
    _to_provider(world, page)
    shot(page, "10-oidc-provider")
    before = len(world.idp.token_requests)
    _authenticate(page, world.user)
    page.wait_for_url(f"{world.console}/decisions")
    assert page.inner_text(".me") == f"{world.user} (counterparty)"
    shot(page, "11-oidc-signed-in")

    # PKCE: the browser carried only the S256 challenge; the server sent the verifier to the token endpoint
    asked = world.idp.authorizations[-1]
    assert asked["code_challenge_method"] == "S256" and asked["client_id"] == CLIENT_ID
    (exchange,) = world.idp.token_requests[before:]
    assert pkce_challenge(exchange["code_verifier"]) == asked["code_challenge"]
    assert "python-httpx" in exchange["_user_agent"]  # server to server, never the browser
    assert not [url for url in sent if "/oauth2/token" in url or exchange["code_verifier"] in url]
    cookies = {c["name"]: c for c in page.context.cookies()}
    assert cookies["bbx_console"]["httpOnly"] and cookies["bbx_console"]["sameSite"] == "Strict"
    assert "bbx_console_oidc" not in cookies  # the flow cookie is gone once used
    assert all(exchange["code_verifier"] not in c["value"] for c in cookies.values())

    # the scope is the claim's: a counterparty tied to its sub sees its subject's decisions only (after the
    # counterparty test's approved grant, all of them; before it, none) and is refused another's
    listed = set(page.locator("a.decision-link").all_inner_texts())
    assert listed <= set(world.counterparty_ids)
    assert world.hostile_id not in listed
    page.goto(f"{world.console}/decisions/{world.hostile_id}")
    assert page.inner_text("h1") == "Refused"

    # an operator sees the session, made from the issuer, and revokes it: the browser is signed out
    operator.goto(f"{world.console}/access")
    row = operator.locator("#sessions tr", has_text=f"oidc:{world.idp.url}").filter(has_text=world.user)
    assert row.count() == 1 and "active" in row.inner_text()
    row.locator("button", has_text="revoke").click()
    operator.wait_for_load_state()
    row = operator.locator("#sessions tr", has_text=f"oidc:{world.idp.url}").filter(has_text=world.user)
    assert "revoked" in row.inner_text()
    page.goto(f"{world.console}/decisions")
    assert page.url == f"{world.console}/signin"


def test_an_operator_from_the_provider_lands_with_the_operator_scope(world: ConsoleWorld, page: Any) -> None:
    world.idp.user("sre@example.com", blackbox_scope="operator")
    _to_provider(world, page)
    _authenticate(page, "sre@example.com")
    page.wait_for_url(f"{world.console}/decisions")
    assert page.inner_text(".me") == "sre@example.com (operator)"
    assert page.locator("a.decision-link").count() == 50  # a full page: operators read every decision
    page.goto(f"{world.console}/access")
    assert page.locator("#tokens").count() == 1  # the operators' part of the Access page


def test_a_tampered_state_is_refused_with_a_page_and_logged(
    world: ConsoleWorld, page: Any, operator: Any
) -> None:
    world.idp.user("mallory@example.com", blackbox_scope="operator")
    _to_provider(world, page)
    page.goto(_with_query(page.url, state="tampered-state"), wait_until="domcontentloaded")
    _authenticate(page, "mallory@example.com")
    page.wait_for_url(f"{world.console}/signin/oidc/callback?*")
    assert page.inner_text("h1") == "Sign in"
    assert "does not match the sign-in this browser started (state)" in page.inner_text("#problem")
    assert "Traceback" not in page.content()
    shot(page, "12-oidc-tampered-state")
    page.goto(f"{world.console}/decisions")
    assert page.url == f"{world.console}/signin"  # no session
    operator.goto(f"{world.console}/access")
    refusals = operator.locator("#access-log tr", has_text="console OIDC sign-in refused")
    assert refusals.filter(has_text="(state)").count() >= 1


def test_the_providers_refusal_is_a_page_that_names_it(world: ConsoleWorld, page: Any) -> None:
    _to_provider(world, page)
    page.get_by_role("button", name="Deny").click()
    page.wait_for_url(f"{world.console}/signin/oidc/callback?*")
    assert "the identity provider refused the sign-in (access_denied)" in page.inner_text("#problem")
    page.goto(f"{world.console}/decisions")
    assert page.url == f"{world.console}/signin"


def test_a_code_issued_to_another_client_is_refused(world: ConsoleWorld, page: Any) -> None:
    # the provider authenticates the user for another client (another audience); the console's exchange
    # of that code, as its own client with its verifier, is refused and no session is made
    world.idp.user("eve@example.com", blackbox_scope="operator")
    _to_provider(world, page)
    page.goto(_with_query(page.url, client_id="another-app"), wait_until="domcontentloaded")
    _authenticate(page, "eve@example.com")
    page.wait_for_url(f"{world.console}/signin/oidc/callback?*")
    assert "did not exchange the code (invalid_grant)" in page.inner_text("#problem")
    page.goto(f"{world.console}/decisions")
    assert page.url == f"{world.console}/signin"

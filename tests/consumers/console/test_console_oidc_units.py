"""The console's OIDC sign-in without a browser, against a real OpenID provider (``oidc-provider-mock``
in a thread, :mod:`idp`): the authorization request (state, nonce, S256 challenge), the server-side
exchange with the verifier, and every refusal — the provider's, a tampered or replayed state, an
expired flow, an ID token for another audience, expired, with another nonce or without a scope."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx
import pytest
from idp import CLIENT_ID, CLIENT_SECRET, Idp, running_idp

from consumers.audit.oidc import oidc_from_settings
from consumers.console.oidc import (
    OidcSignIn,
    OidcSignInError,
    PendingSignIns,
    oidc_signin_from_settings,
    pkce_challenge,
)
from schemas.errors import ContractError

CALLBACK = "http://127.0.0.1:8700/console/signin/oidc/callback"


@pytest.fixture(scope="module")
def idp() -> Iterator[Idp]:
    with running_idp() as running:
        running.user("ops@example", blackbox_scope="operator")
        running.user("dpo@example", blackbox_scope="regulator")
        running.user("nobody@example")  # no scope claim
        yield running


def _signin(idp: Idp, tmp_path: Path, **kwargs: Any) -> OidcSignIn:
    return OidcSignIn(
        issuer=kwargs.pop("issuer", idp.url),
        client_id=CLIENT_ID,
        client_secret=CLIENT_SECRET,
        pending=PendingSignIns(tmp_path / "console-oidc.json"),
        **kwargs,
    )


def _now() -> datetime:
    return datetime.now(UTC)  # the provider stamps its tokens with the real clock


def _query(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlparse(url).query).items()}


def test_a_sign_in_sends_state_nonce_and_an_s256_challenge_and_exchanges_the_verifier(
    idp: Idp, tmp_path: Path
) -> None:
    signin = _signin(idp, tmp_path)
    url, cookie = signin.begin(redirect_url=CALLBACK, now=_now())
    asked = _query(url)
    assert url.startswith(f"{idp.url}/oauth2/authorize?")  # from discovery
    assert asked["client_id"] == CLIENT_ID and asked["redirect_uri"] == CALLBACK
    assert asked["code_challenge_method"] == "S256" and asked["response_type"] == "code"
    assert asked["scope"] == "openid" and len(asked["state"]) >= 32 and len(asked["nonce"]) >= 32
    kept = (tmp_path / "console-oidc.json").read_text()
    assert cookie.split(".", 1)[1] not in kept  # the browser's secret is kept only as its hash
    assert asked["code_challenge"] not in kept  # the verifier is kept, its challenge is not needed
    back = idp.authorize(url, "ops@example")
    assert back["state"] == asked["state"]
    before = len(idp.token_requests)
    caller = signin.finish(back, cookie=cookie, now=_now())
    assert (caller.identity, caller.scope) == ("ops@example", "operator")
    (exchange,) = idp.token_requests[before:]
    assert exchange["code"] == back["code"] and exchange["redirect_uri"] == CALLBACK
    assert pkce_challenge(exchange["code_verifier"]) == asked["code_challenge"]
    assert exchange["code_verifier"] in kept  # server-side, never sent to the browser
    with pytest.raises(OidcSignInError, match="expired or was not started in this browser") as replay:
        signin.finish(back, cookie=cookie, now=_now())  # the flow is used once
    assert replay.value.status == 400


def test_the_pkce_challenge_is_s256_as_authlib_computes_it() -> None:
    # Authlib (the provider's own library) as the independent reference for RFC 7636 S256
    from authlib.oauth2.rfc7636 import create_s256_code_challenge

    for verifier in ("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWjWEjXk", "a" * 43, "~._-" * 32):
        assert pkce_challenge(verifier) == create_s256_code_challenge(verifier)


def test_a_tampered_state_is_refused_and_ends_the_flow(idp: Idp, tmp_path: Path) -> None:
    signin = _signin(idp, tmp_path)
    url, cookie = signin.begin(redirect_url=CALLBACK, now=_now())
    back = idp.authorize(url, "ops@example")
    before = len(idp.token_requests)
    with pytest.raises(OidcSignInError, match=r"does not match the sign-in this browser started \(state\)"):
        signin.finish({**back, "state": back["state"][:-2] + "xx"}, cookie=cookie, now=_now())
    assert len(idp.token_requests) == before  # the code was never exchanged
    with pytest.raises(OidcSignInError, match="expired or was not started"):
        signin.finish(back, cookie=cookie, now=_now())  # and the right state cannot be tried after it


def test_an_answer_without_this_browsers_flow_cookie_is_refused(idp: Idp, tmp_path: Path) -> None:
    signin = _signin(idp, tmp_path)
    url, cookie = signin.begin(redirect_url=CALLBACK, now=_now())
    back = idp.authorize(url, "ops@example")
    for other in ("", cookie.split(".")[0] + ".forged", "no-dot"):
        with pytest.raises(OidcSignInError, match="expired or was not started in this browser"):
            signin.finish(back, cookie=other, now=_now())


def test_a_flow_expires_after_ten_minutes(idp: Idp, tmp_path: Path) -> None:
    signin = _signin(idp, tmp_path)
    start = _now()
    url, cookie = signin.begin(redirect_url=CALLBACK, now=start)
    back = idp.authorize(url, "ops@example")
    with pytest.raises(OidcSignInError, match="expired") as late:
        signin.finish(back, cookie=cookie, now=start + timedelta(minutes=10))
    assert late.value.status == 400


def test_the_providers_refusal_is_named(idp: Idp, tmp_path: Path) -> None:
    signin = _signin(idp, tmp_path)
    url, cookie = signin.begin(redirect_url=CALLBACK, now=_now())
    response = httpx.post(url, data={"action": "deny"}, timeout=10)
    back = _query(response.headers["location"])
    with pytest.raises(OidcSignInError, match=r"refused the sign-in \(access_denied\)") as refused:
        signin.finish(back, cookie=cookie, now=_now())
    assert refused.value.status == 401
    with pytest.raises(OidcSignInError, match=r"refused the sign-in \(an unnamed error\)"):
        signin.finish({"error": "<script>alert(1)</script>"}, cookie="", now=_now())


def test_a_code_the_provider_will_not_exchange_is_refused(idp: Idp, tmp_path: Path) -> None:
    signin = _signin(idp, tmp_path)
    url, cookie = signin.begin(redirect_url=CALLBACK, now=_now())
    back = idp.authorize(url, "ops@example")
    with pytest.raises(OidcSignInError, match=r"did not exchange the code \(invalid_grant\)") as bad:
        signin.finish({**back, "code": "not-a-code"}, cookie=cookie, now=_now())
    assert bad.value.status == 502


def test_an_id_token_for_another_audience_is_refused(idp: Idp, tmp_path: Path) -> None:
    signin = _signin(idp, tmp_path)
    token = idp.id_token_for("another-app", "ops@example", nonce="n-1")
    with pytest.raises(OidcSignInError, match=r"the ID token is not valid \(InvalidAudienceError\)"):
        signin.verify_id_token(token, nonce="n-1", now=_now())
    own = idp.id_token_for(CLIENT_ID, "ops@example", nonce="n-2")  # the same token for us holds
    assert signin.verify_id_token(own, nonce="n-2", now=_now()).identity == "ops@example"


def test_an_expired_id_token_another_nonce_or_no_scope_is_refused(idp: Idp, tmp_path: Path) -> None:
    signin = _signin(idp, tmp_path)
    token = idp.id_token_for(CLIENT_ID, "dpo@example", nonce="n-3")
    caller = signin.verify_id_token(token, nonce="n-3", now=_now())
    assert (caller.identity, caller.scope) == ("dpo@example", "regulator")
    with pytest.raises(OidcSignInError, match=r"not valid \(expired\)"):
        signin.verify_id_token(token, nonce="n-3", now=_now() + timedelta(hours=2))
    with pytest.raises(OidcSignInError, match="its nonce is not this sign-in's"):
        signin.verify_id_token(token, nonce="another", now=_now())
    scopeless = idp.id_token_for(CLIENT_ID, "nobody@example", nonce="n-4")
    with pytest.raises(OidcSignInError, match="blackbox_scope claim is not one of operator"):
        signin.verify_id_token(scopeless, nonce="n-4", now=_now())
    with pytest.raises(OidcSignInError, match=r"not valid \(DecodeError\)"):
        signin.verify_id_token("not.a.jwt", nonce="n-4", now=_now())


def test_discovery_must_name_the_configured_issuer(idp: Idp, tmp_path: Path) -> None:
    # the provider calls itself http://localhost:PORT; configured with a trailing slash, its document
    # names another issuer (OIDC Discovery 4.3: identical, or refused)
    signin = _signin(idp, tmp_path, issuer=f"{idp.url}/")
    with pytest.raises(OidcSignInError, match="names another issuer") as other:
        signin.begin(redirect_url=CALLBACK, now=_now())
    assert other.value.status == 502
    gone = _signin(idp, tmp_path, issuer="http://127.0.0.1:9")
    with pytest.raises(OidcSignInError, match="discovery document could not be read"):
        gone.begin(redirect_url=CALLBACK, now=_now())


def test_an_issuer_or_callback_over_plain_http_elsewhere_than_loopback_is_refused(tmp_path: Path) -> None:
    pending = PendingSignIns(tmp_path / "f.json")
    with pytest.raises(ContractError, match="oidc_issuer must be an https:// URL"):
        OidcSignIn(issuer="http://idp.example", client_id="c", pending=pending)
    with pytest.raises(ContractError, match="oidc_redirect_url must be an https:// URL"):
        OidcSignIn(
            issuer="https://idp.example", client_id="c", pending=pending, redirect_url="http://x.example/cb"
        )


def _settings(tmp_path: Path, **values: Any) -> SimpleNamespace:
    base = {
        "oidc_issuer": None,
        "oidc_audience": None,
        "oidc_jwks_url": None,
        "oidc_scope_claim": "blackbox_scope",
        "oidc_client_id": None,
        "oidc_client_secret": None,
        "oidc_redirect_url": None,
        "oidc_scopes": "openid",
        "data_dir": tmp_path,
    }
    return SimpleNamespace(**{**base, **values})


def test_an_issuer_with_a_client_id_signs_in_to_the_console_and_leaves_the_endpoint_on_tokens(
    tmp_path: Path,
) -> None:
    console_only = _settings(tmp_path, oidc_issuer="https://idp.example", oidc_client_id="c")
    assert oidc_from_settings(console_only) is None
    signin = oidc_signin_from_settings(console_only)
    assert signin is not None and signin.issuer == "https://idp.example"
    assert oidc_signin_from_settings(_settings(tmp_path, oidc_issuer="https://idp.example")) is None
    with pytest.raises(ContractError, match="needs BLACKBOX_OIDC_ISSUER"):
        oidc_signin_from_settings(_settings(tmp_path, oidc_client_id="c"))
    with pytest.raises(ContractError, match="together"):  # an issuer alone still configures nothing
        oidc_from_settings(_settings(tmp_path, oidc_issuer="https://idp.example"))

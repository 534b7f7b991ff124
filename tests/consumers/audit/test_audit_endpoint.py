"""``blackbox serve``: real HTTP on a loopback port. Identity from tokens (or OIDC) only, grants after
capture through access requests, counterparties confined to their own decisions, every request logged,
fail closed when the log cannot be written, limits and JSON errors (issue 13, item 1)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import jwt
from audit_world import World, bearer
from cryptography.hazmat.primitives.asymmetric import rsa

from consumers.index.confined import QueryRefused
from schemas.errors import AccessDenied

REQUEST = {
    "decisions": ["dec_a_alice_1"],
    "authority": {"legalBasis": "FSMA 2000 s.165 notice", "reference": "FCA-2026-0042"},
    "purpose": "complaint review",
}


def _denied(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r["outcome"] == "denied"]


def test_no_token_or_a_bad_token_is_401_json_and_logged(world: World) -> None:
    token = world.token("ops-lead", "operator")
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    with world.serve() as client:
        for headers in ({}, bearer(forged), bearer("bbx_000000000000_nope"), {"Authorization": token}):
            answer = client.get("/v1/decisions/dec_a_alice_1", headers=headers)
            assert answer.status_code == 401, answer.text
            assert answer.json()["status"] == 401 and "capture" not in answer.json()
            assert answer.headers["www-authenticate"] == "Bearer"
        # self-declared identity is never trusted: the CLI's settings and headers change nothing
        answer = client.get(
            "/v1/decisions/dec_a_alice_1",
            headers={"X-Blackbox-Caller": "ops-lead", "X-Blackbox-Scope": "operator"},
        )
        assert answer.status_code == 401
    rows = world.access_rows()
    assert len(rows) == 5 and all(r["caller"] == "-" and r["outcome"] == "denied" for r in rows)
    assert all(r["detail"].startswith("401 ") for r in rows)


def test_a_revoked_or_expired_token_is_401(world: World) -> None:
    world.clock.now = datetime.now(UTC)  # the CLI issues the token at the real time
    token = world.token("ops-lead", "operator", "--expires", "2d")
    token_id = token.split("_")[1]
    with world.serve() as client:
        assert client.get("/v1/decisions/dec_a_alice_1", headers=bearer(token)).status_code == 200
        world.clock.now += timedelta(days=3)
        expired = client.get("/v1/decisions/dec_a_alice_1", headers=bearer(token))
        assert expired.status_code == 401 and "expired" in expired.json()["error"]
        world.clock.now -= timedelta(days=3)
        assert world.cli("access", "token", "revoke", token_id).exit_code == 0
        revoked = client.get("/v1/decisions/dec_a_alice_1", headers=bearer(token))
        assert revoked.status_code == 401 and "revoked" in revoked.json()["error"]
    listed = json.loads(world.cli("access", "token", "list", "--json").stdout)
    assert [t["state"] for t in listed] == ["revoked"] and token not in json.dumps(listed)


def test_a_regulator_without_a_grant_gets_403_and_the_refusal_is_logged(world: World) -> None:
    regulator = world.token("fca-examiner", "regulator")
    with world.serve() as client:
        for path in ("", "/verification", "/replays", "/bundle"):
            answer = client.get(f"/v1/decisions/dec_a_alice_1{path}", headers=bearer(regulator))
            assert answer.status_code == 403, answer.text
            assert "no grant covers it for you" in answer.json()["error"] and "capture" not in answer.json()
            # the server's paths are the operator's business (issue 24, finding 8)
            assert "grants" not in answer.text and str(world.data) not in answer.text
    denied = _denied(world.access_rows())
    assert [(r["caller"], r["scope"], r["action"]) for r in denied] == [
        ("fca-examiner", "regulator", a) for a in ("show", "verify", "replays", "export")
    ]
    assert all(r["decision_id"] == "dec_a_alice_1" for r in denied)
    assert all("no grant widens it" in r["detail"] for r in denied)  # the log keeps the gate's reason


def test_whether_a_decision_exists_is_no_oracle_for_anyone_but_an_operator(world: World) -> None:
    regulator = world.token("fca-examiner", "regulator")
    operator = world.token("ops-lead", "operator")
    with world.serve() as client:
        for path in ("", "/verification", "/replays", "/bundle"):
            real = client.get(f"/v1/decisions/dec_a_alice_1{path}", headers=bearer(regulator))
            made_up = client.get(
                f"/v1/decisions/dec_a_alice_1{path}".replace("alice_1", "zed_9"), headers=bearer(regulator)
            )
            assert real.status_code == made_up.status_code == 403
            assert real.json()["error"].replace("alice_1", "zed_9") == made_up.json()["error"]
        assert client.get("/v1/decisions/dec_zed_9", headers=bearer(operator)).status_code == 404


def test_request_approve_read_until_the_grant_expires(world: World) -> None:
    regulator = world.token("fca-examiner", "regulator")
    operator = world.token("ops-lead", "operator")
    with world.serve() as client:
        filed = client.post("/v1/access-requests", headers=bearer(regulator), json=REQUEST)
        assert filed.status_code == 201, filed.text
        request_id = filed.json()["id"]
        assert filed.json()["status"] == "pending" and filed.json()["caller"] == "fca-examiner"
        # the regulator cannot approve its own request; the operator can
        own = client.post(
            f"/v1/access-requests/{request_id}/approve", headers=bearer(regulator), json={"reason": "me"}
        )
        assert own.status_code == 403
        assert client.get("/v1/decisions/dec_a_alice_1", headers=bearer(regulator)).status_code == 403
        forever = client.post(  # a lifetime past the calendar is a 422 naming the field, never a 500
            f"/v1/access-requests/{request_id}/approve",
            headers=bearer(operator),
            json={"reason": "notice checked", "expires": "999999999d"},
        )
        assert forever.status_code == 422 and "expires" in forever.json()["error"], forever.text
        approved = client.post(
            f"/v1/access-requests/{request_id}/approve",
            headers=bearer(operator),
            json={"reason": "notice checked", "expires": "7d"},
        )
        assert approved.status_code == 200 and approved.json()["status"] == "approved", approved.text

        read = client.get("/v1/decisions/dec_a_alice_1", headers=bearer(regulator))
        assert read.status_code == 200, read.text
        view = read.json()
        assert (
            view["capture"]["executionTrace"]["finalOutputText"]
            == world.captures["dec_a_alice_1"]["executionTrace"]["finalOutputText"]
            and view["verification"]["verdict"] == "verified"
        )
        assert "stored" not in view and view["retention"]["retention_class"]  # a regulator's view
        # the grant covers the named decision only
        assert client.get("/v1/decisions/dec_a_alice_2", headers=bearer(regulator)).status_code == 403

        world.clock.now += timedelta(days=7, seconds=1)
        expired = client.get("/v1/decisions/dec_a_alice_1", headers=bearer(regulator))
        assert expired.status_code == 403, expired.text

    rows = world.access_rows()
    allowed = [
        r
        for r in rows
        if r["caller"] == "fca-examiner" and r["action"] == "show" and r["outcome"] == "allowed"
    ]
    assert len(allowed) == 1
    assert allowed[0]["grant_id"] == request_id
    assert allowed[0]["authority"] == "FSMA 2000 s.165 notice; ref FCA-2026-0042"
    assert allowed[0]["purpose"] == "complaint review"
    assert [(r["action"], r["outcome"]) for r in rows if r["caller"] == "ops-lead"] == [
        ("approve", "denied"),  # the lifetime past the calendar, logged as refused
        ("approve", "allowed"),
    ]
    grants = (world.data / "grants.toml").read_text(encoding="utf-8")
    assert f'request = "{request_id}"' in grants and 'approved_by = "ops-lead"' in grants


def test_an_operator_approves_with_the_cli_while_the_server_runs(world: World) -> None:
    regulator = world.token("fca-examiner", "regulator")
    with world.serve() as client:
        request_id = client.post("/v1/access-requests", headers=bearer(regulator), json=REQUEST).json()["id"]
        listed = world.cli("access", "requests")
        assert request_id in listed.stdout and "pending" in listed.stdout
        approved = world.cli("access", "approve", request_id, "--reason", "notice checked", "--expires", "2d")
        assert approved.exit_code == 0, approved.output
        assert client.get("/v1/decisions/dec_a_alice_1", headers=bearer(regulator)).status_code == 200
        again = world.cli("access", "refuse", request_id, "--reason", "changed my mind")
        assert again.exit_code != 0 and "already approved" in str(again.exception)
    # a regulator at the CLI cannot approve (it is logged as refused)
    second = world.cli("access", "approve", request_id, "--reason", "x", BLACKBOX_SCOPE="regulator")
    assert isinstance(second.exception, AccessDenied) and "only an operator decides" in str(second.exception)


def test_a_counterparty_only_sees_decisions_tied_to_it(world: World) -> None:
    acme = world.token("acme-bank", "counterparty", "--subject", "usr_alice")
    operator = world.token("ops-lead", "operator")
    with world.serve() as client:
        filed = client.post(
            "/v1/access-requests",
            headers=bearer(acme),
            json={
                "agent": "agt_support_1",
                "since": "2026-07-20T00:00:00Z",
                "until": "2026-07-21T00:00:00Z",
                "authority": {"legalBasis": "contract dispute clause 14", "reference": "DSP-9"},
                "purpose": "chargeback dispute",
            },
        )
        assert filed.status_code == 201, filed.text
        client.post(
            f"/v1/access-requests/{filed.json()['id']}/approve",
            headers=bearer(operator),
            json={"reason": "dispute DSP-9 open"},
        )
        mine = client.get("/v1/decisions/dec_a_alice_1", headers=bearer(acme))
        assert mine.status_code == 200 and set(mine.json()) == {
            "decisionId",
            "contentState",
            "note",
            "kind",
            "verification",
            "capture",
        }
        assert client.get("/v1/decisions/dec_a_alice_2/bundle", headers=bearer(acme)).status_code == 200
        theirs = client.get("/v1/decisions/dec_a_bob_1", headers=bearer(acme))
        assert theirs.status_code == 403 and "no grant covers it for you" in theirs.json()["error"]
        other_agent = client.get("/v1/decisions/dec_a_billing_1", headers=bearer(acme))
        assert other_agent.status_code == 403
        # it sees its own requests only; the operator sees all
        assert len(client.get("/v1/access-requests", headers=bearer(acme)).json()["requests"]) == 1
        assert len(client.get("/v1/access-requests", headers=bearer(operator)).json()["requests"]) == 1
    tied = [r for r in _denied(world.access_rows()) if r["decision_id"] == "dec_a_bob_1"]
    assert "not tied to counterparty acme-bank" in tied[0]["detail"]  # the log keeps why


def test_an_unwritable_access_log_fails_closed_with_503(world: World) -> None:
    operator = world.token("ops-lead", "operator")
    with world.serve() as client:
        assert client.get("/v1/decisions/dec_a_alice_1", headers=bearer(operator)).status_code == 200
        with world.runtime() as rt:
            rt.index.command("DROP TABLE access_log SYNC")
        for path in ("", "/verification", "/replays", "/bundle"):
            answer = client.get(f"/v1/decisions/dec_a_alice_1{path}", headers=bearer(operator))
            assert answer.status_code == 503, answer.text
            body = answer.json()
            assert "access log could not be written" in body["error"]
            assert set(body) == {"error", "status"}  # nothing of the capture
        assert client.get("/v1/decisions/dec_a_alice_1").status_code == 503  # even a 401 must be logged
        assert client.post("/v1/access-requests", headers=bearer(operator), json=REQUEST).status_code == 503


def test_limits_and_errors_are_json_never_a_traceback(world: World) -> None:
    operator = world.token("ops-lead", "operator")
    regulator = world.token("fca-examiner", "regulator")
    with world.serve(audit_max_body_bytes=1024, audit_rate=0.01, audit_burst=3) as client:
        big = client.post(
            "/v1/access-requests", headers=bearer(regulator), json={**REQUEST, "purpose": "x" * 5000}
        )
        assert big.status_code == 413 and "larger than 1024 bytes" in big.json()["error"]
        # a body naming its own caller or scope is refused, not silently ignored
        forged = client.post(
            "/v1/access-requests", headers=bearer(regulator), json={**REQUEST, "caller": "ops-lead"}
        )
        assert forged.status_code == 422 and "caller" in forged.json()["error"]
        # without a credential, a body full of chosen keys is a 401 that logs none of them
        planted = client.post("/v1/access-requests", json={"\u001b[2Jplanted_key": 1, **REQUEST})
        assert planted.status_code == 401
        assert client.post("/v1/access-requests", content=b"{not json").status_code == 401
        not_json = client.post(
            "/v1/access-requests", content=b'{"\x1b planted', headers={"Content-Type": "application/json"}
        )
        assert (
            not_json.status_code == 422 and "planted" not in not_json.text
        )  # refused before anyone is known
        for path in ("/v1/nothing", "/v1/decisions/dec_nope"):
            answer = client.get(path, headers=bearer(operator))
            assert answer.status_code == 404 and answer.json()["status"] == 404
        limited = [client.get("/v1/decisions/dec_a_alice_1", headers=bearer(operator)) for _ in range(3)]
        assert limited[-1].status_code == 429 and int(limited[-1].headers["retry-after"]) >= 1
        assert "Traceback" not in "".join(a.text for a in (big, forged, *limited))
    denied = _denied(world.access_rows())
    # logged: what an authenticated caller was refused (the unknown decision, the malformed body, the
    # rate limit); not logged: a body over the limit (nobody is known yet), a route that does not exist
    assert sorted(r["detail"][:3] for r in denied) == ["401", "401", "404", "422", "429"]
    assert not any("planted" in r["detail"] for r in world.access_rows())
    (invalid,) = [r for r in denied if r["detail"].startswith("422")]
    assert "caller" not in invalid["detail"] and "extra_forbidden" in invalid["detail"]


def test_the_access_log_is_chained_and_a_changed_row_is_caught(world: World) -> None:
    operator = world.token("ops-lead", "operator")
    with world.serve() as client:
        for _ in range(3):
            client.get("/v1/decisions/dec_a_alice_1", headers=bearer(operator))
    intact = world.cli("access", "log", "verify")
    assert intact.exit_code == 0 and "intact: 3 chained rows" in intact.stdout
    with world.runtime() as rt:
        rt.index.command(
            "ALTER TABLE access_log UPDATE outcome = 'denied' WHERE seq = 2 SETTINGS mutations_sync = 1"
        )
    broken = world.cli("access", "log", "verify")
    assert broken.exit_code == 1 and "BROKEN at seq 2" in broken.stdout and "changed" in broken.stdout
    with world.runtime() as rt:
        rt.index.command("ALTER TABLE access_log DELETE WHERE seq = 2 SETTINGS mutations_sync = 1")
    removed = world.cli("access", "log", "verify")
    assert removed.exit_code == 1 and "seq 3 follows 1 (rows missing)" in removed.stdout


def test_query_is_operator_only_and_the_refusal_is_logged(world: World) -> None:
    refused = world.cli(
        "query", "SELECT origin_user_id FROM decisions", BLACKBOX_SCOPE="regulator", BLACKBOX_CALLER="fca"
    )
    assert isinstance(refused.exception, QueryRefused) and "operators only" in str(refused.exception)
    allowed = world.cli("query", "SELECT count() AS n FROM decisions", "--json")
    assert allowed.exit_code == 0, allowed.output
    rows = [r for r in world.access_rows() if r["action"] == "query"]
    assert [(r["caller"], r["outcome"]) for r in rows] == [("fca", "denied"), ("local-operator", "allowed")]


def test_a_grants_file_with_only_a_regulator_grant_keeps_the_operators_in(world: World) -> None:
    (world.data / "grants.toml").write_text(
        '[[grant]]\ncaller = "fca-examiner"\nscope = "regulator"\nexpires = 2099-01-01T00:00:00Z\n',
        encoding="utf-8",
    )
    shown = world.cli("show", "dec_a_alice_1")
    assert shown.exit_code == 0, shown.output
    regulator = world.token("fca-examiner", "regulator")
    with world.serve() as client:  # and the regulator's grant widens the capture's operator-only scope
        assert client.get("/v1/decisions/dec_a_alice_1", headers=bearer(regulator)).status_code == 200


def test_oidc_jwts_against_a_local_jwks(world: World) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    document = json.dumps({"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]}).encode()

    class Jwks(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(document)))
            self.end_headers()
            self.wfile.write(document)

        def log_message(self, *args: Any) -> None:
            pass

    idp = ThreadingHTTPServer(("127.0.0.1", 0), Jwks)
    threading.Thread(target=idp.serve_forever, daemon=True).start()
    issuer, audience = "https://idp.example", "blackbox-audit"
    now = int(world.clock.now.timestamp())

    def token(**claims: Any) -> str:
        body = {
            "iss": issuer,
            "aud": audience,
            "sub": "ops-sso",
            "exp": now + 600,
            "iat": now,
            "blackbox_scope": "operator",
        }
        return jwt.encode({**body, **claims}, key, algorithm="RS256", headers={"kid": "k1"})

    jwks_url = f"http://127.0.0.1:{idp.server_address[1]}/jwks.json"
    oidc = {"oidc_issuer": issuer, "oidc_audience": audience, "oidc_jwks_url": jwks_url}
    try:
        with world.serve(**oidc) as client:
            good = client.get("/v1/decisions/dec_a_alice_1", headers=bearer(token()))
            assert good.status_code == 200, good.text
            for bad in (
                token(aud="other"),
                token(iss="https://evil"),
                token(exp=now - 3600),
                token(blackbox_scope="root"),
            ):
                assert client.get("/v1/decisions/dec_a_alice_1", headers=bearer(bad)).status_code == 401
            other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            forged = jwt.encode(
                {"iss": issuer, "aud": audience, "sub": "x", "exp": now + 600, "blackbox_scope": "operator"},
                other,
                algorithm="RS256",
                headers={"kid": "k1"},
            )
            assert client.get("/v1/decisions/dec_a_alice_1", headers=bearer(forged)).status_code == 401
    finally:
        idp.shutdown()
    allowed = [r for r in world.access_rows() if r["outcome"] == "allowed"]
    assert [(r["caller"], r["scope"]) for r in allowed] == [("ops-sso", "operator")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_blackbox_serve_serves_its_openapi_document_and_the_api(world: World) -> None:
    operator = world.token("ops-lead", "operator")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("BLACKBOX_")} | world.env
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from consumers.entry import main; main()",
            "serve",
            "--listen",
            f"127.0.0.1:{port}",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                document = httpx.get(f"{url}/openapi.json", timeout=2)
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.communicate()[1]
                assert time.monotonic() < deadline, "blackbox serve did not listen"
                time.sleep(0.2)
        assert document.status_code == 200
        paths = document.json()["paths"]
        assert {
            "/v1/decisions/{decision_id}",
            "/v1/decisions/{decision_id}/bundle",
            "/v1/access-requests",
        } <= set(paths)
        assert httpx.get(f"{url}/v1/decisions/dec_a_alice_1").status_code == 401
        read = httpx.get(f"{url}/v1/decisions/dec_a_alice_1", headers=bearer(operator), timeout=30)
        assert read.status_code == 200 and read.json()["capture"]["decisionId"] == "dec_a_alice_1"
    finally:
        proc.terminate()
        proc.wait(timeout=30)

"""``GET /v1/agents/{agent_id}/record``: an operator reads any agent's record, a counterparty only the
agent its grant names (others 403, an unknown agent 404), every answer logged; the body is signed by
the service's log key and ``blackbox verify --record`` checks it offline, refusing a changed figure."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from audit_world import DECISIONS, World, bearer, capture

from consumers.pacts.record import wilson_lower
from producers.evidence import seal
from producers.transports.spool.files import SpoolWriter
from schemas.codec import encode_capture

# decisions added to the world's four, so the figures are not all ones: (agent, user, outcome, consequential)
EXTRA = {
    "dec_b_support_fail_1": ("agt_support_1", "usr_dan", "failure", True),
    "dec_b_support_fail_2": ("agt_support_1", "usr_dan", "failure", False),
    "dec_b_support_ok_1": ("agt_support_1", "usr_erin", "success", False),
}


def _add_decisions(world: World) -> None:
    writer = SpoolWriter(world.data / "spool")
    for i, (did, (agent, user, status, flagged)) in enumerate(EXTRA.items(), start=len(DECISIONS)):
        c = capture(did, agent, user, i)
        c["outcome"] = {"status": status, "reason": None}
        c["consequential"] = {"flagged": flagged, "reason": "issues refunds" if flagged else None}
        sealed = seal(c, world.signer)
        world.captures[did] = sealed
        writer.append(agent.encode(), encode_capture(sealed))
    writer.publish()
    consumed = world.cli("consume", "--drain", "--max-wait", "0.1")
    assert consumed.exit_code == 0 and f"indexed={len(EXTRA)}" in consumed.output, consumed.output


def _hand_count(world: World, agent: str) -> dict[str, int]:
    mine = [c for c in world.captures.values() if c["agentId"] == agent]
    failed = [c for c in mine if c["outcome"]["status"] == "failure"]
    return {
        "decisions": len(mine),
        "consequential": sum(1 for c in mine if c["consequential"]["flagged"]),
        "failures": len(failed),
        "clean": len(mine) - len(failed),
    }


def test_the_signed_record_is_scoped_logged_and_verifies_offline(world: World, tmp_path: Path) -> None:
    _add_decisions(world)
    operator = world.token("ops-lead", "operator")
    acme = world.token("acme-bank", "counterparty", "--subject", "usr_alice")
    other = world.token("other-bank", "counterparty")
    since = "2026-07-01T00:00:00Z"
    with world.serve() as client:
        filed = client.post(
            "/v1/access-requests",
            headers=bearer(acme),
            json={
                "agent": "agt_support_1",
                "since": "2026-07-20T00:00:00Z",
                "until": "2026-07-21T00:00:00Z",
                "authority": {"legalBasis": "contract clause 14", "reference": "DSP-9"},
                "purpose": "assess the agent before a contract renewal",
            },
        )
        assert filed.status_code == 201, filed.text
        approved = client.post(
            f"/v1/access-requests/{filed.json()['id']}/approve",
            headers=bearer(operator),
            json={"reason": "renewal"},
        )
        assert approved.status_code == 200, approved.text

        as_operator = client.get(f"/v1/agents/agt_support_1/record?since={since}", headers=bearer(operator))
        assert as_operator.status_code == 200, as_operator.text
        as_acme = client.get(f"/v1/agents/agt_support_1/record?since={since}", headers=bearer(acme))
        assert as_acme.status_code == 200, as_acme.text
        # acme's grant names agt_support_1 only; other-bank has none; billing is an operator's to read
        assert client.get("/v1/agents/agt_billing_1/record", headers=bearer(acme)).status_code == 403
        assert client.get("/v1/agents/agt_support_1/record", headers=bearer(other)).status_code == 403
        assert client.get("/v1/agents/agt_billing_1/record", headers=bearer(operator)).status_code == 200
        unknown = client.get("/v1/agents/agt_nobody/record", headers=bearer(operator))
        assert unknown.status_code == 404 and "agt_nobody" in unknown.json()["error"]
        assert client.get("/v1/agents/agt_support_1/record").status_code == 401
        bad_since = client.get("/v1/agents/agt_support_1/record?since=yesterday", headers=bearer(operator))
        assert bad_since.status_code == 422

    envelope = as_acme.json()
    assert envelope["payloadType"] == "application/vnd.blackbox.agent-record+json;version=v1"
    body = json.loads(base64.b64decode(envelope["payload"]))
    want = _hand_count(world, "agt_support_1")
    assert want == {"decisions": 6, "consequential": 4, "failures": 2, "clean": 4}
    assert {k: body[k] for k in want} == want
    assert body["score"] == round(wilson_lower(4, 6), 4) and body["agent"] == "agt_support_1"

    rows = [r for r in world.access_rows() if r["action"] == "record"]
    allowed = {(r["caller"], r["agent_id"]) for r in rows if r["outcome"] == "allowed"}
    assert allowed == {
        ("ops-lead", "agt_support_1"),
        ("acme-bank", "agt_support_1"),
        ("ops-lead", "agt_billing_1"),
        ("ops-lead", "agt_nobody"),
    }
    denied = [r for r in rows if r["outcome"] == "denied"]
    assert {(r["caller"], r["agent_id"]) for r in denied if "no grant names agent" in r["detail"]} == {
        ("acme-bank", "agt_billing_1"),
        ("other-bank", "agt_support_1"),
    }
    assert any("404" in r["detail"] for r in denied) and any("401" in r["detail"] for r in denied)

    # anyone holding the service's verifier key checks the relayed document offline
    vkey = world.cli("log", "key").stdout.strip()
    relayed = tmp_path / "record.json"
    relayed.write_text(json.dumps(envelope))
    vkey_file = tmp_path / "log.vkey"
    vkey_file.write_text(vkey + "\n")
    ok = world.cli("verify", "--record", str(relayed), "--log-key", str(vkey_file))
    assert ok.exit_code == 0, ok.output
    assert "verified: record of agt_support_1" in ok.stdout and "6 decisions" in ok.stdout

    inflated = dict(
        envelope,
        payload=base64.b64encode(
            base64.b64decode(envelope["payload"]).replace(b'"failures":2', b'"failures":0')
        ).decode(),
    )
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(inflated))
    bad = world.cli("verify", "--record", str(forged), "--log-key", vkey)
    assert bad.exit_code == 1 and "NOT VERIFIED" in bad.stdout and "part=signature" in bad.stdout
    nokey = world.cli("verify", "--record", str(relayed))
    assert nokey.exit_code != 0 and "--record needs --log-key" in str(nokey.exception)  # the CLI prints it

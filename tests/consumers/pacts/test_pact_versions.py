"""Pact versions: propose, show, diff and history through the real ``blackbox`` CLI, stored signed in
the data directory's blob store; a tampered version and an untrusted key are refused by name."""

from __future__ import annotations

import json
from pathlib import Path

from pact_world import blackbox

from producers.blobstore import LocalBlobStore

V1 = """agents = ["agt_support*"]

[pact.refund_cap]
description = "Refunds stay under 500."
rule = 'decision.tool_calls.filter(t, t.name == "issue_refund").all(t, t.input.amount <= 500)'
"""
V2 = (
    V1.replace("<= 500", "<= 200")
    + """
[pact.no_failed_tools]
rule = 'decision.tool_calls.all(t, !t.failed)'
"""
)
OTHER = V1.replace('agents = ["agt_support*"]', 'agents = ["agt_billing"]')


def _operator(data: Path) -> dict[str, str]:
    env = {"BLACKBOX_DATA_DIR": str(data)}
    blackbox(["keys", "generate", "--dir", str(data / "operator"), "--note", "pact operator"], env=env)
    (key,) = (data / "operator").glob("*.key")
    return {**env, "BLACKBOX_PACT_KEY": str(key)}


def _propose(env: dict[str, str], tmp: Path, text: str, reason: str) -> str:
    path = tmp / f"pacts-{abs(hash(text))}.toml"
    path.write_text(text, encoding="utf-8")
    out = blackbox(["pact", "propose", str(path), "--reason", reason, "--author", "ops"], env=env).stdout
    assert out.startswith("proposed pv_"), out
    return out.split()[1]


def test_versions_chain_sign_and_list(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = _operator(data)
    v1 = _propose(env, tmp_path, V1, "first commitments")
    v2 = _propose(env, tmp_path, V2, "tighter refunds")
    other = _propose(env, tmp_path, OTHER, "billing agent")

    shown = json.loads(blackbox(["pact", "show", v2, "--json"], env=env).stdout)
    assert shown["version"] == v2 and shown["reason"] == "tighter refunds" and shown["author"] == "ops"
    assert shown["parent"] == ""  # nothing applied yet: no parent
    assert shown["agents"] == ["agt_support*"] and shown["document"] == V2
    assert shown["contentHash"].startswith("sha256:") and shown["keyId"].startswith("sha256:")

    d = blackbox(["pact", "diff", v1, v2], env=env).stdout
    assert "rule added:   no_failed_tools" in d and "rule changed: refund_cap" in d
    assert "-rule = 'decision" in d and "<= 200" in d

    rows = json.loads(blackbox(["pact", "history", "--json"], env=env).stdout)
    assert [r["version"] for r in rows] == [v1, v2, other]
    mine = json.loads(blackbox(["pact", "history", "--agent", "agt_support", "--json"], env=env).stdout)
    assert [r["version"] for r in mine] == [v1, v2]
    mirrored = json.loads(
        blackbox(
            ["query", "SELECT version, reason FROM pact_versions FINAL ORDER BY version", "--json"], env=env
        ).stdout
    )
    assert {r["version"] for r in mirrored} == {v1, v2, other}


def test_a_tampered_version_and_an_untrusted_key_are_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = _operator(data)
    v1 = _propose(env, tmp_path, V1, "first")
    store = LocalBlobStore(data / "blobs")
    key = f"pacts/versions/{v1}.json"
    assert store.exists(key), sorted(store.list(""))
    envelope = json.loads(store.get(key))
    import base64

    payload = json.loads(base64.b64decode(envelope["payload"]))
    payload["document"] = payload["document"].replace("<= 500", "<= 5000")
    envelope["payload"] = base64.b64encode(json.dumps(payload).encode()).decode()
    store.put(key, json.dumps(envelope).encode())
    out = blackbox(["pact", "show", v1], env=env, ok=False)
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert f"pact version {v1}" in out.stderr + out.stdout and "signature" in out.stderr + out.stdout

    stranger = tmp_path / "stranger"
    from producers.evidence import generate_keypair

    private, _ = generate_keypair(stranger)
    bad = {**env, "BLACKBOX_PACT_KEY": str(private)}
    (tmp_path / "p.toml").write_text(V1, encoding="utf-8")
    out = blackbox(["pact", "propose", str(tmp_path / "p.toml"), "--reason", "x"], env=bad, ok=False)
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert "unknown to the trust store" in out.stderr + out.stdout

    (tmp_path / "bad.toml").write_text(V1.replace("t.input.amount", "t.input.amount +"), encoding="utf-8")
    out = blackbox(["pact", "propose", str(tmp_path / "bad.toml"), "--reason", "x"], env=env, ok=False)
    assert out.returncode != 0 and "refund_cap" in out.stderr + out.stdout

"""Each applied pact version is an entry of its own type in the transparency log: ``pact apply`` (and
``--force``) appends it, ``pact bundle`` exports it with its inclusion proof, ``verify --bundle``
checks it offline and refuses a flipped byte; capture leaves are untouched and ``log verify`` passes."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from pact_world import PACTS, blackbox, record
from test_pact_versions import _operator, _propose

from consumers.tlog.entries import PACT_LEAF_TYPE, parse_pact_leaf
from producers.evidence.tlog import LEAF_TYPE, parse_leaf

REFUNDS = PACTS.split("# Reads content")[0]
LOOSE = """
[pact.final_output_present]
rule = 'decision.final_output.size() > 0'
"""


def _leaves(env: dict[str, str]) -> list[dict[str, str]]:
    out = blackbox(
        [
            "query",
            "SELECT leaf_index, decision_id, leaf FROM tlog_leaves FINAL ORDER BY leaf_index",
            "--json",
        ],
        env=env,
    )
    return json.loads(out.stdout)


def test_an_applied_version_is_logged_exported_and_verified_offline(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    record(data, decisions=40, days=1)
    blackbox(["consume", "--drain", "--workers", "1"], env={"BLACKBOX_DATA_DIR": str(data)})
    env = _operator(data)
    captures = _leaves(env)
    assert captures and all(json.loads(r["leaf"])["type"] == LEAF_TYPE for r in captures)

    strict = _propose(env, tmp_path, REFUNDS, "the refund rules")
    applied = json.loads(blackbox(["pact", "apply", strict, "--json"], env=env).stdout)
    assert applied["applied"] and applied["logged"].startswith(f"pact:{strict}@")

    # LOOSE's rule errors on every structured-only capture: the gate fails, nothing is logged ...
    loose = _propose(env, tmp_path, LOOSE, "drop the refund rules")
    refused = blackbox(["pact", "apply", loose, "--json"], env=env, ok=False)
    assert refused.returncode == 1 and json.loads(refused.stdout)["logged"] == ""
    assert len(_leaves(env)) == len(captures) + 1
    # ... until it is forced
    forced = blackbox(["pact", "apply", loose, "--force", "--reason", "incident 7", "--json"], env=env)
    assert json.loads(forced.stdout)["logged"].startswith(f"pact:{loose}@")

    leaves = _leaves(env)
    assert leaves[: len(captures)] == captures  # capture leaves byte-identical, in place
    pact_rows = leaves[len(captures) :]
    assert [r["decision_id"].split("@")[0] for r in pact_rows] == [f"pact:{strict}", f"pact:{loose}"]
    for row in pact_rows:
        fields = parse_pact_leaf(row["leaf"].encode())
        assert fields["type"] == PACT_LEAF_TYPE
        try:
            parse_leaf(row["leaf"].encode())  # a capture verifier refuses it: domain-separated
        except Exception as exc:
            assert "not a blackbox.tlog.capture/v1 leaf" in str(exc)
        else:
            raise AssertionError("a pact leaf parsed as a capture leaf")

    audit = blackbox(["log", "verify"], env=env)
    assert "2 leaves are applied pact versions" in audit.stdout, audit.stdout

    vkey = blackbox(["log", "key"], env=env).stdout.strip()
    vkey_file = tmp_path / "log.vkey"
    vkey_file.write_text(vkey + "\n")  # as the README shows: `blackbox log key` saved to a file
    (public,) = (data / "operator").glob("*.pub")
    for version, is_forced, reason in ((strict, False, "the refund rules"), (loose, True, "incident 7")):
        out = tmp_path / f"{version}.json"
        wrote = blackbox(["pact", "bundle", version, "-o", str(out)], env=env).stdout
        assert wrote.startswith(f"wrote {out}: {version}, leaf ")
        bundle = json.loads(out.read_text())
        assert bundle["applied"]["forced"] is is_forced and bundle["applied"]["reason"] == reason
        key = str(vkey_file) if is_forced else vkey  # the key as a file, and as text
        ok = blackbox(["verify", "--bundle", str(out), "--trust", str(public), "--log-key", key], env={})
        assert f"verified: pact version {version}" in ok.stdout and "logged: leaf " in ok.stdout
        assert ("(FORCED)" in ok.stdout) is is_forced

    # without a pinned log key: incomplete, exit 1
    out = tmp_path / f"{loose}.json"
    unpinned = blackbox(["verify", "--bundle", str(out), "--trust", str(public)], env={}, ok=False)
    assert unpinned.returncode == 1 and "INCOMPLETE" in unpinned.stdout

    # a flipped byte anywhere that matters is refused, naming the part
    original = json.loads(out.read_text())
    flips = {
        "envelope": lambda b: b["envelope"].__setitem__("payload", _flip(b["envelope"]["payload"])),
        "applied": lambda b: b["applied"].__setitem__("forced", False),
        "reason": lambda b: b["applied"].__setitem__("reason", "incident 8"),
        "proof": lambda b: b["transparency"]["proof"]["hashes"].__setitem__(
            0, _flip(b["transparency"]["proof"]["hashes"][0])
        ),
    }
    for name, flip in flips.items():
        tampered = json.loads(json.dumps(original))
        flip(tampered)
        bad = tmp_path / f"bad-{name}.json"
        bad.write_text(json.dumps(tampered))
        res = blackbox(
            ["verify", "--bundle", str(bad), "--trust", str(public), "--log-key", vkey], env={}, ok=False
        )
        assert res.returncode == 1 and "NOT VERIFIED" in res.stdout and "Traceback" not in res.stderr, name
        assert ("part=envelope" if name == "envelope" else "part=transparency") in res.stdout, (
            name,
            res.stdout,
        )

    # another key than the operator's is refused
    other = tmp_path / "other"
    blackbox(["keys", "generate", "--dir", str(other)], env=env)
    (other_pub,) = other.glob("*.pub")
    res = blackbox(
        ["verify", "--bundle", str(out), "--trust", str(other_pub), "--log-key", vkey], env={}, ok=False
    )
    assert res.returncode == 1 and "part=envelope" in res.stdout


def test_a_version_never_applied_has_no_bundle(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = _operator(data)
    version = _propose(env, tmp_path, PACTS, "never applied")
    res = blackbox(["pact", "bundle", version, "-o", str(tmp_path / "b.json")], env=env, ok=False)
    assert res.returncode != 0 and "has no entry in the transparency log" in res.stdout + res.stderr
    assert "Traceback" not in res.stderr


def _flip(text: str) -> str:
    raw = bytearray(base64.b64decode(text))
    raw[len(raw) // 2] ^= 0x01
    return base64.b64encode(bytes(raw)).decode("ascii")

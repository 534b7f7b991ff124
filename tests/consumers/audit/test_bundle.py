"""Evidence bundles (issue 13, item 2): ``blackbox export`` / ``GET …/bundle`` write one file that
verifies offline (capture, envelope, key and trust record, inclusion proof under a signed checkpoint);
one changed byte in any part is refused naming that part; ``show --json`` output verifies with
``verify --file``."""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from audit_world import World, bearer
from cryptography.hazmat.primitives import serialization

from producers.evidence import TrustStore
from producers.evidence.bundle import BUNDLE_FORMAT, verify_bundle
from schemas.errors import VerificationError


def _log_key(world: World) -> str:
    result = world.cli("log", "key")
    assert result.exit_code == 0, result.output
    return result.stdout.strip().splitlines()[-1]


def _export(world: World, tmp_path: Path, decision_id: str = "dec_a_alice_1") -> tuple[Path, dict[str, Any]]:
    out = tmp_path / f"{decision_id}.bundle.json"
    result = world.cli("export", decision_id, "--out", str(out))
    assert result.exit_code == 0 and "with an inclusion proof" in result.stdout, result.output
    return out, json.loads(out.read_text(encoding="utf-8"))


def test_an_exported_bundle_verifies_offline_with_its_inclusion_proof(world: World, tmp_path: Path) -> None:
    path, bundle = _export(world, tmp_path)
    assert bundle["bundleFormat"] == BUNDLE_FORMAT and set(bundle) >= {
        "capture",
        "envelope",
        "signer",
        "transparency",
    }
    key = _log_key(world)
    trust = str(world.data / "trust.toml")
    ok = world.cli("verify", "--bundle", str(path), "--trust", trust, "--log-key", key)
    assert ok.exit_code == 0, ok.output
    assert (
        ok.stdout.startswith("verified: dec_a_alice_1 key=sha256:")
        and "in log blackbox.local/log at leaf" in ok.stdout
    )
    # the signer's public key alone is trust enough (the bundle's trust record gives its window)
    pem = tmp_path / "signer.pub"
    pem.write_bytes(
        world.signer.public_key.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    assert world.cli("verify", "--bundle", str(path), "--trust", str(pem), "--log-key", key).exit_code == 0

    unpinned = world.cli("verify", "--bundle", str(path), "--trust", trust)
    assert (
        unpinned.exit_code == 1
        and unpinned.stdout.startswith("INCOMPLETE:")
        and "--log-key" in unpinned.stdout
    )
    no_proof = tmp_path / "no-proof.json"
    no_proof.write_text(json.dumps({**bundle, "transparency": None}), encoding="utf-8")
    plain = world.cli("verify", "--bundle", str(no_proof), "--trust", trust, "--log-key", key)
    assert plain.exit_code == 1 and "part=transparency: no inclusion proof" in plain.stdout


def test_the_endpoint_serves_the_same_bundle(world: World, tmp_path: Path) -> None:
    _, exported = _export(world, tmp_path)
    operator = world.token("ops-lead", "operator")
    with world.serve() as client:
        served = client.get("/v1/decisions/dec_a_alice_1/bundle", headers=bearer(operator))
    assert served.status_code == 200, served.text
    bundle = served.json()
    for part in ("capture", "envelope", "signer"):
        assert bundle[part] == exported[part]
    store = TrustStore.load(world.data / "trust.toml")
    report = verify_bundle(bundle, store, log_key=_log_key(world))
    assert report.complete and report.decision_id == "dec_a_alice_1"


def _flip(text: str, at: int) -> str:
    """One character changed (a different base64 digit / letter / digit, so the text stays well formed)."""
    ch = text[at]
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    return (
        text[:at]
        + (alphabet[(alphabet.index(ch) + 1) % len(alphabet)] if ch in alphabet else "x")
        + text[at + 1 :]
    )


def _b64_flip(text: str) -> str:
    raw = bytearray(base64.b64decode(text))
    raw[len(raw) // 2] ^= 0x01
    return base64.b64encode(bytes(raw)).decode()


Edit = Callable[[dict[str, Any]], None]


def _set(path: tuple[Any, ...], change: Callable[[Any], Any]) -> Edit:
    def edit(bundle: dict[str, Any]) -> None:
        holder = bundle
        for key in path[:-1]:
            holder = holder[key]
        holder[path[-1]] = change(holder[path[-1]])

    return edit


TAMPERS: dict[str, tuple[Edit, str]] = {
    "content": (
        _set(("capture", "executionTrace", "finalOutputText"), lambda t: _flip(t, 3)),
        "capture.executionTrace.finalOutputText",
    ),
    "tool output": (
        _set(("capture", "executionTrace", "toolCalls", 0, "output", "balance"), lambda v: v + 1),
        "capture.executionTrace.toolCalls[0].output",
    ),
    "metadata": (_set(("capture", "agentId"), lambda t: _flip(t, 4)), "capture.agentId"),
    "capturedAt": (
        _set(("capture", "capturedAt"), lambda t: t.replace(":00.", ":01.", 1)),
        "capture.capturedAt",
    ),
    "envelope payload": (_set(("envelope", "payload"), _b64_flip), "envelope"),
    "envelope signature": (_set(("envelope", "signatures", 0, "sig"), _b64_flip), "envelope"),
    "payload type": (_set(("envelope", "payloadType"), lambda t: t + "x"), "envelope.payloadType"),
    "public key": (_set(("signer", "publicKey"), _b64_flip), "signer.publicKey"),
    "key id": (_set(("signer", "keyId"), lambda t: _flip(t, 10)), "signer.keyId"),
    "trust window": (
        _set(("signer", "trustRecord", "not_before"), lambda t: "1999" + t[4:]),
        "signer.trustRecord",
    ),
    "trust note": (_set(("signer", "trustRecord", "note"), lambda t: t + "!"), "signer.trustRecord"),
    "proof hash": (_set(("transparency", "proof", "hashes", 0), _b64_flip), "transparency.inclusion"),
    "leaf index": (_set(("transparency", "proof", "leafIndex"), lambda n: n + 1), "transparency.inclusion"),
    "leaf": (_set(("transparency", "proof", "leaf"), _b64_flip), "transparency.leaf"),
    "checkpoint root": (
        _set(
            ("transparency", "proof", "checkpoint"),
            lambda t: t.replace("\n", "\nX", 2).replace("\nX", "\n", 1),
        ),
        "transparency.checkpoint",
    ),
    "label": (_set(("decisionId",), lambda t: _flip(t, 5)), "decisionId"),
}


@pytest.mark.parametrize("what", sorted(TAMPERS))
def test_one_changed_byte_in_any_part_is_refused_naming_the_part(
    what: str, world: World, tmp_path: Path
) -> None:
    _, bundle = _export(world, tmp_path)
    edit, part = TAMPERS[what]
    tampered = copy.deepcopy(bundle)
    edit(tampered)
    assert tampered != bundle
    with pytest.raises(VerificationError) as refused:
        verify_bundle(tampered, TrustStore.load(world.data / "trust.toml"), log_key=_log_key(world))
    assert refused.value.part == part, str(refused.value)
    # and through the CLI: NOT VERIFIED, the part named, exit 1
    file = tmp_path / "tampered.json"
    file.write_text(json.dumps(tampered), encoding="utf-8")
    out = world.cli(
        "verify",
        "--bundle",
        str(file),
        "--trust",
        str(world.data / "trust.toml"),
        "--log-key",
        _log_key(world),
    )
    assert out.exit_code == 1 and "NOT VERIFIED: " in out.stdout and f"part={part} " in out.stdout, out.output


def test_show_json_output_verifies_with_verify_file(world: World, tmp_path: Path) -> None:
    shown = world.cli("show", "dec_a_alice_1", "--json")
    assert shown.exit_code == 0, shown.output
    view = tmp_path / "shown.json"
    view.write_text(shown.stdout, encoding="utf-8")
    ok = world.cli("verify", "--file", str(view))
    assert ok.exit_code == 0 and ok.stdout.startswith("verified: dec_a_alice_1"), ok.output

    edited = json.loads(shown.stdout)
    edited["capture"]["executionTrace"]["finalOutputText"] = "Refund approved in full."
    view.write_text(json.dumps(edited), encoding="utf-8")
    bad = world.cli("verify", "--file", str(view))
    assert bad.exit_code == 1 and "part=executionTrace.finalOutputText" in bad.stdout

    edited["capture"] = None  # what show prints when the stored bytes could not be read
    view.write_text(json.dumps(edited), encoding="utf-8")
    missing = world.cli("verify", "--file", str(view))
    assert missing.exit_code != 0 and "holds no capture" in str(missing.exception)

    bundle, _ = _export(world, tmp_path)
    wrong = world.cli("verify", "--file", str(bundle))
    assert "verify it with --bundle" in str(wrong.exception)

"""DSSE PAE, ed25519 keys and key ids, and the trust store's windows and revocations."""

from __future__ import annotations

import base64
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import GOLDEN, golden_signer
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from producers.evidence import (
    MANIFEST_PAYLOAD_TYPE,
    Signer,
    TrustStore,
    generate_keypair,
    key_id,
    key_id_from_ref,
    load_signer,
    pae,
    public_key_from,
    public_raw,
)
from producers.evidence.dsse import b64decode
from schemas.errors import ContractError, KeyNotTrusted

GOLDEN_KEY_ID = "sha256:887a1e68274021a912bc0da9b69e7deef32435752a4f2036de27cf8fef1972e4"
T0 = datetime(2026, 7, 1, tzinfo=UTC)


def test_pae_matches_the_dsse_protocol_vector() -> None:
    # secure-systems-lab/dsse protocol.md, "Test Vectors"
    assert pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )
    assert pae("t", b"") == b"DSSEv1 1 t 0 "
    assert pae("é", b"\x00") == b"DSSEv1 2 \xc3\xa9 1 \x00"  # lengths are byte lengths


def test_dsse_base64_accepts_standard_and_url_safe() -> None:
    data = bytes(range(250, 256)) * 3
    assert b64decode(base64.b64encode(data).decode()) == data
    assert b64decode(base64.urlsafe_b64encode(data).decode().rstrip("=")) == data
    with pytest.raises(ValueError):
        b64decode("not base64!")


def test_rfc8032_test_1() -> None:
    signer = Signer.from_seed(
        bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
    )
    assert signer.public_raw.hex() == "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
    assert signer.sign(b"").hex() == (
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
    )


def test_golden_key_id_and_signature_are_fixed() -> None:
    signer = golden_signer()
    assert signer.key_id == GOLDEN_KEY_ID == key_id(signer.public_raw)
    assert signer.public_key_ref == f"did:blackbox:test#{GOLDEN_KEY_ID}"
    assert signer.sign(pae(MANIFEST_PAYLOAD_TYPE, b'{"decisionId":"dec_1"}')).hex() == (
        "c99d794d8ae4636837f620bc3bea88374e493baf52972d75bde175c0a8f4d386"
        "f5490feec81d78e145a92b819b27d9f61e88aea1fb9fe118936da2ec9d19a606"
    )
    assert "PRIVATE" not in repr(signer) and GOLDEN_KEY_ID in repr(signer)


def test_key_id_from_ref() -> None:
    assert key_id_from_ref(GOLDEN_KEY_ID) == GOLDEN_KEY_ID
    assert key_id_from_ref(f"did:armalo:agent:agt_1#{GOLDEN_KEY_ID}") == GOLDEN_KEY_ID
    assert key_id_from_ref("did:armalo:agent:agt_1#runtime-key-1") is None
    assert key_id_from_ref("sha256:ABC") is None
    assert key_id_from_ref(None) is None


def test_generate_keypair_writes_a_0600_private_key_that_loads(tmp_path: Path) -> None:
    private_path, public_path = generate_keypair(tmp_path / "keys")
    assert stat.S_IMODE(private_path.stat().st_mode) == 0o600
    assert private_path.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    signer = load_signer(private_path, name="rt_1")
    assert public_raw(public_key_from(public_path)) == signer.public_raw
    assert private_path.name.startswith("blackbox-" + signer.key_id[7:23])
    assert signer.public_key_ref == f"rt_1#{signer.key_id}"
    other_private, _ = generate_keypair(tmp_path / "keys")
    assert other_private != private_path


def test_load_signer_from_base64_seed_and_seed_file(tmp_path: Path) -> None:
    seed_b64 = (GOLDEN / "test-key.seed").read_text().strip()
    assert load_signer(b64=seed_b64).key_id == GOLDEN_KEY_ID
    assert load_signer(GOLDEN / "test-key.seed").key_id == GOLDEN_KEY_ID

    class Secret:
        def get_secret_value(self) -> str:
            return seed_b64

    assert load_signer(b64=Secret()).key_id == GOLDEN_KEY_ID
    assert base64.b64encode(load_signer(b64=seed_b64).seed()).decode() == seed_b64


@pytest.mark.parametrize(
    ("kwargs", "path"),
    [
        ({}, "signing_key"),
        ({"path": "x", "b64": "y"}, "signing_key"),
        ({"b64": "not base64"}, "signing_key_b64"),
        ({"b64": base64.b64encode(b"short").decode()}, "signing_key_b64"),
        ({"path": "/nonexistent/key"}, "signing_key"),
    ],
)
def test_load_signer_errors_name_the_setting(kwargs: dict[str, str], path: str) -> None:
    with pytest.raises(ContractError) as info:
        load_signer(**kwargs)  # type: ignore[arg-type]
    assert info.value.path == path


def test_public_key_from_raw_base64_and_pem() -> None:
    raw = golden_signer().public_raw
    for form in (raw, base64.b64encode(raw).decode()):
        assert isinstance(public_key_from(form), Ed25519PublicKey)
        assert public_raw(public_key_from(form)) == raw


# --- trust store ------------------------------------------------------------------------------
def _store() -> tuple[TrustStore, str]:
    store = TrustStore()
    key = store.add(
        golden_signer().public_raw, not_before=T0, not_after=T0 + timedelta(days=30), note="q3 key"
    )
    return store, key.key_id


def test_window_is_checked_at_the_signing_time() -> None:
    store, kid = _store()
    later = T0 + timedelta(days=365)
    assert store.check(kid, T0, now=later) is not None  # an expired key still verifies what it signed in time
    assert store.check(kid, T0 + timedelta(days=29), now=later) is not None
    with pytest.raises(KeyNotTrusted, match="not yet valid"):
        store.check(kid, T0 - timedelta(seconds=1), now=later)
    with pytest.raises(KeyNotTrusted, match="expired") as info:
        store.check(kid, T0 + timedelta(days=30), now=later)
    assert info.value.part == "key"


def test_unknown_key() -> None:
    store, _ = _store()
    with pytest.raises(KeyNotTrusted, match="unknown"):
        store.check("sha256:" + "00" * 32, T0)


def test_revocation_refuses_every_signature_from_the_revocation_on() -> None:
    store, kid = _store()
    signed = T0 + timedelta(days=1)
    revoked = T0 + timedelta(days=10)
    store.revoke(kid, revoked)
    # Signed before the compromise, checked after it: refused (a thief can backdate capturedAt).
    with pytest.raises(KeyNotTrusted, match="revoked at 2026-07-11T00:00:00Z"):
        store.check(kid, signed, now=revoked + timedelta(hours=1))
    # Checked as of a moment before the revocation: accepted.
    assert store.check(kid, signed, now=revoked - timedelta(hours=1)) is not None
    # A signature claiming a time after the revocation is refused whatever "now" is.
    with pytest.raises(KeyNotTrusted, match="revoked"):
        store.check(kid, revoked + timedelta(days=1), now=revoked - timedelta(days=5))
    # An earlier revocation is never moved later.
    assert store.revoke(kid, revoked + timedelta(days=3)).revoked_at == revoked
    with pytest.raises(KeyNotTrusted):
        store.revoke("sha256:" + "11" * 32, revoked)


def test_add_keeps_a_revocation_and_checks_the_window() -> None:
    store, kid = _store()
    store.revoke(kid, T0 + timedelta(days=2))
    again = store.add(golden_signer().public_raw, not_before=T0)
    assert again.revoked_at == T0 + timedelta(days=2)
    with pytest.raises(ContractError):
        store.add(golden_signer().public_raw, not_before=T0, not_after=T0)


def test_trust_store_round_trips_through_toml(tmp_path: Path) -> None:
    store, kid = _store()
    other = Signer.from_seed(bytes(range(32)))
    store.add(
        other.public_raw,
        not_before=datetime(2026, 1, 1, 12, 30, 15, 250000),
        note='quote " and \\ and\nnewline\x7f',
    )
    store.revoke(kid, T0 + timedelta(days=3))
    path = tmp_path / "nested" / "trust.toml"
    store.save(path)
    loaded = TrustStore.load(path)
    assert list(loaded) == list(store)
    assert loaded.get(other.key_id) is not None
    assert loaded.get(other.key_id).not_before == datetime(2026, 1, 1, 12, 30, 15, 250000, tzinfo=UTC)  # type: ignore[union-attr]
    assert kid in loaded and len(loaded) == 2


def test_trust_store_load_errors(tmp_path: Path) -> None:
    with pytest.raises(ContractError, match="no trust store"):
        TrustStore.load(tmp_path / "missing.toml")
    assert len(TrustStore.load(tmp_path / "missing.toml", missing_ok=True)) == 0
    raw = base64.b64encode(golden_signer().public_raw).decode()
    bad = tmp_path / "bad.toml"
    bad.write_text(
        f'[[keys]]\nkey_id = "sha256:{"00" * 32}"\npublic_key = "{raw}"\nnot_before = 2026-01-01T00:00:00Z\n'
    )
    with pytest.raises(ContractError, match="does not match") as info:
        TrustStore.load(bad)
    assert info.value.path.endswith("keys[0].key_id")
    bad.write_text(f'[[keys]]\npublic_key = "{raw}"\n')
    with pytest.raises(ContractError, match="not_before"):
        TrustStore.load(bad)
    bad.write_text(
        f'[[keys]]\npublic_key = "{raw}"\nnot_before = 2026-01-01\nnot_after = "2026-02-01T00:00:00+01:00"\n'
    )
    key = next(iter(TrustStore.load(bad)))
    assert key.not_before == datetime(2026, 1, 1, tzinfo=UTC)
    assert key.not_after == datetime(2026, 1, 31, 23, tzinfo=UTC)
    bad.write_text("[[keys\n")
    with pytest.raises(ContractError, match="cannot read"):
        TrustStore.load(bad)

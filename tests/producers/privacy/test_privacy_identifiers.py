"""Identifiers of people signed only as salted commitments (DESIGN 16): the raw id sealed under the
decision's data key (sealed original and key record), revealed and matched while the key lives, gone
with it, and the capture verifying throughout; captures sealed before keep their raw ids and verify."""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from consumers.access.gate import AccessGate
from consumers.access.grants import Grant, Grants
from consumers.access.log import AccessRecord
from consumers.access.scopes import Caller
from consumers.privacy.identifiers import IdentifierResolver
from consumers.privacy.reveal import reveal
from producers.blobstore import LocalBlobStore
from producers.evidence import Signer, TrustStore, seal, verify_capture
from producers.policy import CapturePolicy
from producers.privacy.identifiers import COMMITMENT_PREFIX, commitment, is_commitment
from producers.privacy.keys import DataKeyStore, KeyUnavailable, LocalKeyFile, Vault
from producers.privacy.protect import Redactor
from schemas.codec import decode, encode_capture
from schemas.errors import AccessDenied

ROOT = Path(__file__).resolve().parents[3]
USER, SESSION = "cus_jane_7731", "sess_0042"


@pytest.fixture
def signer() -> Signer:
    return Signer(Ed25519PrivateKey.generate(), name="did:test:ids")


@pytest.fixture
def trust(signer: Signer) -> TrustStore:
    store = TrustStore()
    store.add(signer.public_raw, not_before=datetime(2000, 1, 1, tzinfo=UTC))
    return store


@pytest.fixture
def vault(tmp_path: Path) -> Vault:
    return Vault(
        kek=LocalKeyFile(tmp_path / "kek.key"), keys=DataKeyStore(LocalBlobStore(tmp_path / "blobs"))
    )


def _capture(user: str = USER, session: str | None = SESSION) -> dict[str, Any]:
    capture = json.loads((ROOT / "schemas" / "examples" / "capture.unsealed.json").read_text("utf-8"))
    capture["input"]["originUserId"] = user
    capture["input"]["originSessionId"] = session
    return capture


def test_the_commitment_is_hmac_sha256_under_the_salt() -> None:
    salt = b"s" * 32
    want = hmac.new(salt, USER.encode(), hashlib.sha256).hexdigest()
    assert commitment(salt, USER) == COMMITMENT_PREFIX + want
    assert is_commitment(commitment(salt, USER)) and not is_commitment(USER)
    assert not is_commitment(COMMITMENT_PREFIX + "zz") and not is_commitment(None)


def test_ids_are_committed_even_without_redactions_and_open_only_with_the_key(
    vault: Vault, signer: Signer, trust: TrustStore
) -> None:
    original = _capture()
    protected = Redactor.create("builtin", vault=vault).protect(original, owned=False)  # type: ignore[union-attr]
    assert original["input"]["originUserId"] == USER  # the caller's capture is untouched
    signed_user, signed_session = protected["input"]["originUserId"], protected["input"]["originSessionId"]
    assert is_commitment(signed_user) and is_commitment(signed_session)
    assert protected["replayPolicy"]["piiRedacted"] is False  # no content was redacted
    sealed = seal(protected, signer)
    wire = encode_capture(sealed)
    assert USER.encode() not in wire and SESSION.encode() not in wire
    verify_capture(decode(wire).value, trust)

    # the key record opens the raw ids and the salt their commitments are made under
    opened = vault.identifiers(sealed["decisionId"])
    assert opened is not None
    salt, raw = opened
    assert raw == {"input.originUserId": USER, "input.originSessionId": SESSION}
    assert commitment(salt, USER) == signed_user
    # the same from a structured-only copy, whose sealed original is stripped with the content
    structured = CapturePolicy(sample_one_in=0).apply(
        copy.deepcopy(sealed) | {"captureLevel": "structured-only"}
    )
    assert structured["privacy"]["sealedOriginal"] is None
    resolver = IdentifierResolver(vault)
    assert resolver.origin_user_id(structured) == USER
    # reveal puts them back, each checked against its commitment
    revealed = reveal(sealed, vault=vault)
    assert revealed.capture["input"]["originUserId"] == USER and "input.originUserId" in revealed.identifiers

    vault.keys.shred(sealed["decisionId"], at=datetime(2026, 1, 1, tzinfo=UTC), reason="GDPR Art. 17")
    with pytest.raises(KeyUnavailable, match="erased"):
        vault.identifiers(sealed["decisionId"])
    assert resolver.origin_user_id(structured) is None and resolver.raw(sealed["decisionId"]) == {}
    verify_capture(decode(wire).value, trust)  # the evidence still verifies


def test_without_a_vault_or_with_redaction_off_the_raw_id_stays(vault: Vault) -> None:
    no_vault = Redactor.create("builtin", vault=None)
    assert no_vault is not None
    assert no_vault.protect(_capture(), owned=False)["input"]["originUserId"] == USER
    assert Redactor.create("off", vault=vault) is None
    nobody = Redactor.create("builtin", vault=vault).protect(_capture("", None), owned=False)  # type: ignore[union-attr]
    assert nobody.get("privacy") is None  # nothing to commit, nothing redacted: no privacy section


class _Log:
    def __init__(self) -> None:
        self.rows: list[AccessRecord] = []

    def append(self, records: Any) -> None:
        self.rows.extend(records)


def test_a_counterparty_is_matched_on_the_raw_id_the_vault_opens_and_on_none_after_erasure(
    vault: Vault, signer: Signer
) -> None:
    committed = seal(Redactor.create("builtin", vault=vault).protect(_capture(), owned=False), signer)  # type: ignore[union-attr]
    old = seal(_capture(), signer)  # sealed before commitments: the raw id, matched as before
    grants = Grants(
        grants=(Grant(caller="cp", scope="counterparty", purpose="own data", authority="contract"),)
    )
    gate = AccessGate(log=_Log(), grants=grants, origin_of=IdentifierResolver(vault).origin_user_id)  # type: ignore[arg-type]
    jane = Caller(identity="cp", scope="counterparty", reason="mine", subjects=(USER,))
    john = Caller(identity="cp", scope="counterparty", reason="mine", subjects=("cus_john_*",))
    for capture in (committed, old):
        assert gate.authorize(jane, capture, action="show").outcome == "allowed"
        with pytest.raises(AccessDenied, match="not tied to counterparty"):
            gate.authorize(john, capture, action="show")
    vault.keys.shred(committed["decisionId"], at=datetime(2026, 1, 1, tzinfo=UTC), reason="GDPR Art. 17")
    with pytest.raises(AccessDenied, match="not tied to counterparty"):
        gate.authorize(jane, committed, action="show")


@pytest.mark.minio
def test_an_erasure_on_a_versioned_bucket_leaves_no_older_version_of_the_key(
    tmp_path: Path, object_lock_store: Any
) -> None:
    """On an Object Lock bucket (versioned) the tombstone would otherwise sit over a version that still
    holds the wrapped key and the sealed ids."""
    keys = DataKeyStore(object_lock_store)
    vault = Vault(kek=LocalKeyFile(tmp_path / "kek.key"), keys=keys)
    vault.issue("dec_v", ids={"input.originUserId": USER}, salt=b"s" * 32)
    key = DataKeyStore.key("dec_v")
    assert len(object_lock_store.versions(key)) == 1
    assert keys.shred("dec_v", at=datetime(2026, 1, 1, tzinfo=UTC), reason="GDPR Art. 17")
    (only,) = object_lock_store.versions(key)
    stored = object_lock_store.get(key, version_id=only)
    assert b"erasedAt" in stored and b"wrapped" not in stored and b"sealedIds" not in stored
    with pytest.raises(KeyUnavailable, match="erased"):
        vault.identifiers("dec_v")

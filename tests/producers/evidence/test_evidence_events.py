"""Flag events: the one builder, and their signatures (inline block and DSSE envelope)."""

from __future__ import annotations

import base64
import copy
from datetime import UTC, datetime, timedelta, timezone

import pytest

from producers.evidence import (
    FLAG_PAYLOAD_TYPE,
    Signer,
    TrustStore,
    flag_event,
    pae,
    sign_event,
    sign_flag,
    verify_event,
    verify_flag,
)
from schemas.errors import KeyNotTrusted, SignatureInvalid

FLAG = {
    "decisionId": "dec_01J9Z8K2V6XAMPLE",
    "agentId": "agt_support_1",
    "reason": "customer disputed the refund",
    "flaggedAt": "2026-07-24T08:00:00.000Z",
    "failure": True,
}


def test_sign_and_verify(signer: Signer, trust: TrustStore) -> None:
    envelope = sign_event(FLAG, signer)
    assert envelope["payloadType"] == FLAG_PAYLOAD_TYPE == "application/vnd.blackbox.flag+json;version=v1"
    assert envelope["signatures"][0]["keyid"] == signer.key_id
    payload = base64.b64decode(envelope["payload"])
    assert payload.startswith(b'{"agentId":"agt_support_1","decisionId"')  # RFC 8785 order
    signer.public_key.verify(
        base64.b64decode(envelope["signatures"][0]["sig"]), pae(FLAG_PAYLOAD_TYPE, payload)
    )
    assert verify_event(envelope, trust) == FLAG


def test_tampered_payload_wrong_type_and_untrusted_key(signer: Signer, trust: TrustStore) -> None:
    envelope = sign_event(FLAG, signer)
    forged = copy.deepcopy(envelope)
    forged["payload"] = base64.b64encode(
        base64.b64decode(envelope["payload"]).replace(b"true", b"false")
    ).decode()
    with pytest.raises(SignatureInvalid):
        verify_event(forged, trust)
    retyped = dict(envelope, payloadType="application/vnd.blackbox.manifest+json;version=replay/v1")
    with pytest.raises(SignatureInvalid) as info:
        verify_event(retyped, trust)
    assert info.value.part == "payloadType"
    with pytest.raises(KeyNotTrusted):
        verify_event(sign_event(FLAG, Signer.from_seed(bytes(32))), trust)
    with pytest.raises(SignatureInvalid):
        verify_event({"payload": "x"}, trust)


def test_window_is_checked_at_flagged_at(signer: Signer) -> None:
    store = TrustStore()
    store.add(signer.public_raw, not_before=datetime(2026, 7, 25, tzinfo=UTC))
    with pytest.raises(KeyNotTrusted, match="not yet valid"):
        verify_event(sign_event(FLAG, signer), store)
    store.add(signer.public_raw, not_before=datetime(2026, 7, 1, tzinfo=UTC))
    store.revoke(signer.key_id, datetime(2026, 8, 1, tzinfo=UTC))
    assert verify_event(sign_event(FLAG, signer), store, at=datetime(2026, 7, 30, tzinfo=UTC)) == FLAG
    with pytest.raises(KeyNotTrusted, match="revoked"):
        verify_event(
            sign_event(FLAG, signer), store, at=datetime(2026, 8, 1, tzinfo=UTC) + timedelta(seconds=1)
        )


# --- the inline form the Recorder and `blackbox flag` send, ingest verifies ------------------------


def test_flag_event_is_the_schema_record() -> None:
    moment = datetime(2026, 7, 24, 10, 0, 0, 123456, tzinfo=timezone(timedelta(hours=2)))
    assert flag_event(
        "dec_1", agent_id="agt_support_1", reason="chargeback", flagged_at=moment, failure=True
    ) == {
        "decisionId": "dec_1",
        "agentId": "agt_support_1",
        "reason": "chargeback",
        "flaggedAt": "2026-07-24T08:00:00.123Z",
        "failure": True,
    }
    with pytest.raises(ValueError, match="timezone-aware"):
        flag_event("dec_1", agent_id="a", reason="r", flagged_at=datetime(2026, 7, 24), failure=False)


def test_sign_flag_carries_the_envelope_signature_and_verify_flag_checks_it(
    signer: Signer, trust: TrustStore
) -> None:
    signed = sign_flag(FLAG, signer)
    assert signed["signature"]["algorithm"] == "ed25519"
    assert signed["signature"]["publicKeyRef"] == signer.public_key_ref
    # one signature, two forms: the inline bytes are the envelope's (ed25519 is deterministic)
    assert (
        signed["signature"]["signatureBytes"] == "base64:" + sign_event(FLAG, signer)["signatures"][0]["sig"]
    )
    assert verify_flag(signed, trust) == FLAG
    assert sign_flag(signed, signer) == signed  # re-signing replaces the block, never nests it


def test_verify_flag_refuses_unsigned_tampered_malformed_and_untrusted(
    signer: Signer, trust: TrustStore
) -> None:
    signed = sign_flag(FLAG, signer)
    with pytest.raises(SignatureInvalid, match="not signed"):
        verify_flag(FLAG, trust)
    with pytest.raises(SignatureInvalid):
        verify_flag({**signed, "reason": "something else"}, trust)
    malformed = {**signed, "signature": {**signed["signature"], "signatureBytes": "base64:!!"}}
    with pytest.raises(SignatureInvalid, match="malformed flag signature") as info:
        verify_flag(malformed, trust)
    assert info.value.part == "signature"
    with pytest.raises(KeyNotTrusted):
        verify_flag(sign_flag(FLAG, Signer.from_seed(bytes(32))), trust)

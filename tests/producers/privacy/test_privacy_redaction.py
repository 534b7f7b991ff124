"""Redaction at capture through the real Recorder: every content part, spans, the sealed original.

Each capture goes through the Recorder's worker, the local spool and the real codec, and is verified
with the real evidence module; the original is opened with the data key from the vault.
"""

from __future__ import annotations

import json
import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from consumers.privacy.reveal import reveal
from producers.blobstore import LocalBlobStore
from producers.config import ReplayPolicy
from producers.evidence import Signer, TrustStore, manifest_bytes, seal, verify_capture
from producers.evidence.parts import content_parts
from producers.policy import CapturePolicy
from producers.privacy.envelope import SealedOriginalInvalid
from producers.privacy.keys import DataKeyStore, KeyUnavailable, LocalKeyFile, Vault
from producers.privacy.protect import Redactor
from producers.recorder import Recorder
from producers.transports.spool.files import read_spool
from producers.transports.spool.sender import SpoolTransport
from schemas.codec import decode, encode_capture
from schemas.errors import ContentHashMismatch

EMAIL = "jane.doe@example.com"
CARD = "4111 1111 1111 1111"
PHONE = "+44 20 7946 0958"
IBAN = "DE89 3704 0044 0532 0130 00"
IP = "203.0.113.7"
SECRETS = (EMAIL, CARD, PHONE, IBAN, IP, "EMP-004711")
SYSTEM_PROMPT = "You are Acme's support agent. Escalate to ops@acme.test."


@pytest.fixture
def signer() -> Signer:
    return Signer(Ed25519PrivateKey.generate(), name="did:test:privacy")


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


def recorder(tmp_path: Path, signer: Signer, **options: Any) -> Recorder:
    return Recorder(
        agent_id="agt_privacy",
        transport=SpoolTransport(tmp_path / "spool", linger_ms=1),
        signer=signer,
        policy=CapturePolicy(sample_one_in=0),
        clock=lambda: datetime(2026, 7, 23, 13, 0, tzinfo=UTC),
        **options,
    )


def decide(rec: Recorder, *, pii: bool = True, consequential: bool = True) -> str:
    """One decision with personal data in every content part a runtime fills by hand."""
    who = EMAIL if pii else "the customer"
    with rec.decision(
        request={"message": f"refund me, I am {who}", "phone": PHONE if pii else None},
        origin_user_id="cus_42",
        consequential=consequential,
        replay_policy=ReplayPolicy(pii_redacted=True),
    ) as d:
        d.configure(
            model="acme", system_prompt=SYSTEM_PROMPT if pii else "You are Acme's agent.", sampling={}
        )
        d.add_memory(
            entry_id="mem_1", tier="hot", content=f"Customer {who}, card {CARD if pii else 'on file'}"
        )
        d.add_memory(entry_id="mem_2", tier="warm", content="Refunds within 30 days.")
        d.render_context(user_message=f"Please refund to {IBAN if pii else 'my account'}")
        d.add_tool_call(name="lookup", input={"email": who}, output={"last_ip": IP if pii else None})
        d.observe_external(
            key="crm.contact", value={"emails": [who], "employee": "EMP-004711" if pii else ""}
        )
        d.finish(
            output=f"Refunded; receipt sent to {who}.",
            outcome="success",
            reasoning=[f"the customer is {who}"],
        )
    return d.decision_id


def emitted(tmp_path: Path) -> list[dict[str, Any]]:
    return [decode(r.value).value for r in read_spool(tmp_path / "spool")]


def test_redaction_is_on_by_default_in_every_content_part(
    tmp_path: Path, signer: Signer, trust: TrustStore, vault: Vault
) -> None:
    rec = recorder(tmp_path, signer, vault=vault, redact_patterns={"EMPLOYEE": r"EMP-\d{6}"})
    decide(rec)
    assert rec.close(5)
    [capture] = emitted(tmp_path)
    visible = dict(capture, privacy=None)
    text = json.dumps(visible, ensure_ascii=False)
    for secret in (*SECRETS, "ops@acme.test"):
        assert secret not in text, secret
    assert capture["replayPolicy"]["piiRedacted"] is True
    privacy = capture["privacy"]
    redacted_parts = {r["part"] for r in privacy["redactions"]}
    assert redacted_parts == {
        "input.requestPayload",
        "agentConfiguration.systemPromptText",
        "renderedContext.text",
        "memoryState.workingSetEntries[0].renderedContent",
        "executionTrace.reasoningTokens",
        "executionTrace.toolCalls[0].input",
        "executionTrace.toolCalls[0].output",
        "executionTrace.finalOutputText",
        "externalState.observableExternals[0].capturedValue",
    }
    assert {r["part"] for r in privacy["originalHashes"]} == redacted_parts
    assert {r["kind"] for r in privacy["redactions"]} == {"EMAIL", "PHONE", "CARD", "IBAN", "IP", "EMPLOYEE"}
    # one placeholder per value throughout the capture; the configuration is numbered first
    assert "[EMAIL_1]" in capture["agentConfiguration"]["systemPromptText"]
    assert (
        capture["memoryState"]["workingSetEntries"][0]["renderedContent"]
        == "Customer [EMAIL_2], card [CARD_1]"
    )
    assert capture["executionTrace"]["toolCalls"][0]["input"] == {"email": "[EMAIL_2]"}
    where = next(r for r in privacy["redactions"] if r["part"] == "executionTrace.toolCalls[0].input")
    assert (where["pointer"], where["start"], where["end"]) == ("/email", 0, 9)
    # the redacted view is what was signed, part by part
    report = verify_capture(capture, trust)
    assert report.checked_parts == len(content_parts(capture))
    assert privacy["cipher"] == "AES-256-GCM" and privacy["sealedOriginal"].startswith("base64:")


def test_rendered_context_spans_frame_the_redacted_parts(
    tmp_path: Path, signer: Signer, vault: Vault
) -> None:
    rec = recorder(tmp_path, signer, vault=vault)
    decide(rec)
    assert rec.close(5)
    [capture] = emitted(tmp_path)
    rendered = capture["renderedContext"]
    raw = rendered["text"].encode("utf-8")
    framed = {
        s["part"]: json.loads('"' + raw[s["start"] : s["end"]].decode() + '"') for s in rendered["spans"]
    }
    entries = capture["memoryState"]["workingSetEntries"]
    assert framed["system_prompt"] == capture["agentConfiguration"]["systemPromptText"]
    assert framed["memory:mem_1"] == entries[0]["renderedContent"]
    assert framed["memory:mem_2"] == entries[1]["renderedContent"]
    assert framed["memory"] == entries[0]["renderedContent"] + "\n\n" + entries[1]["renderedContent"]
    assert framed["user"] == "Please refund to [IBAN_1]"
    json.loads(rendered["text"])  # still the messages array the model received, redacted


def test_the_original_reveals_byte_identical_and_checks_against_the_signed_hashes(
    tmp_path: Path, signer: Signer, trust: TrustStore, vault: Vault
) -> None:
    rec = recorder(tmp_path, signer, vault=vault)
    decide(rec)
    assert rec.close(5)
    [capture] = emitted(tmp_path)

    unredacted_dir = tmp_path / "plain"
    plain_rec = recorder(unredacted_dir, signer, redact="off")
    decide(plain_rec)
    assert plain_rec.close(5)
    [plain] = emitted(unredacted_dir)

    revealed = reveal(capture, vault=vault)
    original = revealed.capture
    # every section as the runtime gave it, content, spans and hashes, as if never redacted
    for section in (
        "input",
        "agentConfiguration",
        "renderedContext",
        "memoryState",
        "executionTrace",
        "externalState",
    ):
        assert json.dumps(original[section]) == json.dumps(plain[section]), section
    assert original["input"]["requestPayload"] == {"message": f"refund me, I am {EMAIL}", "phone": PHONE}
    assert set(revealed.parts) == {r["part"] for r in capture["privacy"]["originalHashes"]}

    # a sealed original from elsewhere, or a keyed hash changed, is refused
    tampered = json.loads(json.dumps(capture))
    tampered["privacy"]["originalHashes"][0]["hash"] = "hmac-sha256:" + "0" * 64
    with pytest.raises(ContentHashMismatch):
        reveal(tampered, vault=vault)
    other = json.loads(json.dumps(capture))
    other["decisionId"] = "dec_other"
    vault.keys.put(
        type(vault.keys.get(capture["decisionId"]))(  # the right key under another id: AAD binds the id
            decision_id="dec_other",
            kek_id=vault.kek.key_id,
            wrapped=vault.kek.wrap(vault.data_key(capture["decisionId"]), context=b"dec_other"),
        )
    )
    with pytest.raises(SealedOriginalInvalid):
        reveal(other, vault=vault)


def test_pii_redacted_is_true_exactly_when_something_was_redacted(tmp_path: Path, signer: Signer) -> None:
    rec = recorder(tmp_path, signer)  # no vault: redacted, original not kept
    clean = decide(rec, pii=False)
    dirty = decide(rec, pii=True)
    assert rec.close(5)
    by_id = {c["decisionId"]: c for c in emitted(tmp_path)}
    assert by_id[clean]["replayPolicy"]["piiRedacted"] is False and by_id[clean]["privacy"] is None
    assert by_id[dirty]["replayPolicy"]["piiRedacted"] is True
    assert by_id[dirty]["privacy"]["sealedOriginal"] is None and by_id[dirty]["privacy"]["cipher"] is None
    assert EMAIL not in json.dumps(by_id[dirty])


def test_redact_off_keeps_content_and_the_runtimes_flag(tmp_path: Path, signer: Signer) -> None:
    rec = recorder(tmp_path, signer, redact="off")
    decide(rec)
    assert rec.close(5)
    [capture] = emitted(tmp_path)
    assert EMAIL in json.dumps(capture) and capture["privacy"] is None
    assert capture["replayPolicy"]["piiRedacted"] is True  # the runtime's claim, untouched


def test_structured_only_drops_the_sealed_original_and_still_verifies(
    tmp_path: Path, signer: Signer, trust: TrustStore, vault: Vault
) -> None:
    rec = recorder(tmp_path, signer, vault=vault, flight=None)
    decide(rec, consequential=False)  # routine: structured-only
    assert rec.close(5)
    [capture] = emitted(tmp_path)
    assert capture["captureLevel"] == "structured-only"
    assert capture["privacy"]["sealedOriginal"] is None and capture["privacy"]["sealedOriginalHash"]
    assert "privacy.sealedOriginal" in verify_capture(capture, trust).absent_parts


def test_wire_bodies_are_redacted_and_their_spans_remapped(
    signer: Signer, trust: TrustStore, vault: Vault
) -> None:
    body = json.dumps(
        {"messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": f"I am {EMAIL}"}]}
    )
    start = body.index("sys")
    capture = _bare_capture()
    capture["fidelity"] = "wire"
    capture["executionTrace"]["modelCalls"] = [_model_call(body, start)]
    redactor = Redactor.create("builtin", vault=vault)
    assert redactor is not None
    sealed = seal(redactor.protect(capture, owned=False), signer)
    call = sealed["executionTrace"]["modelCalls"][0]
    assert EMAIL not in call["requestBody"] and "[EMAIL_1]" in call["requestBody"]
    assert EMAIL not in call["responseBody"]
    span = call["spans"][0]
    assert call["requestBody"].encode()[span["start"] : span["end"]] == b"sys"
    verify_capture(decode(encode_capture(sealed)).value, trust)
    assert EMAIL in capture["executionTrace"]["modelCalls"][0]["requestBody"]  # the caller's dict untouched
    assert reveal(sealed, vault=vault).capture["executionTrace"]["modelCalls"][0]["requestBody"] == body


def test_a_capture_without_personal_data_signs_the_same_manifest_as_before(signer: Signer) -> None:
    capture = _bare_capture()
    capture["replayPolicy"]["piiRedacted"] = False
    redactor = Redactor.create("builtin", vault=None)
    assert redactor is not None
    protected = redactor.protect(dict(capture), owned=False)
    assert protected == capture  # nothing found: nothing changed
    before = manifest_bytes(seal(capture, signer))
    assert manifest_bytes(seal(dict(protected, privacy=None), signer)) == before


def test_the_key_file_is_private_and_rotation_rewraps_without_touching_captures(
    tmp_path: Path, signer: Signer, vault: Vault
) -> None:
    rec = recorder(tmp_path, signer, vault=vault)
    decision = decide(rec)
    assert rec.close(5)
    assert stat.S_IMODE((tmp_path / "kek.key").stat().st_mode) == 0o600
    spool_before = sorted((p.name, p.read_bytes()) for p in (tmp_path / "spool").rglob("*") if p.is_file())
    [capture] = emitted(tmp_path)

    new_kek = LocalKeyFile(tmp_path / "kek-2026.key")
    assert vault.keys.rewrap(vault.kek, new_kek) == 1
    assert vault.keys.rewrap(vault.kek, new_kek) == 0  # already under the new key
    rotated = Vault(kek=new_kek, keys=vault.keys)
    assert EMAIL in json.dumps(reveal(capture, vault=rotated).capture)
    with pytest.raises(KeyUnavailable, match="does not unwrap"):
        vault.data_key(decision)  # the old key-encryption key no longer opens it
    assert (
        sorted((p.name, p.read_bytes()) for p in (tmp_path / "spool").rglob("*") if p.is_file())
        == spool_before
    )


def _bare_capture() -> dict[str, Any]:
    return {
        "version": "replay/v1",
        "decisionId": "dec_wire_1",
        "agentId": "agt_privacy",
        "runtimeId": None,
        "capturedAt": "2026-07-23T13:00:00Z",
        "captureLevel": "full",
        "consequential": {"flagged": True, "reason": None},
        "outcome": {"status": "success", "reason": None},
        "input": {"originUserId": None, "originSessionId": None, "requestPayload": {"q": "hi"}},
        "agentConfiguration": {"modelIdentifier": "m", "samplingParameters": {}},
        "renderedContext": None,
        "memoryState": {"workingSetEntries": []},
        "executionTrace": {"toolCalls": [], "finalOutputText": "ok"},
        "externalState": {"observableExternals": []},
        "replayPolicy": {"retentionDays": 30, "piiRedacted": True, "replayAccessScope": "operator"},
        "signature": {},
    }


def _model_call(body: str, start: int) -> dict[str, Any]:
    return {
        "sequence": 1,
        "format": "openai.chat.completions",
        "method": "POST",
        "endpoint": "https://api.example.test",
        "path": "/v1/chat/completions",
        "query": None,
        "requestHeaders": [{"name": "content-type", "value": "application/json"}],
        "requestBody": body,
        "requestBodyEncoding": "utf-8",
        "requestBodyHash": None,
        "status": 200,
        "responseBody": json.dumps({"choices": [{"message": {"content": f"hello {EMAIL}"}}]}),
        "responseBodyEncoding": "utf-8",
        "responseBodyHash": None,
        "responseContentEncoding": None,
        "streamed": False,
        "complete": True,
        "attempts": 1,
        "error": None,
        "startedAt": "2026-07-23T13:00:00.100Z",
        "latencyMs": 12,
        "spans": [{"part": "system_prompt", "start": start, "end": start + 3, "encoding": "json-string"}],
    }


def test_the_configuration_is_numbered_first_whatever_the_decision_holds() -> None:
    """The system prompt's placeholders come first (its redacted text and hash are then the same in
    every capture of an agent), though the request comes before it in the capture."""
    from producers.privacy.detectors import builtin_detectors
    from producers.privacy.redact import redact_capture

    def capture(request_email: str) -> dict[str, Any]:
        return {
            "input": {"requestPayload": {"from": request_email}, "requestPayloadHash": None},
            "agentConfiguration": {
                "systemPromptText": "Escalate to ops@acme.example.",
                "systemPromptHash": None,
            },
        }

    first = redact_capture(capture("ann@mail.example"), builtin_detectors(), owned=True)
    second = redact_capture(capture("bob@mail.example"), builtin_detectors(), owned=True)
    assert first is not None and second is not None
    for result in (first, second):
        assert result.capture["agentConfiguration"]["systemPromptText"] == "Escalate to [EMAIL_1]."
        assert result.capture["input"]["requestPayload"] == {"from": "[EMAIL_2]"}

"""capture/v2 in the evidence: fidelity and model calls are signed, and nothing signed before v2 changes.

The manifest leaves out ``fidelity: "sdk"`` and an empty ``executionTrace.modelCalls`` (the values a
v1 capture decodes to), so a v1 capture's manifest is byte-identical before and after decoding into
v2 and every signature made before v2 still verifies; any other value is signed like every field.
"""

from __future__ import annotations

import copy
import io
import json
from typing import Any

import pytest
from conftest import GOLDEN
from fastavro import schemaless_writer

from producers.evidence import Signer, TrustStore, manifest_bytes, seal, verify_capture
from producers.evidence.payload import signing_payload
from producers.policy import strip_content
from schemas import codec
from schemas.codec import MAGIC, EncodeError, decode, encode_capture
from schemas.errors import ContentHashMismatch, SignatureInvalid

REQUEST = '{"model":"gpt-test","messages":[{"role":"system","content":"Be careful ☕"}]}'
RESPONSE = 'data: {"choices":[{"index":0,"delta":{"content":"ok"}}]}\n\ndata: [DONE]\n\n'


def _v1_bytes(capture: dict[str, Any]) -> bytes:
    """The capture as a v1 writer encoded it (before capture/v2 existed)."""
    from schemas.codec import _capture_to_avro

    info = codec.KNOWN_SCHEMAS["capture/v1"]
    buffer = io.BytesIO()
    schemaless_writer(buffer, info.parsed, _capture_to_avro(capture))
    return MAGIC + info.fingerprint + buffer.getvalue()


def wire_capture(example: dict[str, Any]) -> dict[str, Any]:
    capture = copy.deepcopy(example)
    capture["fidelity"] = "wire"
    capture["executionTrace"]["modelCalls"] = [
        {
            "sequence": 1,
            "format": "openai.chat.completions",
            "method": "POST",
            "endpoint": "https://api.example.test",
            "path": "/v1/chat/completions",
            "query": None,
            "requestHeaders": [{"name": "content-type", "value": "application/json"}],
            "requestBody": REQUEST,
            "requestBodyEncoding": "utf-8",
            "requestBodyHash": None,
            "status": 200,
            "responseBody": RESPONSE,
            "responseBodyEncoding": "utf-8",
            "responseBodyHash": None,
            "responseContentEncoding": None,
            "streamed": True,
            "complete": True,
            "attempts": 1,
            "error": None,
            "startedAt": "2026-07-23T13:00:00.100Z",
            "latencyMs": 40,
            "spans": [{"part": "system_prompt", "start": 59, "end": 73, "encoding": "json-string"}],
        }
    ]
    return capture


def test_a_v1_capture_keeps_its_manifest_and_signature_through_v2(
    example: dict[str, Any], signer: Signer, trust: TrustStore
) -> None:
    sealed = seal(example, signer)  # no v2 member at all: what every capture before v2 looked like
    decoded = decode(_v1_bytes(sealed))
    assert decoded.schema == "capture/v1"
    assert decoded.value["fidelity"] == "sdk" and decoded.value["executionTrace"]["modelCalls"] == []
    assert manifest_bytes(decoded.value) == manifest_bytes(sealed)
    assert signing_payload(decoded.value, fill_root=False).payload == manifest_bytes(sealed)
    assert b"fidelity" not in manifest_bytes(decoded.value) and b"modelCalls" not in manifest_bytes(sealed)
    verify_capture(decoded.value, trust)
    # The committed signed golden (made before v2) verifies in its v2 full form too.
    golden = json.loads((GOLDEN / "capture.signed.json").read_text(encoding="utf-8"))
    verify_capture(decode(encode_capture(golden)).value, trust)


def test_fidelity_and_model_calls_are_signed(
    example: dict[str, Any], signer: Signer, trust: TrustStore
) -> None:
    sealed = decode(encode_capture(seal(wire_capture(example), signer))).value
    report = verify_capture(sealed, trust)
    assert report.checked_parts >= 2
    call = sealed["executionTrace"]["modelCalls"][0]
    assert call["requestBodyHash"].startswith("sha256:") and call["responseBodyHash"].startswith("sha256:")
    assert b'"fidelity":"wire"' in manifest_bytes(sealed)
    assert REQUEST.encode() not in manifest_bytes(sealed)  # content leaves the manifest, its hash stays

    for tamper in (
        lambda c: c.update(fidelity="sdk"),
        lambda c: c["executionTrace"].update(modelCalls=[]),
        lambda c: c["executionTrace"]["modelCalls"][0].update(status=500),
        lambda c: c["executionTrace"]["modelCalls"][0]["spans"][0].update(start=1),
    ):
        changed = copy.deepcopy(sealed)
        tamper(changed)
        with pytest.raises(SignatureInvalid):
            verify_capture(changed, trust)

    sdk = seal(example, signer)
    sdk["fidelity"] = "wire"  # claiming wire fidelity after signing
    with pytest.raises(SignatureInvalid):
        verify_capture(sdk, trust)

    changed = copy.deepcopy(sealed)
    changed["executionTrace"]["modelCalls"][0]["responseBody"] = RESPONSE.replace("ok", "no")
    with pytest.raises(ContentHashMismatch) as failed:
        verify_capture(changed, trust)
    assert failed.value.part == "executionTrace.modelCalls[0].responseBody"


def test_a_model_call_must_state_every_non_null_value(example: dict[str, Any], signer: Signer) -> None:
    # A default filled in on the way through Avro would change the manifest after signing.
    capture = wire_capture(example)
    del capture["executionTrace"]["modelCalls"][0]["attempts"]
    with pytest.raises(EncodeError, match="attempts"):
        encode_capture(seal(capture, signer))


def test_structured_only_drops_the_bodies_and_keeps_their_hashes(
    example: dict[str, Any], signer: Signer, trust: TrustStore
) -> None:
    stripped = strip_content(seal(wire_capture(example), signer))
    call = stripped["executionTrace"]["modelCalls"][0]
    assert call["requestBody"] is None and call["responseBody"] is None
    assert call["requestBodyHash"] and call["responseBodyHash"]
    report = verify_capture(decode(encode_capture(stripped)).value, trust)
    assert "executionTrace.modelCalls[0].requestBody" in report.absent_parts


def test_the_fast_manifest_path_equals_the_reference_for_v2(example: dict[str, Any], signer: Signer) -> None:
    for capture in (wire_capture(example), example):
        sealed = decode(encode_capture(seal(capture, signer))).value
        assert signing_payload(sealed, fill_root=False).payload == manifest_bytes(sealed)
        assert json.loads(manifest_bytes(sealed)).get("fidelity") == (
            "wire" if capture is not example else None
        )

"""Seal and verify: the round trip, the golden capture, and every tamper case by name."""

from __future__ import annotations

import copy
import json
import os
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import rfc8785
from conftest import GOLDEN, KEY_WINDOW_START, golden_signer, load_example

from producers.evidence import (
    MANIFEST_PAYLOAD_TYPE,
    Signer,
    TrustStore,
    content_parts,
    manifest,
    manifest_bytes,
    pae,
    seal,
    verify_capture,
)
from producers.evidence.dsse import b64encode
from schemas.errors import (
    ContentHashMismatch,
    ContractError,
    KeyNotTrusted,
    SignatureInvalid,
    UnknownAlgorithm,
)

ALL_PARTS = [
    "input.requestPayload",
    "agentConfiguration.systemPromptText",
    "agentConfiguration.toolSchemaJson",
    "renderedContext.text",
    "memoryState.workingSetEntries[0].renderedContent",
    "memoryState.workingSetEntries[1].renderedContent",
    "executionTrace.reasoningTokens",
    "executionTrace.toolCalls[0].input",
    "executionTrace.toolCalls[1].input",
    "executionTrace.toolCalls[0].output",
    "executionTrace.toolCalls[1].output",
    "executionTrace.finalOutputText",
    "externalState.observableExternals[0].capturedValue",
]
CAPTURED_AT = datetime(2026, 7, 23, 13, 0, 0, 456000, tzinfo=UTC)


@pytest.fixture
def sealed(example: dict[str, Any], signer: Signer) -> dict[str, Any]:
    return seal(example, signer)


def _get(capture: dict[str, Any], path: str) -> tuple[dict[str, Any], str]:
    """The holder dict and key of a dotted path with [i] indices."""
    *parents, last = path.replace("[", ".[").split(".")
    node: Any = capture
    for part in parents:
        node = node[int(part[1:-1])] if part.startswith("[") else node[part]
    return node, last


def _resign(capture: dict[str, Any], signer: Signer) -> dict[str, Any]:
    """Sign the manifest as it is (no hash recomputation): a signer that commits to what it is given."""
    signature = signer.sign(pae(MANIFEST_PAYLOAD_TYPE, manifest_bytes(capture)))
    capture["signature"]["signatureBytes"] = "base64:" + b64encode(signature)
    return capture


# --- round trip ---------------------------------------------------------------------------------
def test_round_trip_on_the_example(
    example: dict[str, Any], sealed: dict[str, Any], trust: TrustStore
) -> None:
    report = verify_capture(sealed, trust)
    assert report.key_id == golden_signer().key_id
    assert report.checked_parts == len(ALL_PARTS) == 13
    assert report.absent_parts == ()
    assert report.decision_id == "dec_01J9Z8K2V6XAMPLE"
    assert example["signature"]["signatureBytes"] is None  # the input is not modified
    assert example["input"]["requestPayloadHash"] is None
    memory = sealed["memoryState"]
    assert memory["contextSetAlgorithm"] == "rfc6962-sha256"
    assert memory["contextSetLeafCount"] == 2
    assert sealed["signature"]["algorithm"] == "ed25519"
    assert sealed["signature"]["publicKeyRef"] == golden_signer().public_key_ref
    assert sealed["signature"]["signatureBytes"].startswith("base64:")


def test_seal_deep_copies(example: dict[str, Any], signer: Signer) -> None:
    sealed = seal(example, signer)
    example["input"]["requestPayload"]["message"] = "changed after sealing"
    example["memoryState"]["workingSetEntries"][0]["provenance"]["writerId"] = "changed"
    assert sealed["input"]["requestPayload"]["message"].startswith("I was charged")
    assert sealed["memoryState"]["workingSetEntries"][0]["provenance"]["writerId"] == "wrt_crm_sync"


def test_golden_capture_is_reproducible_and_verifies(example: dict[str, Any], trust: TrustStore) -> None:
    golden_path = GOLDEN / "capture.signed.json"
    sealed = seal(example, golden_signer())
    if os.environ.get("BLACKBOX_REGEN_GOLDEN"):
        golden_path.write_text(json.dumps(sealed, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    golden = json.loads(golden_path.read_text(encoding="utf-8"))
    assert golden == sealed  # ed25519 is deterministic: same seed, same capture, same bytes
    assert golden["signature"]["signatureBytes"] == (
        "base64:vyXIN9EloV13+2uj0oTqVUyOAG+goqpyZOx7LO+f/ZPSUt/GyNRKI3+G9cnOauVVjpcpkkEciWo3W/4LAc4YCw=="
    )
    assert golden["memoryState"]["contextSetHash"] == (
        "sha256:72c57fb8e370d3e8da6d911366ac0d1b03f1fb64a2b010d3df14048f11472226"
    )
    assert verify_capture(golden, trust).checked_parts == 13


def test_golden_tampered_capture_names_the_part(trust: TrustStore) -> None:
    tampered = json.loads((GOLDEN / "capture.tampered.json").read_text(encoding="utf-8"))
    with pytest.raises(ContentHashMismatch) as info:
        verify_capture(tampered, trust)
    assert info.value.part == "executionTrace.toolCalls[1].output"
    assert "(seq 2 issue_refund)" in str(info.value)


def test_content_parts_and_manifest(sealed: dict[str, Any]) -> None:
    parts = content_parts(sealed)
    assert list(parts) == ALL_PARTS
    assert parts["agentConfiguration.systemPromptText"] == sealed["agentConfiguration"]["systemPromptHash"]
    assert (
        parts["executionTrace.toolCalls[1].output"] == sealed["executionTrace"]["toolCalls"][1]["outputHash"]
    )
    view = manifest(sealed)
    assert "requestPayload" not in view["input"] and view["input"]["requestPayloadHash"]
    assert "renderedContent" not in view["memoryState"]["workingSetEntries"][1]
    assert "text" not in view["renderedContext"] and view["renderedContext"]["spans"]
    assert "signatureBytes" not in view["signature"]
    assert "reason" not in view["outcome"]  # null members are omitted
    assert manifest_bytes(sealed) == rfc8785.dumps(view)


def test_manifest_fast_path_equals_the_package(sealed: dict[str, Any]) -> None:
    from producers.evidence.canonical import omit_nulls
    from producers.evidence.manifest import manifest_view

    assert manifest_bytes(sealed) == rfc8785.dumps(omit_nulls(manifest_view(sealed)))


# --- seal contract ---------------------------------------------------------------------------------
def test_a_supplied_hash_that_disagrees_names_the_hash_field(example: dict[str, Any], signer: Signer) -> None:
    example["memoryState"]["workingSetEntries"][1]["renderedContentHash"] = "sha256:" + "00" * 32
    with pytest.raises(ContractError) as info:
        seal(example, signer)
    assert info.value.path == "memoryState.workingSetEntries[1].renderedContentHash"
    assert "(mem_02)" in str(info.value)


def test_a_supplied_hash_that_agrees_is_kept_and_resealing_works(
    sealed: dict[str, Any], signer: Signer, trust: TrustStore
) -> None:
    again = seal(sealed, signer)
    assert again == sealed
    verify_capture(again, trust)


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (
            lambda c: c["memoryState"].__setitem__("contextSetHash", "sha256:" + "00" * 32),
            "memoryState.contextSetHash",
        ),
        (lambda c: c["memoryState"].__setitem__("contextSetLeafCount", 3), "memoryState.contextSetLeafCount"),
        (
            lambda c: c["memoryState"].__setitem__("contextSetAlgorithm", "sha3-tree"),
            "memoryState.contextSetAlgorithm",
        ),
        (lambda c: c["signature"].__setitem__("algorithm", "rsa"), "signature.algorithm"),
        (
            lambda c: c["signature"].__setitem__("publicKeyRef", "did:x#sha256:" + "00" * 32),
            "signature.publicKeyRef",
        ),
        (lambda c: c.__setitem__("capturedAt", "yesterday"), "capturedAt"),
        (
            lambda c: c["agentConfiguration"].__setitem__("systemPromptText", 42),
            "agentConfiguration.systemPromptText",
        ),
        (lambda c: c["input"]["requestPayload"].__setitem__("id", 2**64), "input.requestPayload.id"),
        (
            lambda c: c["replayPolicy"].__setitem__("retentionDays", float("nan")),
            "replayPolicy.retentionDays",
        ),
        (
            lambda c: c["input"].update(requestPayload=None, requestPayloadHash="md5:x"),
            "input.requestPayloadHash",
        ),
        (
            lambda c: c["memoryState"]["workingSetEntries"][1].__setitem__("contextPosition", 0),
            "memoryState.workingSetEntries[1].contextPosition",
        ),
    ],
)
def test_seal_refuses_what_cannot_be_evidence(
    example: dict[str, Any], signer: Signer, mutate: Any, path: str
) -> None:
    mutate(example)
    with pytest.raises(ContractError) as info:
        seal(example, signer)
    assert info.value.path == path


def test_public_key_ref_with_a_did_prefix_is_kept(
    example: dict[str, Any], signer: Signer, trust: TrustStore
) -> None:
    example["signature"]["publicKeyRef"] = f"did:armalo:agent:agt_support_1#{signer.key_id}"
    sealed = seal(example, signer)
    assert sealed["signature"]["publicKeyRef"] == f"did:armalo:agent:agt_support_1#{signer.key_id}"
    verify_capture(sealed, trust)


# --- structured-only / compacted ---------------------------------------------------------------------
def _strip_content(capture: dict[str, Any], paths: list[str]) -> dict[str, Any]:
    stripped = copy.deepcopy(capture)
    for path in paths:
        holder, key = _get(stripped, path)
        holder[key] = None
    return stripped


def test_compacted_capture_still_verifies_and_reports_absent_parts(
    sealed: dict[str, Any], trust: TrustStore
) -> None:
    compacted = _strip_content(sealed, ALL_PARTS)
    report = verify_capture(compacted, trust)
    assert report.checked_parts == 0
    assert report.absent_parts == tuple(ALL_PARTS)
    partly = _strip_content(
        sealed, ["renderedContext.text", "memoryState.workingSetEntries[1].renderedContent"]
    )
    report = verify_capture(partly, trust)
    assert report.checked_parts == 11
    assert report.absent_parts == ("renderedContext.text", "memoryState.workingSetEntries[1].renderedContent")
    del partly["renderedContext"]["text"]  # missing is the same as null
    assert verify_capture(partly, trust).absent_parts == report.absent_parts


def test_structured_only_capture_sealed_without_content_keeps_supplied_hashes(
    sealed: dict[str, Any], signer: Signer, trust: TrustStore
) -> None:
    structured = _strip_content(sealed, ALL_PARTS)
    structured["signature"]["signatureBytes"] = None
    resealed = seal(structured, signer)
    assert resealed["input"]["requestPayloadHash"] == sealed["input"]["requestPayloadHash"]
    assert resealed["signature"] == sealed["signature"]  # the manifest is the same
    assert verify_capture(resealed, trust).absent_parts == tuple(ALL_PARTS)


def test_content_added_where_no_hash_was_committed_is_refused(
    example: dict[str, Any], signer: Signer, trust: TrustStore
) -> None:
    example["executionTrace"]["finalOutputText"] = None
    sealed = seal(example, signer)
    assert sealed["executionTrace"]["finalOutputHash"] is None
    assert verify_capture(sealed, trust).checked_parts == 12
    sealed["executionTrace"]["finalOutputText"] = "I've refunded $1,200.00."
    with pytest.raises(ContentHashMismatch, match="records no hash") as info:
        verify_capture(sealed, trust)
    assert info.value.part == "executionTrace.finalOutputText"


# --- tamper cases ---------------------------------------------------------------------------------
def _tamper_value(value: Any) -> Any:
    if isinstance(value, str):
        return value + " "
    if isinstance(value, list):
        return [*value, "extra"]
    return {**value, "tampered": True}


@pytest.mark.parametrize("path", ALL_PARTS)
def test_changed_content_names_its_part(sealed: dict[str, Any], trust: TrustStore, path: str) -> None:
    holder, key = _get(sealed, path)
    holder[key] = _tamper_value(holder[key])
    with pytest.raises(ContentHashMismatch) as info:
        verify_capture(sealed, trust)
    assert info.value.part == path


def test_messages_name_the_record_an_operator_searches_for(sealed: dict[str, Any], trust: TrustStore) -> None:
    sealed["memoryState"]["workingSetEntries"][1]["renderedContent"] = "Note: customer prefers phone."
    with pytest.raises(
        ContentHashMismatch, match=r"workingSetEntries\[1\]\(mem_02\)\.renderedContent hashes to"
    ):
        verify_capture(sealed, trust)
    sealed = seal(load_example(), golden_signer())
    sealed["externalState"]["observableExternals"][0]["capturedValue"]["amount"] = 0
    with pytest.raises(ContentHashMismatch, match=r"observableExternals\[0\]\(customer\.balance\)"):
        verify_capture(sealed, trust)


def test_json_content_is_compared_canonically(sealed: dict[str, Any], trust: TrustStore) -> None:
    """Key order and 880.0 vs 880 are not content changes (RFC 8785 bytes are the same)."""
    output = sealed["executionTrace"]["toolCalls"][0]["output"]
    sealed["executionTrace"]["toolCalls"][0]["output"] = {"currency": output["currency"], "balance": 880}
    assert verify_capture(sealed, trust).checked_parts == 13


@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(lambda c: c.__setitem__("agentId", "agt_other"), id="agentId"),
        pytest.param(lambda c: c["replayPolicy"].__setitem__("retentionDays", 30), id="retentionDays"),
        pytest.param(lambda c: c["consequential"].__setitem__("flagged", False), id="consequential.flagged"),
        pytest.param(lambda c: c.__setitem__("capturedAt", "2026-07-23T13:00:01.456Z"), id="capturedAt"),
        pytest.param(
            lambda c: c["input"].__setitem__("requestPayloadHash", "sha256:" + "00" * 32), id="hash-field"
        ),
        pytest.param(
            lambda c: c["agentConfiguration"]["samplingParameters"].__setitem__("temperature", 0.9),
            id="sampling",
        ),
        pytest.param(lambda c: c["renderedContext"]["spans"][0].__setitem__("start", 31), id="span"),
        pytest.param(
            lambda c: c["memoryState"]["workingSetEntries"][0].__setitem__("tier", "cold"), id="entry-tier"
        ),
        pytest.param(lambda c: c["memoryState"]["workingSetEntries"].reverse(), id="entries-reordered"),
        pytest.param(lambda c: c["executionTrace"]["toolCalls"].pop(), id="tool-call-dropped"),
        pytest.param(lambda c: c.__setitem__("extra", "field"), id="unknown-field-added"),
        pytest.param(
            lambda c: c["signature"].__setitem__("signatureBytes", "base64:" + "A" * 88), id="signature-bytes"
        ),
        pytest.param(
            lambda c: c["signature"].__setitem__("signatureBytes", "garbage"), id="signature-not-base64"
        ),
        pytest.param(
            lambda c: c["replayPolicy"].__setitem__("retentionDays", 2**60), id="uncanonical-manifest"
        ),
    ],
)
def test_changed_manifest_fails_the_signature(sealed: dict[str, Any], trust: TrustStore, mutate: Any) -> None:
    mutate(sealed)
    with pytest.raises(SignatureInvalid) as info:
        verify_capture(sealed, trust)
    assert info.value.part == "signature"


def test_content_changed_together_with_its_hash_fails_the_manifest_signature(
    sealed: dict[str, Any], trust: TrustStore
) -> None:
    from producers.evidence import text_hash

    forged = "I've refunded $1,200.00 to your account (refund rf_1)."
    sealed["executionTrace"]["finalOutputText"] = forged
    sealed["executionTrace"]["finalOutputHash"] = text_hash(forged)
    with pytest.raises(SignatureInvalid, match="manifest") as info:
        verify_capture(sealed, trust)
    assert info.value.part == "signature"


def test_null_vs_absent_fields_do_not_change_the_manifest(sealed: dict[str, Any], trust: TrustStore) -> None:
    sealed["outcome"].pop("reason")
    sealed["executionTrace"]["toolCalls"][0]["errorRef"] = None
    sealed["memoryState"]["workingSetEntries"][1].pop("embeddingModel")
    sealed["input"]["newOptionalField"] = None
    assert verify_capture(sealed, trust).checked_parts == 13


def test_wrong_key(example: dict[str, Any], trust: TrustStore) -> None:
    intruder = Signer.from_seed(bytes(range(32)))
    with pytest.raises(KeyNotTrusted, match="unknown") as info:
        verify_capture(seal(example, intruder), trust)
    assert info.value.part == "key"
    # The intruder's signature presented under the trusted key's name:
    forged = seal(example, intruder)
    forged["signature"]["publicKeyRef"] = golden_signer().key_id
    with pytest.raises(SignatureInvalid):
        verify_capture(forged, trust)


def test_key_window_and_revocation(sealed: dict[str, Any], signer: Signer) -> None:
    not_yet = TrustStore()
    not_yet.add(signer.public_raw, not_before=CAPTURED_AT + timedelta(milliseconds=1))
    with pytest.raises(KeyNotTrusted, match="not yet valid"):
        verify_capture(sealed, not_yet)

    expired = TrustStore()
    expired.add(signer.public_raw, not_before=KEY_WINDOW_START, not_after=CAPTURED_AT)
    with pytest.raises(KeyNotTrusted, match="expired"):
        verify_capture(sealed, expired)

    rotated = TrustStore()  # retired after the capture: old captures keep verifying
    rotated.add(signer.public_raw, not_before=KEY_WINDOW_START, not_after=CAPTURED_AT + timedelta(days=1))
    verify_capture(sealed, rotated, at=CAPTURED_AT + timedelta(days=400))

    revoked = TrustStore()
    revoked.add(signer.public_raw, not_before=KEY_WINDOW_START)
    revoked.revoke(signer.key_id, CAPTURED_AT + timedelta(days=10))
    with pytest.raises(KeyNotTrusted, match="revoked"):
        verify_capture(sealed, revoked)  # now is after the revocation: refused though signed before it
    verify_capture(sealed, revoked, at=CAPTURED_AT + timedelta(days=9))  # as of before the compromise


@pytest.mark.parametrize(
    ("mutate", "part"),
    [
        (lambda c: c["signature"].__setitem__("algorithm", "ecdsa-p256"), "signature.algorithm"),
        (
            lambda c: c["memoryState"].__setitem__("contextSetAlgorithm", "blake3-tree"),
            "memoryState.contextSetAlgorithm",
        ),
        (lambda c: c["memoryState"].pop("contextSetAlgorithm"), "memoryState.contextSetAlgorithm"),
    ],
)
def test_unknown_algorithm(sealed: dict[str, Any], trust: TrustStore, mutate: Any, part: str) -> None:
    mutate(sealed)
    with pytest.raises(UnknownAlgorithm) as info:
        verify_capture(sealed, trust)
    assert info.value.part == part


def test_unknown_hash_algorithm_in_a_signed_hash_field(
    example: dict[str, Any], signer: Signer, trust: TrustStore
) -> None:
    sealed = seal(example, signer)
    sealed["executionTrace"]["finalOutputHash"] = "blake3:" + "00" * 32
    with pytest.raises(UnknownAlgorithm) as info:
        verify_capture(_resign(sealed, signer), trust)
    assert info.value.part == "executionTrace.finalOutputHash"


def test_reordered_memory_under_a_valid_signature_fails_the_merkle_root(
    sealed: dict[str, Any], signer: Signer, trust: TrustStore
) -> None:
    entries = sealed["memoryState"]["workingSetEntries"]
    entries[0]["contextPosition"], entries[1]["contextPosition"] = 1, 0
    with pytest.raises(SignatureInvalid):  # tampering after signing breaks the signature first
        verify_capture(sealed, trust)
    with pytest.raises(ContentHashMismatch) as info:  # a signer that committed a stale root
        verify_capture(_resign(sealed, signer), trust)
    assert info.value.part == "memoryState.contextSetHash"
    sealed["memoryState"]["contextSetLeafCount"] = 3
    with pytest.raises(ContentHashMismatch) as info:
        verify_capture(_resign(sealed, signer), trust)
    assert info.value.part == "memoryState.contextSetLeafCount"


def test_missing_signature_block_or_bad_captured_at(sealed: dict[str, Any], trust: TrustStore) -> None:
    broken = copy.deepcopy(sealed)
    del broken["signature"]
    with pytest.raises(SignatureInvalid):
        verify_capture(broken, trust)
    broken = copy.deepcopy(sealed)
    broken["capturedAt"] = "not a time"
    with pytest.raises(KeyNotTrusted, match="capturedAt"):
        verify_capture(broken, trust)
    broken = copy.deepcopy(sealed)
    broken["signature"]["publicKeyRef"] = "did:armalo:agent:agt_1#runtime-key-1"
    with pytest.raises(KeyNotTrusted, match="names no"):
        verify_capture(broken, trust)


def test_large_capture_round_trip(signer: Signer, trust: TrustStore) -> None:
    from conftest import large_capture

    capture = large_capture()
    assert len(json.dumps(capture)) > 20_000
    report = verify_capture(seal(capture, signer), trust)
    # 4 top-level parts + 8 entries + reasoning + 3 inputs + 3 outputs + final output + 1 external
    assert report.checked_parts == 21

"""Capture policy: full / sampled / structured-only, deterministic sampling, content stripping."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from recorder_testdata import new_signer, trust_for

from producers.evidence import PART_FIELDS, content_parts, iter_parts, seal, verify_capture
from producers.policy import CONTENT_FIELDS, CapturePolicy, strip_content
from producers.settings import load_settings

EXAMPLE = Path(__file__).resolve().parents[3] / "schemas" / "examples" / "capture.unsealed.json"


@pytest.fixture
def example() -> dict[str, Any]:
    return json.loads(EXAMPLE.read_text("utf-8"))


def test_consequential_is_always_full() -> None:
    for n in (0, 1, 100):
        assert CapturePolicy(sample_one_in=n).level(decision_id="dec_x", consequential=True) == "full"


def test_sampling_is_deterministic_from_the_decision_id() -> None:
    policy = CapturePolicy(sample_one_in=10)
    ids = [f"dec_{i:06d}" for i in range(20_000)]
    first = [policy.is_sampled(i) for i in ids]
    assert first == [CapturePolicy(sample_one_in=10).is_sampled(i) for i in ids]
    # recomputable by anyone: sha256(id) as a big-endian integer (first 8 bytes) mod N == 0
    assert first == [int.from_bytes(hashlib.sha256(i.encode()).digest()[:8], "big") % 10 == 0 for i in ids]
    assert 0.085 < sum(first) / len(ids) < 0.115


def test_sampling_extremes() -> None:
    assert not any(CapturePolicy(sample_one_in=0).is_sampled(f"dec_{i}") for i in range(1000))
    assert all(CapturePolicy(sample_one_in=1).is_sampled(f"dec_{i}") for i in range(1000))
    with pytest.raises(ValueError):
        CapturePolicy(sample_one_in=-1)


def test_levels_of_routine_decisions() -> None:
    policy = CapturePolicy(sample_one_in=4)
    levels = {policy.level(decision_id=f"dec_{i}", consequential=False) for i in range(200)}
    assert levels == {"sampled", "structured-only"}


def test_policy_from_settings_default(tmp_path: Path) -> None:
    assert CapturePolicy.from_settings(load_settings(data_dir=tmp_path)).sample_one_in == 100


def test_content_fields_match_the_evidence_contract() -> None:
    assert {(f.section, f.list_key, f.content_key) for f in PART_FIELDS} == set(CONTENT_FIELDS)


def test_structured_only_strips_content_keeps_hashes_and_verifies(example: dict[str, Any]) -> None:
    signer = new_signer()
    example["captureLevel"] = "structured-only"
    example["signature"]["publicKeyRef"] = None
    sealed = seal(example, signer)
    before = copy.deepcopy(sealed)
    stripped = CapturePolicy().apply(sealed)
    assert sealed == before  # the sealed capture is not mutated
    hashes = content_parts(sealed)
    assert content_parts(stripped) == {}  # no content left
    assert {r.hash_path: r.recorded_hash for r in iter_parts(stripped)} == {
        r.hash_path: r.recorded_hash for r in iter_parts(sealed)
    }  # every hash field is kept
    assert stripped["input"]["requestPayload"] is None
    assert stripped["agentConfiguration"]["systemPromptText"] is None
    assert stripped["agentConfiguration"]["toolSchemaJson"] is None
    assert stripped["renderedContext"]["text"] is None
    assert stripped["renderedContext"]["spans"] == sealed["renderedContext"]["spans"]
    assert all(e["renderedContent"] is None for e in stripped["memoryState"]["workingSetEntries"])
    assert [e["entryId"] for e in stripped["memoryState"]["workingSetEntries"]] == ["mem_01", "mem_02"]
    assert all(c["input"] is None and c["output"] is None for c in stripped["executionTrace"]["toolCalls"])
    assert [c["toolName"] for c in stripped["executionTrace"]["toolCalls"]] == ["get_balance", "issue_refund"]
    assert stripped["executionTrace"]["finalOutputText"] is None
    assert stripped["executionTrace"]["reasoningTokens"] is None
    assert stripped["externalState"]["observableExternals"][0]["capturedValue"] is None
    report = verify_capture(stripped, trust_for(signer))
    assert len(report.absent_parts) == len(hashes)


def test_full_and_sampled_are_not_stripped(example: dict[str, Any]) -> None:
    sealed = seal(example, new_signer())
    for level in ("full", "sampled"):
        capture = dict(sealed, captureLevel=level)
        assert CapturePolicy().apply(capture) is capture


def test_strip_content_tolerates_absent_sections() -> None:
    assert strip_content({"decisionId": "d", "renderedContext": None}) == {
        "decisionId": "d",
        "renderedContext": None,
    }

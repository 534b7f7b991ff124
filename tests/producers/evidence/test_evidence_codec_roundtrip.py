"""A sealed capture still verifies after the Avro round trip of ``schemas.codec``.

The codec decodes the *full* JSON form (absent optional fields come back as ``null``, Avro
``double`` fields as floats); the manifest's null-omission rule and RFC 8785 numbers make that
invisible to the signature. This is the invariant ingest relies on.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from conftest import GOLDEN

from producers.evidence import Signer, TrustStore, seal, verify_capture
from schemas import codec


def test_golden_capture_survives_encode_decode(trust: TrustStore) -> None:
    golden = json.loads((GOLDEN / "capture.signed.json").read_text(encoding="utf-8"))
    decoded = codec.decode(codec.encode_capture(golden)).value
    assert verify_capture(decoded, trust).checked_parts == 13


def test_a_capture_sealed_before_normalization_verifies_after_decoding(
    example: dict[str, Any], signer: Signer, trust: TrustStore
) -> None:
    sparse = copy.deepcopy(example)
    sparse["agentConfiguration"]["samplingParameters"].pop("seed")
    sparse["memoryState"]["workingSetEntries"][0].pop("embeddingModel")
    sparse["memoryState"]["workingSetEntries"][0]["retrievalScore"] = 1  # a double field: comes back 1.0
    sparse["executionTrace"]["toolCalls"][0].pop("errorRef")
    sparse["renderedContext"].pop("hash")
    sealed = seal(sparse, signer)
    decoded = codec.decode(codec.encode_capture(sealed)).value
    assert decoded["executionTrace"]["toolCalls"][0]["errorRef"] is None
    assert verify_capture(decoded, trust).checked_parts == 13


def test_structured_only_capture_survives_encode_decode(
    sealed_example: dict[str, Any], trust: TrustStore
) -> None:
    structured = copy.deepcopy(sealed_example)
    structured["renderedContext"]["text"] = None
    for entry in structured["memoryState"]["workingSetEntries"]:
        entry["renderedContent"] = None
    decoded = codec.decode(codec.encode_capture(structured)).value
    report = verify_capture(decoded, trust)
    assert report.checked_parts == 10 and len(report.absent_parts) == 3

"""Write the golden encoded messages for the CURRENT schema versions. Run once per new version.

    python tests/schemas/golden/generate_golden.py

Each golden is ``<kind>_v<N>.bin`` (single-object Avro bytes written with schema ``<kind>/v<N>``)
plus ``<kind>_v<N>.expected.json`` (what decoding it yields today). Existing files are never
overwritten: goldens are committed test data, and the compatibility tests prove that every old
golden still decodes after a schema change. If a later reader legitimately changes the decoded
form (a new field with a default), update the ``.expected.json`` by hand, never the ``.bin``.
The hashes and signatures inside are well-formed placeholders, not real evidence.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parents[2]))

from schemas_testdata import claim_check_event, flag_event, hard_capture  # noqa: E402

from schemas import codec  # noqa: E402


def _sealed_looking(capture: dict[str, Any]) -> dict[str, Any]:
    digest = "sha256:" + "5e" * 32
    capture["input"]["requestPayloadHash"] = digest
    config = capture["agentConfiguration"]
    config["systemPromptHash"] = config["toolSchemaHash"] = digest
    capture["renderedContext"]["hash"] = digest
    for entry in capture["memoryState"]["workingSetEntries"]:
        entry["renderedContentHash"] = digest
    capture["memoryState"].update(contextSetHash=digest, contextSetLeafCount=2)
    trace = capture["executionTrace"]
    trace["reasoningTokensHash"] = trace["finalOutputHash"] = digest
    for call in trace["toolCalls"]:
        call["inputHash"] = call["outputHash"] = digest
    for external in capture["externalState"]["observableExternals"]:
        external["capturedValueHash"] = digest
    for call in trace.get("modelCalls", ()):  # capture/v2
        call["requestBodyHash"] = call["responseBodyHash"] = digest
    if "privacy" in capture:  # capture/v3: what was redacted, and the sealed original
        capture["replayPolicy"]["piiRedacted"] = True
        capture["privacy"] = {
            "detectors": "builtin",
            "redactions": [
                {
                    "part": "memoryState.workingSetEntries[0].renderedContent",
                    "pointer": "",
                    "start": 4,
                    "end": 13,
                    "kind": "EMAIL",
                    "placeholder": "[EMAIL_1]",
                }
            ],
            "originalHashes": [
                {
                    "part": "memoryState.workingSetEntries[0].renderedContent",
                    "hash": "hmac-sha256:" + "7a" * 32,
                }
            ],
            "cipher": "AES-256-GCM",
            "sealedOriginal": "base64:" + "B" * 40,
            "sealedOriginalHash": digest,
        }
    capture["signature"] = {
        "algorithm": "ed25519",
        "publicKeyRef": "did:armalo:agent:agt_support_1#sha256:" + "ab" * 32,
        "signatureBytes": "base64:" + "A" * 86 + "==",
    }
    # capture/v4: judged under a pact version (a capture without one is written as capture/v3)
    capture["pactVersion"] = "pv_" + "0123456789ab" * 2
    return capture


def main() -> int:
    values = {
        "capture": _sealed_looking(hard_capture()),
        "flag": flag_event(signed=True),
        "claim_check": claim_check_event(),
    }
    for kind, value in values.items():
        info = codec.LATEST_SCHEMAS[kind]
        stem = f"{info.kind}_v{info.version}"
        binary, expected = HERE / f"{stem}.bin", HERE / f"{stem}.expected.json"
        if binary.exists() or expected.exists():
            print(f"{stem}: exists, left alone")
            continue
        data = codec.encode_event(kind, value)
        if data[2:10] != info.fingerprint:
            raise SystemExit(f"{stem}: the value was written with another schema; set its new fields")
        decoded = codec.decode(data)
        binary.write_bytes(data)
        expected.write_text(json.dumps(decoded.value, ensure_ascii=True, indent=2) + "\n", encoding="utf-8")
        print(f"{stem}: wrote {len(data)} bytes ({info.fingerprint.hex()})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

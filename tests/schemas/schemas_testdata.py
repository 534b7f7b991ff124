"""Captures for the schemas tests and the codec benchmark (plain dicts in JSON form)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_PATH = REPO / "schemas" / "examples" / "capture.unsealed.json"
GOLDEN_DIR = Path(__file__).resolve().parent / "golden"

# One character from each Unicode plane in use, plus the awkward ones.
EVERY_PLANE = "\u0000 A é ✓ 日本語 \U00010348 𝄞 \U00020000 \U00030000 \U000e0001 \U000f0000 \U0010ffff"
AWKWARD_TEXT = f"line one\r\nline two\r\n  trailing spaces   \n\ttab\n{EVERY_PLANE}\n\u2028\u2029\ufeff\ufffd"


def example() -> dict[str, Any]:
    """A fresh copy of schemas/examples/capture.unsealed.json, in the latest (v3) full form."""
    with EXAMPLE_PATH.open(encoding="utf-8") as handle:
        return with_v2_defaults(json.load(handle))


def with_v2_defaults(capture: dict[str, Any]) -> dict[str, Any]:
    """A v1-shaped capture with the members capture/v2 and v3 add, at their defaults and in schema
    order (what decoding it yields): ``fidelity`` after ``captureLevel``, ``modelCalls`` after
    ``toolCalls``, ``privacy`` (v3) after ``replayPolicy``."""

    def insert_after(record: dict[str, Any], anchor: str, key: str, value: Any) -> dict[str, Any]:
        if key in record:
            return record
        out: dict[str, Any] = {}
        for name, item in record.items():
            out[name] = item
            if name == anchor:
                out[key] = value
        return out

    capture = insert_after(capture, "captureLevel", "fidelity", "sdk")
    capture["executionTrace"] = insert_after(capture["executionTrace"], "toolCalls", "modelCalls", [])
    return insert_after(capture, "replayPolicy", "privacy", None)


def model_call(*, sequence: int = 1, request: str = "{}", response: str | None = "{}") -> dict[str, Any]:
    """One executionTrace.modelCalls record in full form (capture/v2)."""
    return {
        "sequence": sequence,
        "format": "openai.chat.completions",
        "method": "POST",
        "endpoint": "https://api.example.test",
        "path": "/v1/chat/completions",
        "query": None,
        "requestHeaders": [{"name": "content-type", "value": "application/json"}],
        "requestBody": request,
        "requestBodyEncoding": "utf-8",
        "requestBodyHash": None,
        "status": 200,
        "responseBody": response,
        "responseBodyEncoding": "utf-8",
        "responseBodyHash": None,
        "responseContentEncoding": None,
        "streamed": False,
        "complete": True,
        "attempts": 1,
        "error": None,
        "startedAt": "2026-07-23T13:00:00.100Z",
        "latencyMs": 12,
        "spans": [{"part": "system_prompt", "start": 1, "end": 2, "encoding": "json-string"}],
    }


def dumps_ordered(value: Any) -> str:
    """JSON text that shows key order and float spelling, for exact comparisons."""
    return json.dumps(value, ensure_ascii=True)


# Sampling parameters the models refuse but the codec must still carry losslessly: values that
# do not fit their typed Avro slot travel in otherParametersJson.
LENIENT_SAMPLING: dict[str, Any] = {
    "top_p": 0.95,
    "temperature": 0,
    "stop": "</done>",
    "vendor_x": {"z": 1, "a": [-0.0]},
    "seed": 2**64,
    "max_tokens": None,
    "presence_penalty": -0.0,
    "frequency_penalty": True,
    "presentKeys": ["not", "the", "codec's"],
    "otherParametersJson": "{}",
}


def padded_example(target_bytes: int = 20_000) -> dict[str, Any]:
    """The example capture with its text parts padded until its JSON is about ``target_bytes``."""
    capture = example()
    base = len(json.dumps(capture, ensure_ascii=False).encode("utf-8"))
    filler = "Policy detail: refunds need the ledger entry, the customer id and a reason. "
    per_part = max(0, (target_bytes - base) // 4)
    repeat = per_part // len(filler) + 1
    capture["agentConfiguration"]["systemPromptText"] += filler * repeat
    capture["renderedContext"]["text"] += filler * repeat
    for entry in capture["memoryState"]["workingSetEntries"]:
        entry["renderedContent"] += filler * (repeat // 2)
    capture["executionTrace"]["finalOutputText"] += filler * repeat
    return capture


def busy_capture() -> dict[str, Any]:
    """A ~20 KB capture with more structure: 8 memory entries, 3 tool calls with JSON outputs."""
    base = example()
    capture = copy.deepcopy(base)
    capture["agentConfiguration"]["systemPromptText"] = (
        "Policy line: be precise, cite the ledger, never promise what policy forbids. " * 40
    )
    entries = []
    for i in range(8):
        entry = copy.deepcopy(base["memoryState"]["workingSetEntries"][i % 2])
        entry["entryId"] = f"mem_{i:02d}"
        entry["contextPosition"] = i
        entry["renderedContent"] = f"Entry {i}: " + "customer history and notes, 日本語 ✓ 𝄞. " * 14
        entries.append(entry)
    capture["memoryState"]["workingSetEntries"] = entries
    messages = [
        {"role": "system", "content": capture["agentConfiguration"]["systemPromptText"]},
        {"role": "system", "content": "\n\n".join(e["renderedContent"] for e in entries)},
        {"role": "user", "content": "I was charged twice last week, can you refund one?"},
    ]
    capture["renderedContext"]["text"] = json.dumps(messages, ensure_ascii=False)
    calls = []
    for i in range(3):
        call = copy.deepcopy(base["executionTrace"]["toolCalls"][i % 2])
        call["sequence"] = i + 1
        call["output"] = {"rows": [{"id": j, "amount": j * 1.25, "memo": f"txn {j}"} for j in range(12)]}
        calls.append(call)
    capture["executionTrace"]["toolCalls"] = calls
    external = base["externalState"]["observableExternals"][0]
    capture["externalState"]["observableExternals"] = [dict(external, key=f"k{i}") for i in range(4)]
    return capture


def hard_capture() -> dict[str, Any]:
    """A capture exercising every lossless-round-trip promise (unicode, floats, order, nulls)."""
    capture = example()
    tricky_json = {
        "z": 1,
        "a": 2,
        "floats": [0.1, 1e-300, -0.0, 5e-324, 1.7976931348623157e308, 2.5, 880.0],
        "ints": [0, -1, 2**53 + 1, 2**64, -(2**63) - 1, 10**30],
        "text": AWKWARD_TEXT,
        EVERY_PLANE: "key from every plane",
        "nested": {"y": [True, False, None], "b": {}, "a": []},
    }
    capture["runtimeId"] = "rt_" + EVERY_PLANE
    capture["input"]["requestPayload"] = tricky_json
    capture["agentConfiguration"]["systemPromptText"] = AWKWARD_TEXT
    capture["agentConfiguration"]["toolSchemaJson"] = {"tools": [], "z": {"z": 1, "a": 2}}
    capture["agentConfiguration"]["samplingParameters"] = {
        "top_p": 0.95,
        "temperature": 0,
        "vendor_x": {"z": 1, "a": [-0.0]},
        "max_tokens": None,
        "stop": ["</done>", EVERY_PLANE],
        "presence_penalty": -0.0,
    }
    capture["renderedContext"]["text"] = AWKWARD_TEXT
    entry = capture["memoryState"]["workingSetEntries"][0]
    entry["renderedContent"] = AWKWARD_TEXT + "   "
    entry["retrievalScore"] = -0.0
    capture["memoryState"]["workingSetEntries"][1]["retrievalScore"] = 1e-300
    capture["executionTrace"]["reasoningTokens"] = [EVERY_PLANE, "", "  \r\n"]
    calls = capture["executionTrace"]["toolCalls"]
    calls[0]["input"] = "a bare JSON string " + EVERY_PLANE
    calls[0]["output"] = [1, "two", 3.0, None, {"z": 0, "a": -0.0}]
    calls[1]["output"] = 12345678901234567890123
    calls[1]["errorRef"] = "err_timeout"
    capture["externalState"]["observableExternals"][0]["capturedValue"] = {"z": 0.1, "a": 1e-300}
    capture["executionTrace"]["finalOutputText"] = AWKWARD_TEXT
    capture["fidelity"] = "wire"
    capture["executionTrace"]["modelCalls"] = [
        model_call(
            request=json.dumps({"messages": [AWKWARD_TEXT]}, ensure_ascii=False), response=EVERY_PLANE
        ),
        dict(model_call(sequence=2, response=None), streamed=True, complete=False, attempts=3, status=None),
    ]
    return capture


def structured_only_capture() -> dict[str, Any]:
    """Content gone, hashes kept (a structured-only or compacted capture)."""
    capture = example()
    digest = "sha256:" + "0" * 64
    capture["captureLevel"] = "structured-only"
    capture["input"].update(requestPayload=None, requestPayloadHash=digest)
    capture["agentConfiguration"].update(
        systemPromptText=None, systemPromptHash=digest, toolSchemaJson=None, toolSchemaHash=digest
    )
    capture["renderedContext"].update(text=None, hash=digest)
    for entry in capture["memoryState"]["workingSetEntries"]:
        entry.update(renderedContent=None, renderedContentHash=digest)
    trace = capture["executionTrace"]
    trace.update(
        reasoningTokens=None, reasoningTokensHash=digest, finalOutputText=None, finalOutputHash=digest
    )
    for call in trace["toolCalls"]:
        call.update(input=None, inputHash=digest, output=None, outputHash=digest)
    for external in capture["externalState"]["observableExternals"]:
        external.update(capturedValue=None, capturedValueHash=digest)
    return capture


def flag_event(*, signed: bool) -> dict[str, Any]:
    value: dict[str, Any] = {
        "decisionId": "dec_01J9Z8K2V6XAMPLE",
        "agentId": "agt_support_1",
        "reason": "customer disputes the refund ✓",
        "flaggedAt": "2026-07-24T09:30:00.000Z",
        "failure": True,
    }
    if signed:
        value["signature"] = {
            "algorithm": "ed25519",
            "publicKeyRef": "did:armalo:agent:agt_support_1#sha256:" + "ab" * 32,
            "signatureBytes": "base64:" + "A" * 86 + "==",
        }
    return value


def claim_check_event() -> dict[str, Any]:
    return {
        "decisionId": "dec_01J9Z8K2V6XAMPLE",
        "agentId": "agt_support_1",
        "blobKey": "claims/agt_support_1/dec_01J9Z8K2V6XAMPLE.avro",
        "sha256": "sha256:" + "cd" * 32,
        "size": 3_145_728,
        "captureLevel": "full",
        "consequential": True,
    }

"""Shared fixtures for the evidence tests: the example capture, a ~20 KB capture, the golden key."""

from __future__ import annotations

import base64
import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from producers.evidence import Signer, TrustStore

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "schemas" / "examples" / "capture.unsealed.json"
GOLDEN = Path(__file__).resolve().parent / "golden"
KEY_WINDOW_START = datetime(2026, 1, 1, tzinfo=UTC)


def load_example() -> dict[str, Any]:
    return json.loads(EXAMPLE.read_text(encoding="utf-8"))


def golden_signer() -> Signer:
    seed = base64.b64decode((GOLDEN / "test-key.seed").read_text().strip())
    return Signer.from_seed(seed, name="did:blackbox:test")


def large_capture(memory_entries: int = 8) -> dict[str, Any]:
    """The example grown to ~20 KB of JSON: longer prompt, 8 memory entries, 6 tools, 3 calls."""
    capture = load_example()
    config = capture["agentConfiguration"]
    config["systemPromptText"] = ("You are the support agent for Acme Bank. Follow policy v4.7.\n" * 50)[
        :3000
    ]
    tools = config["toolSchemaJson"]["tools"]
    for number in range(4):
        extra = copy.deepcopy(tools[1])
        extra["function"]["name"] = f"tool_{number}"
        extra["function"]["description"] = "Does something useful for the customer; " * 4
        tools.append(extra)
    entries = capture["memoryState"]["workingSetEntries"]
    template = entries[0]
    for number in range(len(entries), memory_entries):
        entry = copy.deepcopy(template)
        entry["entryId"] = f"mem_{number + 1:02d}"
        entry["contextPosition"] = number
        entry["retrievalScore"] = round(0.9 - number / 100, 3)
        entries.append(entry)
    for number, entry in enumerate(entries):
        entry["renderedContent"] = f"Entry {number}: " + "customer history and ticket notes. " * 18
    capture["renderedContext"]["text"] = json.dumps(
        [
            {"role": "system", "content": config["systemPromptText"]},
            {"role": "system", "content": "\n\n".join(e["renderedContent"] for e in entries)},
            {"role": "user", "content": capture["input"]["requestPayload"]["message"]},
        ]
    )
    capture["renderedContext"]["spans"] = []
    trace = capture["executionTrace"]
    trace["reasoningTokens"] = [f"step {n}: consider the refund policy" for n in range(20)]
    call = copy.deepcopy(trace["toolCalls"][0])
    call["sequence"] = 3
    call["output"] = {"history": [{"date": f"2026-07-{d:02d}", "amount": 12.5 * d} for d in range(1, 15)]}
    trace["toolCalls"].append(call)
    trace["finalOutputText"] = "I've refunded $120.00 to your account (refund rf_1). " * 8
    return capture


@pytest.fixture
def example() -> dict[str, Any]:
    return load_example()


@pytest.fixture(scope="session")
def signer() -> Signer:
    return golden_signer()


@pytest.fixture
def trust(signer: Signer) -> TrustStore:
    store = TrustStore()
    store.add(signer.public_raw, not_before=KEY_WINDOW_START, note="golden test key")
    return store


@pytest.fixture
def sealed_example(signer: Signer) -> dict[str, Any]:
    from producers.evidence import seal

    return seal(load_example(), signer)

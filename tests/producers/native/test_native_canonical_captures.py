"""Whole captures, native vs reference: canonical bytes, each part hash, the manifest bytes, the
Merkle root, the signing payload, the sealed capture, its Avro bytes and its verification.

Every outcome is compared with the native core (``BLACKBOX_NATIVE=require``) and with the Python
reference (``BLACKBOX_NATIVE=off``): equal bytes, or the same error with the same path. The
committed golden captures (sealed by an earlier release) reseal to exactly their committed bytes
both ways; 10,000 generated captures cover the torture cases the other tests know.
"""

from __future__ import annotations

import base64
import collections
import copy
import hashlib
import json
import random
import struct
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from native_testing import TESTS, both, native_mode, outcome
from schemas_testdata import (
    AWKWARD_TEXT,
    EVERY_PLANE,
    busy_capture,
    example,
    hard_capture,
    padded_example,
    structured_only_capture,
)

from producers.evidence import Signer, TrustStore, content_parts, manifest_bytes, seal, verify_capture
from producers.evidence import parts as parts_module
from producers.evidence.canonical import JsonHashCache, canonical_json
from producers.evidence.merkle import context_set_hash
from producers.evidence.payload import signing_payload
from producers.evidence.seal import _copy
from schemas.codec import encode_capture

GOLDEN_KEY = TESTS / "producers" / "evidence" / "golden" / "test-key.seed"
SEALED_GOLDENS = [
    TESTS / "producers" / "evidence" / "golden" / "capture.signed.json",
    TESTS / "producers" / "evidence" / "golden" / "capture.tampered.json",
    *sorted((TESTS / "consumers" / "replay" / "golden").glob("*.json")),
    TESTS / "producers" / "recorder" / "golden" / "article_replay_v1.json",
]
SCHEMA_GOLDENS = sorted((TESTS / "schemas" / "golden").glob("capture_v*.expected.json"))
GENERATED = 10_000
VERIFY_AT = datetime(2026, 12, 1, tzinfo=UTC)


def _signer() -> Signer:
    return Signer.from_seed(base64.b64decode(GOLDEN_KEY.read_text().strip()), name="did:blackbox:test")


SIGNER = _signer()
TRUST = TrustStore()
TRUST.add(SIGNER.public_raw, not_before=datetime(2000, 1, 1, tzinfo=UTC))


@pytest.fixture(autouse=True)
def _fresh_hash_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """The repeated-part hash cache would hand one mode's hash to the other: start each test empty."""
    monkeypatch.setattr(parts_module, "_REPEATED", JsonHashCache(min_chars=256))


def _outputs(capture: dict[str, Any]) -> list[Any]:
    """Every evidence output of ``capture`` (each a value or the error it raised), in one mode."""
    memory = capture.get("memoryState")
    entries = memory.get("workingSetEntries") if isinstance(memory, dict) else None
    sealed = outcome(lambda: seal(capture, SIGNER))
    return [
        outcome(lambda: canonical_json(capture, path="capture")),
        outcome(lambda: content_parts(capture)),
        outcome(lambda: manifest_bytes(capture)),
        outcome(lambda: context_set_hash(entries)) if isinstance(entries, list) else None,
        outcome(lambda: signing_payload(_copy(capture), fill_root=True)),  # verify's is checked below
        sealed,
        outcome(lambda: encode_capture(sealed)) if isinstance(sealed, dict) else None,
        outcome(lambda: verify_capture(sealed, TRUST, at=VERIFY_AT)) if isinstance(sealed, dict) else None,
    ]


def _fingerprint(outputs: list[Any]) -> str:
    """One digest of all outputs; ``repr`` keeps 1 vs 1.0, -0.0, key order and every byte."""
    return hashlib.sha256(repr(outputs).encode("utf-8", "backslashreplace")).hexdigest()


def _assert_same_both_ways(make: Callable[[], dict[str, Any]]) -> list[Any]:
    with native_mode("require"):
        natively = _outputs(make())
    parts_module._REPEATED = JsonHashCache(min_chars=256)
    with native_mode("off"):
        reference = _outputs(make())
    for index, (ours, theirs) in enumerate(zip(natively, reference, strict=True)):
        assert ours == theirs, f"output {index} differs"
    assert repr(natively) == repr(reference)
    return natively


# --- committed goldens ---------------------------------------------------------------------------
@pytest.mark.parametrize("path", SEALED_GOLDENS, ids=lambda path: path.name)
def test_committed_sealed_captures_give_the_same_outputs_both_ways(path: Path) -> None:
    golden = json.loads(path.read_text(encoding="utf-8"))
    _assert_same_both_ways(lambda: copy.deepcopy(golden))
    natively, reference = both(lambda: verify_capture(golden, TRUST, at=VERIFY_AT))
    assert natively == reference


@pytest.mark.parametrize(
    "path", [p for p in SEALED_GOLDENS if "tampered" not in p.name and "article" not in p.name], ids=str
)
def test_captures_sealed_by_the_release_reseal_to_their_committed_bytes(path: Path) -> None:
    """The bytes hashed and signed did not change: resealing reproduces the committed signature."""
    golden = json.loads(path.read_text(encoding="utf-8"))
    unsigned = copy.deepcopy(golden)
    unsigned["signature"]["signatureBytes"] = None
    natively, reference = both(lambda: seal(unsigned, SIGNER))
    assert natively == reference == golden
    assert both(lambda: encode_capture(golden)) == (encode_capture(golden),) * 2
    assert both(lambda: verify_capture(golden, TRUST, at=VERIFY_AT).checked_parts)[0] > 0


@pytest.mark.parametrize("path", SCHEMA_GOLDENS, ids=lambda path: path.name)
def test_schema_golden_captures_give_the_same_outputs_both_ways(path: Path) -> None:
    """Placeholder hashes: sealing refuses them, both ways alike; without them it seals alike."""
    golden = json.loads(path.read_text(encoding="utf-8"))
    _assert_same_both_ways(lambda: copy.deepcopy(golden))
    _assert_same_both_ways(lambda: _without_hashes(copy.deepcopy(golden)))


@pytest.mark.parametrize(
    "make",
    [example, hard_capture, busy_capture, padded_example, structured_only_capture],
    ids=lambda make: make.__name__,
)
def test_the_schema_tests_captures_give_the_same_outputs_both_ways(
    make: Callable[[], dict[str, Any]],
) -> None:
    outputs = _assert_same_both_ways(make)
    if make is not hard_capture:  # hard_capture holds integers beyond 2**53: refused, both ways
        assert isinstance(outputs[5], dict) and isinstance(outputs[6], bytes)


def test_a_capture_sealed_either_way_verifies_either_way() -> None:
    capture = busy_capture()
    with native_mode("require"):
        by_native = seal(capture, SIGNER)
    with native_mode("off"):
        by_reference = seal(capture, SIGNER)
    assert by_native == by_reference
    for mode in ("require", "off"):
        with native_mode(mode):
            for sealed in (by_native, by_reference):
                assert verify_capture(sealed, TRUST, at=VERIFY_AT).checked_parts > 0


# --- generated captures --------------------------------------------------------------------------
# Keys beyond U+FFFF are sorted by UTF-16 code units, not code points (see _Rng).
_KEY_CHARS = ["a", "B", "z", "é", "€", "\ufb33", "\uffff", "\ue000", "\x00", "\n", '"', "\\", "1", "_"]
_ASTRAL = ["😂", "𝄞", "\U0010ffff", "\U00010000"]
_TEXT_CHARS = [*_KEY_CHARS, *_ASTRAL, " ", "\x1f", "\x7f", "\u2028", "\u2029", "\ufeff", "\t", "\r\n",
               "\b", "\f", "/", "日本語"]  # fmt: skip
_TEXTS = [AWKWARD_TEXT, EVERY_PLANE, "", " ", "   trailing   ", "\r\n", "plain ascii text"]
_FLOATS = [
    0.0, -0.0, 0.1, -120.0, 880.0, 1e-4, 5e-324, -5e-324, 1e-300, 1e21, 1.5e21, 2.0**53 - 1,
    2.0**52 + 0.5, 1e300, 1.7976931348623157e308, 0.30000000000000004, 123456789.125, 333333333.3333333,
]  # fmt: skip
# Floats whose ES6 form Python's repr does not have (see _Rng).
_ODD_FLOATS = [9.999999999999999e-5, 1e-7, 1.5e-7, 1e-6, 1e-5, 1e16, 9.99e20, 2.0**53, -(2.0**53), 1e-9]
_INTS = [0, 1, -1, 7, 2**31, -(2**31) - 1, 2**53 - 1, -(2**53 - 1), 10**15]
# Values no canonical form has (the reference names them) and values only the reference prints.
_REFUSED: list[Any] = [2**53, -(2**53), 2**64, float("nan"), float("inf"), "\ud800", {7: "non-string key"}]


class _Rng(random.Random):
    """A seeded generator that knows whether this capture may hold keys beyond U+FFFF and floats
    without Python's ES6 form: either sends the reference down the slow rfc8785 package for the
    whole capture, so one capture in eight gets them (each capture holds dozens of numbers)."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.odd = self.random() < 0.125


def _text(rng: _Rng) -> str:
    if rng.random() < 0.3:
        return rng.choice(_TEXTS)
    return "".join(rng.choice(_TEXT_CHARS) for _ in range(rng.randint(0, 12)))


def _key(rng: _Rng) -> str:
    key = "".join(rng.choice(_KEY_CHARS) for _ in range(rng.randint(0, 6)))
    return key + rng.choice(_ASTRAL) if rng.odd and rng.random() < 0.1 else key


def _number(rng: _Rng) -> Any:
    pick = rng.random()
    if rng.odd and pick < 0.1:
        return rng.choice(_ODD_FLOATS) * rng.choice((1, -1))
    if pick < 0.4:
        return rng.choice(_FLOATS) * rng.choice((1, -1))
    if pick < 0.6:
        return rng.choice(_INTS)
    if pick < 0.8 or not rng.odd:
        return rng.uniform(-1e6, 1e6)
    value = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
    return value if value == value and abs(value) != float("inf") else 0.5


def _json(rng: _Rng, depth: int = 0) -> Any:
    pick = rng.random()
    if depth >= 4 or pick < 0.4:
        return rng.choice([None, True, False, _text(rng), _number(rng), _number(rng), [], {}])
    if pick < 0.65:
        return [_json(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {_key(rng): _json(rng, depth + 1) for _ in range(rng.randint(0, 5))}


def _deep(depth: int) -> Any:
    value: Any = {"leaf": -0.0}
    for level in range(depth):
        value = [value] if level % 2 else {"d": value}
    return value


_EXAMPLE = example()


def generated_capture(index: int) -> dict[str, Any]:
    """Capture ``index`` of the seeded sequence (the same capture every time it is asked for)."""
    rng = _Rng(0xB1AC0B0 + index)
    capture = _copy(_EXAMPLE)
    capture["decisionId"] = f"dec_gen_{index:05d}"
    capture["runtimeId"] = _text(rng)
    capture["input"]["requestPayload"] = _json(rng)
    config = capture["agentConfiguration"]
    config["systemPromptText"] = _text(rng)
    if rng.random() < 0.5:
        config["toolSchemaJson"] = _json(rng)
    config["samplingParameters"]["temperature"] = rng.choice(_FLOATS)
    capture["renderedContext"]["text"] = _text(rng) if rng.random() < 0.9 else None
    positions = rng.sample(range(-5, 2**40), rng.randint(0, 7))
    template = capture["memoryState"]["workingSetEntries"][0]
    entries = []
    for position in positions:
        entry = copy.deepcopy(template)
        entry.update(
            entryId=_text(rng),
            tier=rng.choice(["hot", "warm", "cold", _text(rng)]),
            renderedContent=_text(rng) if rng.random() < 0.85 else None,
            contextPosition=position,
            retrievalScore=rng.choice([None, _number(rng) * 1.0, rng.choice(_FLOATS)]),
            retrievalMethod=rng.choice([None, "semantic", _text(rng)]),
            embeddingModel=rng.choice([None, _text(rng)]),
            embeddingVersion=rng.choice([None, "2024-01"]),
        )
        entry["provenance"]["writerId"] = _text(rng)
        entries.append(entry)
    capture["memoryState"]["workingSetEntries"] = entries
    trace = capture["executionTrace"]
    trace["reasoningTokens"] = [_text(rng) for _ in range(rng.randint(0, 4))] if rng.random() < 0.8 else None
    calls = []
    for sequence in range(rng.randint(0, 4)):
        call = copy.deepcopy(trace["toolCalls"][sequence % 2])
        call.update(sequence=sequence + 1, input=_json(rng), output=_json(rng), toolName=_text(rng) or "t")
        calls.append(call)
    trace["toolCalls"] = calls
    trace["finalOutputText"] = _text(rng)
    capture["externalState"]["observableExternals"][0]["capturedValue"] = _json(rng)
    twist = rng.random()
    if twist < 0.04:  # something only the reference can name, somewhere in a part or the manifest
        holder = rng.choice([capture["input"], capture["agentConfiguration"]["samplingParameters"], *calls])
        slot = rng.choice(["requestPayload", "input", "output", "vendor_x"])
        holder[slot] = {"ok": 1, "bad": [rng.choice(_REFUSED)]}
    elif twist < 0.06:  # deeper than the core walks: the reference prints it
        capture["input"]["requestPayload"] = _deep(rng.randint(130, 200))
    elif twist < 0.07 and entries:  # two entries at one position
        entries[-1]["contextPosition"] = entries[0]["contextPosition"]
    elif twist < 0.08:  # a supplied hash that disagrees
        capture["input"]["requestPayloadHash"] = "sha256:" + "0" * 64
    return capture


def _without_hashes(capture: dict[str, Any]) -> dict[str, Any]:
    for ref in parts_module.iter_parts(capture):
        ref.holder[ref.field.hash_key] = None
    memory = capture.get("memoryState")
    if isinstance(memory, dict):
        memory["contextSetHash"] = None
    return capture


def _pass(mode: str) -> Iterator[str]:
    parts_module._REPEATED = JsonHashCache(min_chars=256)
    with native_mode(mode):
        for index in range(GENERATED):
            yield _fingerprint(_outputs(generated_capture(index)))


def test_ten_thousand_generated_captures_are_byte_identical_both_ways() -> None:
    natively = list(_pass("require"))
    reference = list(_pass("off"))
    differing = [index for index in range(GENERATED) if natively[index] != reference[index]]
    if differing:  # show the first difference in full
        _assert_same_both_ways(lambda: generated_capture(differing[0]))
    assert not differing
    # the sequence reached every outcome: sealed and encoded, and refused for each reason
    with native_mode("require"):
        kinds = {_kind(_outputs(generated_capture(index))) for index in range(0, GENERATED, 25)}
    assert {"sealed", "ContractError"} <= kinds


def _kind(outputs: list[Any]) -> str:
    sealed = outputs[5]
    return "sealed" if isinstance(sealed, dict) and isinstance(outputs[6], bytes) else str(sealed[0])


def _memory_variants() -> Iterator[tuple[str, dict[str, Any]]]:
    base = busy_capture()
    variants: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
        ("no memoryState", lambda c: c.pop("memoryState")),
        ("memoryState not an object", lambda c: c.update(memoryState=["x"])),
        ("entries not a list", lambda c: c["memoryState"].update(workingSetEntries={"a": 1})),
        ("no entries", lambda c: c["memoryState"].update(workingSetEntries=[])),
        ("an entry not an object", lambda c: c["memoryState"]["workingSetEntries"].append("x")),
        ("a shared position", lambda c: c["memoryState"]["workingSetEntries"][1].update(contextPosition=0)),
        ("a bool position", lambda c: c["memoryState"]["workingSetEntries"][1].update(contextPosition=True)),
        ("positions out of order", lambda c: c["memoryState"]["workingSetEntries"].reverse()),
        ("extra entry keys", lambda c: c["memoryState"]["workingSetEntries"][0].update(note={"z": None, "a": 1})),
        ("a wrong root", lambda c: c["memoryState"].update(contextSetHash="sha256:" + "1" * 64)),
        ("the right root", lambda c: c["memoryState"].update(contextSetHash=context_set_hash(c["memoryState"]["workingSetEntries"]))),
        ("a NaN score", lambda c: c["memoryState"]["workingSetEntries"][2].update(retrievalScore=float("nan"))),
        ("a big int in the manifest", lambda c: c["outcome"].update(code=2**60)),
        ("a lone surrogate entry id", lambda c: c["memoryState"]["workingSetEntries"][0].update(entryId="\udfff")),
        ("a non-string key in a section", lambda c: c["executionTrace"].update({5: "five"})),
        ("a sampling subclass", lambda c: c["agentConfiguration"].update(samplingParameters=collections.OrderedDict(a=1))),
    ]  # fmt: skip
    for name, change in variants:
        capture = copy.deepcopy(base)
        change(capture)
        yield name, capture


@pytest.mark.parametrize(
    ("name", "capture"), list(_memory_variants()), ids=lambda v: v if isinstance(v, str) else ""
)
@pytest.mark.parametrize("fill_root", [True, False])
def test_signing_payload_edge_cases_match_both_ways(
    name: str, capture: dict[str, Any], fill_root: bool
) -> None:
    """Seal's and verify's payload, and what seal writes into the capture, on every odd working set."""

    def run() -> tuple[Any, dict[str, Any]]:
        mine = copy.deepcopy(capture)
        return outcome(lambda: signing_payload(mine, fill_root=fill_root)), mine

    natively, reference = both(run)
    assert repr(natively) == repr(reference)

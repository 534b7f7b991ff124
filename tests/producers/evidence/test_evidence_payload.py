"""The one-pass signing payload equals the reference definitions (manifest bytes, leaves)."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest
import rfc8785
from conftest import large_capture, load_example

from producers.evidence import context_set_hash, manifest, manifest_bytes, working_set_leaves
from producers.evidence.canonical import omit_nulls
from producers.evidence.manifest import manifest_view
from producers.evidence.payload import signing_payload
from schemas.errors import ContractError


def _reference(capture: dict[str, Any]) -> tuple[bytes, list[bytes]]:
    entries = capture["memoryState"]["workingSetEntries"]
    return rfc8785.dumps(omit_nulls(manifest_view(capture))), working_set_leaves(entries)


def _variants() -> list[tuple[str, dict[str, Any]]]:
    base = load_example()
    base["memoryState"]["contextSetHash"] = "sha256:" + "ab" * 32
    out = [("example", base), ("large", large_capture())]
    variant = copy.deepcopy(base)
    variant["memoryState"]["workingSetEntries"] = []
    out.append(("no entries", variant))
    variant = copy.deepcopy(base)
    del variant["memoryState"]["workingSetEntries"][1]
    out.append(("one entry", variant))
    variant = copy.deepcopy(base)
    variant["memoryState"]["workingSetEntries"][0]["extraKey"] = {"x": 1.0}
    out.append(("extra key", variant))
    variant = copy.deepcopy(base)
    variant["memoryState"]["workingSetEntries"].reverse()
    out.append(("reversed list", variant))
    for marker in ("leaves", "leaf", "end", "root"):
        variant = copy.deepcopy(base)
        variant["memoryState"]["workingSetEntries"][0]["provenance"]["writerId"] = (
            f"\x00blackbox:{marker}\x00"
        )
        out.append((f"marker {marker} in an entry", variant))
        variant = copy.deepcopy(base)
        variant["agentId"] = f"\x00blackbox:{marker}\x00"
        out.append((f"marker {marker} elsewhere", variant))
    variant = copy.deepcopy(base)
    variant["memoryState"]["workingSetEntries"][1]["provenance"]["😂"] = 1
    out.append(("astral key (slow path)", variant))
    variant = copy.deepcopy(base)
    variant["memoryState"]["workingSetEntries"][1]["retrievalScore"] = 1.5e-5
    out.append(("tiny float (slow path)", variant))
    rng = random.Random(3)
    variant = large_capture(memory_entries=17)
    positions = list(range(17))
    rng.shuffle(positions)
    for entry, position in zip(variant["memoryState"]["workingSetEntries"], positions, strict=True):
        entry["contextPosition"] = position * 3
    out.append(("17 shuffled entries", variant))
    return out


@pytest.mark.parametrize(("name", "capture"), _variants(), ids=[name for name, _ in _variants()])
def test_verify_mode_equals_the_reference(name: str, capture: dict[str, Any]) -> None:
    payload, leaves = _reference(capture)
    signed = signing_payload(copy.deepcopy(capture), fill_root=False)
    assert signed.payload == payload == manifest_bytes(capture)
    assert signed.leaves == leaves


@pytest.mark.parametrize(("name", "capture"), _variants(), ids=[name for name, _ in _variants()])
def test_seal_mode_fills_the_root_like_the_reference(name: str, capture: dict[str, Any]) -> None:
    capture = copy.deepcopy(capture)
    capture["memoryState"]["contextSetHash"] = None
    expected_root = context_set_hash(capture["memoryState"]["workingSetEntries"])
    signed = signing_payload(capture, fill_root=True)
    assert capture["memoryState"]["contextSetHash"] == expected_root
    assert signed.payload == rfc8785.dumps(manifest(capture))


def test_seal_mode_refuses_a_wrong_supplied_root_and_bad_positions() -> None:
    capture = load_example()
    capture["memoryState"]["contextSetHash"] = "sha256:" + "00" * 32
    with pytest.raises(ContractError) as info:
        signing_payload(capture, fill_root=True)
    assert info.value.path == "memoryState.contextSetHash"
    capture = load_example()
    capture["memoryState"]["workingSetEntries"][1]["contextPosition"] = 0
    with pytest.raises(ContractError):
        signing_payload(capture, fill_root=True)
    assert signing_payload(capture, fill_root=False).leaves is None  # verify reports it later


def test_contract_captures_take_the_one_pass_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    from producers.evidence import payload

    def refuse(*args: Any, **kwargs: Any) -> list[bytes]:
        raise AssertionError("fell back to encoding the leaves separately")

    monkeypatch.setattr(payload, "working_set_leaves", refuse)
    for capture in (load_example(), large_capture()):
        capture["memoryState"]["contextSetHash"] = None
        signing_payload(capture, fill_root=True)
        signing_payload(capture, fill_root=False)

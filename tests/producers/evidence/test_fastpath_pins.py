"""Pinned configuration hashes (the recorder's fast path) give exactly the reference evidence."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from conftest import large_capture

from producers.evidence import Signer, content_parts, seal
from producers.evidence.canonical import json_hash, text_hash
from producers.evidence.parts import pin_part, pinned_hash
from schemas.codec import encode_capture, pin_json_text
from schemas.errors import ContractError


def _fresh() -> dict[str, Any]:
    capture = large_capture()
    capture["captureLevel"] = "full"
    return capture


def test_pinned_seal_equals_reference_seal(signer: Signer) -> None:
    reference = seal(_fresh(), signer)
    capture = _fresh()
    config = capture["agentConfiguration"]
    assert pin_part(config["toolSchemaJson"], "json") == json_hash(config["toolSchemaJson"])
    assert pin_part(config["systemPromptText"], "text") == text_hash(config["systemPromptText"])
    pin_json_text(config["toolSchemaJson"])
    fast = seal(capture, signer, copy=False, pinned=True)
    assert fast == reference
    assert encode_capture(fast) == encode_capture(reference)
    assert {path: digest for path, digest in content_parts(fast).items()} == content_parts(reference)


def test_json_pins_are_ignored_unless_asked(signer: Signer) -> None:
    capture = _fresh()
    schema = capture["agentConfiguration"]["toolSchemaJson"]
    pin_part(schema, "json")
    pin_json_text(schema)
    schema["tools"].append({"type": "function", "function": {"name": "mutated"}})  # after pinning
    expected = json_hash(schema)
    assert pinned_hash(schema, "json") != expected
    for sealed in (seal(capture, signer), seal(copy.deepcopy(capture), signer, copy=False)):
        assert sealed["agentConfiguration"]["toolSchemaHash"] == expected


def test_a_supplied_hash_must_still_agree_with_pinned_text(signer: Signer) -> None:
    capture = _fresh()
    config = capture["agentConfiguration"]
    pin_part(config["systemPromptText"], "text")
    config["systemPromptHash"] = "sha256:" + "0" * 64
    with pytest.raises(ContractError) as caught:
        seal(capture, signer, copy=False, pinned=True)
    assert caught.value.path == "agentConfiguration.systemPromptHash"


def test_pins_are_by_identity_and_kind() -> None:
    value = {"tools": [1, 2, 3]}
    pin_part(value, "json")
    assert pinned_hash(value, "json") == json_hash(value)
    assert pinned_hash(copy.deepcopy(value), "json") is None  # an equal object is not the pinned one
    text = "a system prompt " * 10
    pin_part(text, "text")
    assert pinned_hash(text, "json") is None

"""The scan's walk (``searched_contents``) hands over exactly the parts the redaction walk searches.

Redaction scans every capture with the values of :func:`searched_contents` and only builds its part
references when something was found; the finding's index must then name the same part. So the two
walks must agree, value for value and in order, on every shape a capture can take: each base capture
of the schema tests, and seeded mutations of them (sections, record lists and records that are not
JSON objects or lists, absent and ``null`` parts, text parts that are not ``str``, bodies stored as
base64, a sealed original).
"""

from __future__ import annotations

import copy
import random
from typing import Any

import native_testing  # noqa: F401  (puts the schema tests' capture builders on the path)
import pytest
from schemas_testdata import busy_capture, example, hard_capture, padded_example, structured_only_capture

from producers.evidence.parts import PART_FIELDS, iter_parts
from producers.privacy.redact import _searched, searched_contents

BASES = [example, busy_capture, hard_capture, padded_example, structured_only_capture]
ODD = [None, 7, "text", ["a", {"b": "c"}], {"k": "v"}, b"bytes", 1.5, True]


def reference(capture: dict[str, Any]) -> list[Any]:
    return [ref.content for ref in iter_parts(capture) if _searched(ref)]


def mutated(index: int) -> dict[str, Any]:
    """Capture ``index`` of a seeded sequence: a base capture with a few of its slots made odd."""
    rng = random.Random(0x5EA7 + index)
    capture = copy.deepcopy(BASES[index % len(BASES)]())
    for _ in range(rng.randint(0, 6)):
        field = rng.choice(PART_FIELDS)
        section = capture.get(field.section)
        roll = rng.random()
        if roll < 0.1:
            capture[field.section] = rng.choice(ODD)  # a section that is not an object (or absent)
            continue
        if not isinstance(section, dict):
            section = capture[field.section] = {}
        holder: Any = section
        if field.list_key is not None:
            records = section.get(field.list_key)
            if roll < 0.2 or not isinstance(records, list):
                section[field.list_key] = records = (
                    [{}, rng.choice(ODD), {}] if rng.random() < 0.7 else rng.choice(ODD)
                )
            if not isinstance(records, list) or not records:
                continue
            at = rng.randrange(len(records))
            if not isinstance(records[at], dict):
                continue
            holder = records[at]
        holder[field.content_key] = rng.choice(ODD)
        if field.kind == "text" and rng.random() < 0.5:
            holder[f"{field.content_key}Encoding"] = rng.choice(["base64", "utf-8", None])
    if rng.random() < 0.2:
        if not isinstance(capture.get("privacy"), dict):
            capture["privacy"] = {}
        capture["privacy"]["sealedOriginal"] = "age-encryption.org/v1 ..."
    return capture


@pytest.mark.parametrize("base", BASES, ids=lambda base: base.__name__)
def test_each_base_capture_gives_the_same_parts(base: Any) -> None:
    capture = base()
    got = searched_contents(capture)
    assert bool(got) is (base is not structured_only_capture)  # content to search, or none at all
    assert [id(value) for value in got] == [id(value) for value in reference(capture)]


def test_seeded_odd_captures_give_the_same_parts_in_the_same_order() -> None:
    shapes = set()
    for index in range(2_000):
        capture = mutated(index)
        want = reference(capture)
        got = searched_contents(capture)
        assert [id(value) for value in got] == [id(value) for value in want], index
        shapes.add(len(want))
    assert len(shapes) > 5  # the mutations reached many different part counts


def test_a_base64_body_and_the_sealed_original_are_not_searched() -> None:
    capture = example()
    capture["privacy"] = {"sealedOriginal": "sealed"}
    capture["executionTrace"]["finalOutputText"] = "kept"
    capture["executionTrace"]["finalOutputTextEncoding"] = "base64"
    got = searched_contents(capture)
    assert "sealed" not in got
    assert "kept" not in got

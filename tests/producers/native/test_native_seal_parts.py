"""Sealing's part loop in the native core (``PartChecker.fill``, src/content.rs) against the reference
(:func:`producers.evidence.seal.fill_part_hashes`).

``seal`` with the core and without must give the same sealed capture — the same hashes in the same
places, the same key order, the same signature — or the same error. The core answers only when every
slot passes and writes nothing otherwise, so each way a part can fail is run on raw and on sealed
captures. Its answer must also *come*: a ``fill`` that declined everything would pass the comparison.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from native_testing import native_mode, outcome
from schemas_testdata import busy_capture, structured_only_capture
from test_native_canonical_captures import GENERATED, SIGNER, generated_capture
from test_native_manifest_content import _tampers

from producers.evidence import seal
from producers.evidence.parts import part_checker


def _form(value: Any) -> Any:
    """What must be equal: the sealed dict with its key order, or the error."""
    return json.dumps(value) if isinstance(value, dict) else repr(value)


def _assert_same(capture: dict[str, Any]) -> bool:
    """``seal`` agrees with and without the core on ``capture``; True when the core filled it."""
    with native_mode("require") as core:
        answered = part_checker(core).fill(copy.deepcopy(capture)) is not None
        natively = outcome(lambda: seal(capture, SIGNER))
    with native_mode("off"):
        reference = outcome(lambda: seal(capture, SIGNER))
    assert _form(natively) == _form(reference)
    return answered


def test_ten_thousand_generated_captures_seal_as_the_reference() -> None:
    answered = sum(_assert_same(generated_capture(index)) for index in range(GENERATED))
    assert answered > 0.8 * GENERATED  # declined: values only the reference prints (or refuses)


# each tamper on sealed captures, and on raw ones where it applies (a raw capture has no hash to edit)
_CASES = [(True, name, tamper) for name, tamper in _tampers()] + [
    (False, name, tamper) for name, tamper in _tampers() if name != "hash uppercase"
]


@pytest.mark.parametrize(
    ("sealed", "name", "tamper"),
    _CASES,
    ids=[f"{'sealed' if sealed else 'raw'}-{name}" for sealed, name, _ in _CASES],
)
@pytest.mark.parametrize("make", [busy_capture, structured_only_capture], ids=lambda make: make.__name__)
def test_every_way_a_part_fails_gives_the_reference_outcome(
    make: Callable[[], dict[str, Any]], sealed: bool, name: str, tamper: Callable[[dict[str, Any]], Any]
) -> None:
    capture = make()
    if sealed:
        with native_mode("off"):
            capture = seal(capture, SIGNER)
    capture = copy.deepcopy(capture)
    tamper(capture)
    _assert_same(capture)


def test_nothing_is_written_when_the_core_declines(core: Any) -> None:
    capture = busy_capture()
    capture["executionTrace"]["finalOutputText"] = "\udc00"  # the last slot but one fails
    before = copy.deepcopy(capture)
    assert part_checker(core).fill(capture) is None
    assert capture == before


def test_the_core_fills_ordinary_captures_in_place(core: Any) -> None:
    for make in (busy_capture, structured_only_capture):
        capture = make()
        filled = part_checker(core).fill(capture)
        assert filled is not None and (filled > 0 or make is structured_only_capture)
        with native_mode("off"):
            reference = seal(make(), SIGNER)
        assert capture["input"]["requestPayloadHash"] == reference["input"]["requestPayloadHash"]
        assert _assert_same(make())

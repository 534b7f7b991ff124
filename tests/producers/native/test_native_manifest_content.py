"""The native content check (src/content.rs): verify's check 4 in one call.

Against the reference (:func:`producers.evidence.verify.python_check_content`): the same absent
paths and checked count, or — wherever a part fails — the same error, since the core answers only
when every present part matches and leaves every failure to the reference. Run on the sealed forms
of the 10,000 generated captures and on each way a part can fail. The native answer must also
*come*: a checker that declined everything would pass the comparison, so that is checked too.
"""

from __future__ import annotations

import collections
import copy
from collections.abc import Callable
from typing import Any

import pytest
from native_testing import native_mode, outcome
from schemas_testdata import busy_capture, structured_only_capture
from test_native_canonical_captures import GENERATED, SIGNER, generated_capture

from producers.evidence import seal
from producers.evidence.parts import part_checker
from producers.evidence.verify import _check_content, python_check_content


def _sealed(capture: dict[str, Any]) -> dict[str, Any] | None:
    with native_mode("require"):
        sealed = outcome(lambda: seal(capture, SIGNER))
    return sealed if isinstance(sealed, dict) else None


def _assert_same(capture: dict[str, Any]) -> bool:
    """Native and reference agree on ``capture``; True when the core answered itself."""
    with native_mode("require") as core:
        answered = part_checker(core).check(capture) is not None
        natively = outcome(lambda: _check_content(capture))
    with native_mode("off"):
        reference = outcome(lambda: python_check_content(capture))
    assert repr(natively) == repr(reference)
    return answered


def test_ten_thousand_generated_captures_sealed_give_the_reference_check() -> None:
    sealed = [capture for index in range(GENERATED) if (capture := _sealed(generated_capture(index)))]
    assert len(sealed) > 0.8 * GENERATED
    answered = sum(_assert_same(capture) for capture in sealed)
    assert answered > 0.95 * len(sealed)  # only parts with values the core declines go to Python


class _Text(str):
    """A str subclass: the core declines it, the reference decides."""


def _tampers() -> list[tuple[str, Callable[[dict[str, Any]], Any]]]:
    def call(c: dict[str, Any]) -> dict[str, Any]:
        calls: list[dict[str, Any]] = c["executionTrace"]["toolCalls"]
        return calls[-1]

    def entry(c: dict[str, Any]) -> dict[str, Any]:
        entries: list[dict[str, Any]] = c["memoryState"]["workingSetEntries"]
        return entries[1]

    return [
        ("as sealed", lambda c: None),
        ("text changed", lambda c: c["agentConfiguration"].update(systemPromptText="changed")),
        ("JSON changed", lambda c: c["input"].update(requestPayload={"changed": 1})),
        ("record JSON changed", lambda c: call(c).update(output={"x": [1, 2]})),
        ("entry text changed", lambda c: entry(c).update(renderedContent="changed")),
        ("hash uppercase", lambda c: c["input"].update(requestPayloadHash=c["input"]["requestPayloadHash"].upper())),
        ("hash not sha256", lambda c: c["input"].update(requestPayloadHash="md5:00")),
        ("hash not a str", lambda c: c["input"].update(requestPayloadHash=5)),
        ("hash None, content present", lambda c: call(c).update(inputHash=None)),
        ("content dropped", lambda c: c["renderedContext"].update(text=None)),
        ("content absent in a record", lambda c: entry(c).pop("renderedContent")),
        ("content and hash dropped", lambda c: call(c).update(output=None, outputHash=None)),
        ("text not a str", lambda c: c["executionTrace"].update(finalOutputText=["x"])),
        ("text a str subclass", lambda c: c["executionTrace"].update(finalOutputText=_Text("x"))),
        ("text with a lone surrogate", lambda c: c["executionTrace"].update(finalOutputText="\udc00")),
        ("JSON only the reference prints", lambda c: c["input"].update(requestPayload={"n": 2**60})),
        ("a section not a dict", lambda c: c.update(executionTrace="x")),
        ("a section a dict subclass", lambda c: c.update(input=collections.OrderedDict(c["input"]))),
        ("a record not a dict", lambda c: c["executionTrace"]["toolCalls"].append("x")),
        ("a record a dict subclass", lambda c: c["executionTrace"]["toolCalls"].append(collections.OrderedDict(input=1))),
        ("records not a list", lambda c: c["executionTrace"].update(toolCalls=tuple(c["executionTrace"]["toolCalls"]))),
        ("a non-string key in a holder", lambda c: call(c).update({3: "x"})),
        ("a non-string key at the top", lambda c: c.update({3: None})),
        ("no sections", lambda c: [c.pop(key) for key in ("input", "executionTrace", "memoryState")]),
    ]  # fmt: skip


@pytest.mark.parametrize(("name", "tamper"), _tampers(), ids=lambda v: v if isinstance(v, str) else "")
@pytest.mark.parametrize("make", [busy_capture, structured_only_capture], ids=lambda make: make.__name__)
def test_every_way_a_part_fails_gives_the_reference_error(
    make: Callable[[], dict[str, Any]], name: str, tamper: Callable[[dict[str, Any]], Any]
) -> None:
    sealed = _sealed(make())
    assert sealed is not None
    capture = copy.deepcopy(sealed)
    tamper(capture)
    _assert_same(capture)


def test_the_checker_answers_for_sealed_captures() -> None:
    """Not declined: a sealed capture is checked natively (else the comparisons prove nothing)."""
    for make in (busy_capture, structured_only_capture):
        sealed = _sealed(make())
        assert sealed is not None
        assert _assert_same(sealed)
        absent, checked = _check_content(sealed)
        assert checked > 0 or absent

"""The native manifest writer (src/manifest.rs): seal's and verify's signing payload in one call.

Against the reference (:func:`producers.evidence.payload.python_signing_payload`): the same
payload bytes, the same leaves, the same root written into the capture, or the same error — on the
10,000 generated captures of ``test_native_canonical_captures`` and on the manifest's own edge
cases (v2 defaults, subclasses, odd keys, odd working sets). The native path must also *run*: a
writer that declined everything would pass the comparison, so the share it handles is checked.
"""

from __future__ import annotations

import collections
import copy
from collections.abc import Callable
from typing import Any

import pytest
from native_testing import native_mode, outcome
from schemas_testdata import busy_capture, example
from test_native_canonical_captures import GENERATED, generated_capture

from producers.evidence.manifest import manifest_bytes, manifest_rules
from producers.evidence.merkle import WORKING_SET_LEAF_KEYS, context_set_hash
from producers.evidence.payload import _native_signing_payload, python_signing_payload, signing_payload


def _both(capture: dict[str, Any], *, fill_root: bool) -> tuple[Any, Any]:
    """(native, reference) outcome of the signing payload on copies of ``capture``, each with the
    capture as the call left it; native None (declined) is reported as such."""
    with native_mode("require") as core:
        mine = copy.deepcopy(capture)
        natively = outcome(lambda: _native_signing_payload(core, mine, fill_root=fill_root)), mine
    theirs = copy.deepcopy(capture)
    reference = outcome(lambda: python_signing_payload(theirs, fill_root=fill_root)), theirs
    return natively, reference


def _assert_same(capture: dict[str, Any], *, fill_root: bool) -> bool:
    """The native writer agrees with the reference; True when it did not decline."""
    (natively, mine), (reference, theirs) = _both(capture, fill_root=fill_root)
    if natively is None:
        return False
    assert repr(natively) == repr(reference)
    assert repr(mine) == repr(theirs)  # seal writes the same root into the capture
    return True


def test_ten_thousand_generated_captures_give_the_reference_payload() -> None:
    handled = 0
    for index in range(GENERATED):
        capture = generated_capture(index)
        for fill_root in (True, False):
            handled += _assert_same(capture, fill_root=fill_root)
    # generated captures that only the reference prints (big ints, NaN, deep values, astral keys
    # with odd floats) are a minority; the rest must go through the writer
    assert handled > 0.8 * 2 * GENERATED


class _Text(str):
    """A str subclass: the core declines it, the reference decides."""


class _List(list[Any]):
    """A list subclass: the core declines it, the reference decides."""


def _variants() -> list[tuple[str, Callable[[dict[str, Any]], Any]]]:
    def entries(c: dict[str, Any]) -> list[Any]:
        entries: list[Any] = c["memoryState"]["workingSetEntries"]
        return entries

    return [
        ("as built", lambda c: None),
        ("fidelity wire", lambda c: c.update(fidelity="wire")),
        ("fidelity sdk", lambda c: c.update(fidelity="sdk")),
        ("fidelity a str subclass", lambda c: c.update(fidelity=_Text("sdk"))),
        ("fidelity None", lambda c: c.update(fidelity=None)),
        ("fidelity a list", lambda c: c.update(fidelity=[])),
        ("modelCalls empty", lambda c: c["executionTrace"].update(modelCalls=[])),
        ("modelCalls a tuple", lambda c: c["executionTrace"].update(modelCalls=())),
        ("modelCalls a record", lambda c: c["executionTrace"].update(modelCalls=[{"requestBody": "x", "requestBodyHash": "h", "n": None}])),
        ("modelCalls not records", lambda c: c["executionTrace"].update(modelCalls=["x", None, 1.5, {"a": None}])),
        ("toolCalls a dict-subclass record", lambda c: c["executionTrace"]["toolCalls"].append(collections.OrderedDict(input=1))),
        ("toolCalls a list subclass", lambda c: c["executionTrace"].update(toolCalls=_List([{"input": 1}]))),
        ("a section not a dict", lambda c: c.update(executionTrace="trace")),
        ("a section a dict subclass", lambda c: c.update(input=collections.OrderedDict(requestPayload={"a": 1}, x=2))),
        ("a section None", lambda c: c.update(renderedContext=None)),
        ("no signature", lambda c: c.pop("signature")),
        ("signature not a dict", lambda c: c.update(signature=["a"])),
        ("signature with bytes", lambda c: c["signature"].update(signatureBytes="base64:AAAA", extra=None)),
        ("an astral top-level key", lambda c: c.update({"😂": 1, "\uffff": 2, "a\U00010000": 3})),
        ("an astral section key", lambda c: c["executionTrace"].update({"😂": 1, "\ufb33": 2})),
        ("a non-string top-level key", lambda c: c.update({7: "seven"})),
        ("a non-string key with None", lambda c: c.update({7: None})),
        ("a non-string record key", lambda c: c["executionTrace"]["toolCalls"][0].update({7: "seven"})),
        ("a lone surrogate key", lambda c: c["outcome"].update({"\ud800": 1})),
        ("an escaped key", lambda c: c["outcome"].update({'"\\\n\x00': "\x1f"})),
        ("a big int", lambda c: c["outcome"].update(code=2**60)),
        ("a NaN", lambda c: c["outcome"].update(score=float("nan"))),
        ("no memoryState", lambda c: c.pop("memoryState")),
        ("memoryState a list", lambda c: c.update(memoryState=["x"])),
        ("memoryState a dict subclass", lambda c: c.update(memoryState=collections.OrderedDict(c["memoryState"]))),
        ("entries not a list", lambda c: c["memoryState"].update(workingSetEntries={"a": 1})),
        ("entries a tuple", lambda c: c["memoryState"].update(workingSetEntries=tuple(entries(c)))),
        ("no entries", lambda c: c["memoryState"].update(workingSetEntries=[])),
        ("entries None", lambda c: c["memoryState"].update(workingSetEntries=None)),
        ("an entry not an object", lambda c: entries(c).append("x")),
        ("an entry a dict subclass", lambda c: entries(c).append(collections.OrderedDict(contextPosition=99))),
        ("a shared position", lambda c: entries(c)[1].update(contextPosition=entries(c)[0]["contextPosition"])),
        ("a bool position", lambda c: entries(c)[1].update(contextPosition=True)),
        ("a float position", lambda c: entries(c)[1].update(contextPosition=1.0)),
        ("no position", lambda c: entries(c)[1].pop("contextPosition")),
        ("a huge position", lambda c: entries(c)[1].update(contextPosition=2**70)),
        ("negative positions", lambda c: [e.update(contextPosition=-i) for i, e in enumerate(entries(c))]),
        ("positions out of order", lambda c: entries(c).reverse()),
        ("extra entry keys", lambda c: entries(c)[0].update(note={"z": None, "a": 1}, zz=None)),
        ("leaf values None", lambda c: entries(c)[0].update(retrievalScore=None, embeddingModel=None)),
        ("content dropped from an entry", lambda c: entries(c)[0].update(renderedContent=None)),
        ("a wrong root", lambda c: c["memoryState"].update(contextSetHash="sha256:" + "1" * 64)),
        ("the right root", lambda c: c["memoryState"].update(contextSetHash=context_set_hash(entries(c)))),
        ("no root", lambda c: c["memoryState"].pop("contextSetHash", None)),
        ("a root not a str", lambda c: c["memoryState"].update(contextSetHash=5)),
        ("a NaN score", lambda c: entries(c)[2].update(retrievalScore=float("nan"))),
        ("a lone surrogate entry id", lambda c: entries(c)[0].update(entryId="\udfff")),
    ]  # fmt: skip


@pytest.mark.parametrize("fill_root", [True, False])
@pytest.mark.parametrize(("name", "change"), _variants(), ids=lambda v: v if isinstance(v, str) else "")
@pytest.mark.parametrize("make", [busy_capture, example], ids=lambda make: make.__name__)
def test_manifest_edge_cases_give_the_reference_payload(
    make: Callable[[], dict[str, Any]], name: str, change: Callable[[dict[str, Any]], Any], fill_root: bool
) -> None:
    capture = make()
    if name != "no memoryState" and len(capture["memoryState"]["workingSetEntries"]) < 3:
        capture["memoryState"]["workingSetEntries"] = busy_capture()["memoryState"]["workingSetEntries"]
    change(capture)
    _assert_same(capture, fill_root=fill_root)
    # and through the public entry point, whichever path it takes
    with native_mode("require"):
        natively = outcome(lambda: signing_payload(copy.deepcopy(capture), fill_root=fill_root))
    with native_mode("off"):
        reference = outcome(lambda: signing_payload(copy.deepcopy(capture), fill_root=fill_root))
    assert repr(natively) == repr(reference)


def test_the_writer_handles_the_ordinary_captures() -> None:
    """Not declined: the plain cases run natively (else the comparisons above prove nothing)."""
    with native_mode("require") as core:
        for make in (busy_capture, example):
            for fill_root in (True, False):
                capture = make()
                signed = _native_signing_payload(core, capture, fill_root=fill_root)
                assert signed is not None and signed.leaves is not None
                assert signed.payload == manifest_bytes(capture)


def test_a_writer_built_with_a_default_it_cannot_compare_is_refused() -> None:
    top_defaults, strips = manifest_rules()
    memory = ("memoryState", "workingSetEntries", "contextPosition", "contextSetHash")
    with (
        native_mode("require") as core,
        pytest.raises(ValueError, match="a manifest default must be a str or"),
    ):
        core.ManifestWriter({**top_defaults, "x": 1}, strips, WORKING_SET_LEAF_KEYS, memory)

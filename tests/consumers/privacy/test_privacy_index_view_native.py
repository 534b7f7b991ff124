"""The native index view (src/index_view.rs, ``IndexViewWriter``) prints what ``json.dumps`` prints.

``index_manifest_json`` hands the walk to the core; :func:`reference_index_manifest_json` is the
reference. The generated and golden corpora are compared in ``test_privacy_manifest_fast.py``; here
are the values a JSON printer gets wrong first — every float class (random bit patterns, the
repr's switch to exponents, NaN and infinities), every control character, the i64 edges, tuples,
deep nesting — and the values the core must decline (then the reference decides, raising its own
error where it raises one).
"""

from __future__ import annotations

import copy
import random
import struct
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from consumers.privacy import manifest as privacy_manifest
from consumers.privacy.ids import IndexIds
from consumers.privacy.manifest import IDENTIFIERS, index_manifest_json, reference_index_manifest_json
from producers.evidence.manifest import manifest_rules

TESTS = Path(__file__).resolve().parents[2]
for _folder in ("consumers/ingest", "producers/native"):
    if str(TESTS / _folder) not in sys.path:
        sys.path.insert(0, str(TESTS / _folder))
from ingest_testdata import make_capture  # noqa: E402
from native_testing import native_mode  # noqa: E402

KEYS = (IndexIds(None), IndexIds(b"k" * 32))


def _floats() -> list[float]:
    rng = random.Random(0x1D3)
    bits = [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0] for _ in range(20_000)]
    edges = [0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308]
    edges += [1e16, 1e15, 9999999999999998.0, 1e17, 123456789012345678.0, 1e21, 1e22]
    edges += [1e-4, 1e-5, 0.0001234, 0.00009999, 0.1, 0.1 + 0.2, 1.0, 100.0, 1.5, -2.5e-7]
    edges += [float("nan"), float("inf"), float("-inf")]
    powers = [10.0**e for e in range(-323, 308)] + [2.0**e for e in range(-1074, 1024, 7)]
    scaled = [rng.random() * 10.0 ** rng.randint(-20, 20) for _ in range(5_000)]
    return bits + edges + powers + scaled


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for level in range(depth):
        value = {"d": value} if level % 2 else [value]
    return value


def _torture() -> Iterator[dict[str, Any]]:
    base = make_capture(3, tag="view", size=2_000, flagged=True)
    base["signature"] = {"algorithm": "ed25519", "publicKeyRef": "did:x#k1", "signatureBytes": "c2ln"}
    every = copy.deepcopy(base)
    every["unknownTop"] = {
        "floats": _floats(),
        "text": "".join(map(chr, range(0x30))) + '\u007f\u0080\u2028\u2029\ufeff日本語𝄞"\\/',
        "ints": [0, -1, 1, 2**53, 2**63 - 1, -(2**63), True, False, None],
        "tuple": (1, "two", (3.0,)),
        "empty": [{}, [], ""],
        "deep": _nested(100),
    }
    every["input"]["originUserId"] = 'usr_\n"\x01\U0001f600'
    every["memoryState"]["workingSetEntries"].append("not a record")
    every["executionTrace"]["modelCalls"] = [{"requestBody": "x", "responseBody": "y", "k": 1.5}, 7]
    yield every
    unsigned = copy.deepcopy(base)
    del unsigned["signature"]  # the view gains "signature": null at its end
    unsigned["input"] = "not an object"
    yield unsigned
    viewed = copy.deepcopy(base)
    viewed["fidelity"] = "sdk"  # a v2 default: leaves the view
    viewed["indexView"] = {"already": "here"}  # replaced in place by the sealed ids
    viewed["input"]["originSessionId"] = ""  # empty: not an identifier to hash
    yield viewed


class _Dict(dict[str, Any]):
    """A dict subclass: the core declines it, the reference decides."""


def _declined() -> Iterator[dict[str, Any]]:
    base = make_capture(4, tag="view", size=500)
    for change in (
        lambda c: c.__setitem__("input", _Dict(c["input"])),
        lambda c: c.__setitem__("x", 2**64),
        lambda c: c.__setitem__("x", "\ud800 lone surrogate"),
        lambda c: c.__setitem__("x", {1: "int key"}),
        lambda c: c.__setitem__("x", b"bytes"),
        lambda c: c.__setitem__("x", _nested(200)),
    ):
        capture = copy.deepcopy(base)
        change(capture)
        yield capture


def _outcome(function: Any, *args: Any) -> tuple[str, str]:
    try:
        return "ok", function(*args)
    except Exception as exc:
        return "error", type(exc).__name__


def test_the_identifiers_are_members_the_view_keeps() -> None:
    # index_manifest_json finds them on the capture; the reference on the view: the same only while
    # no rule drops them
    top_defaults, strips = manifest_rules()
    for section, field in IDENTIFIERS:
        assert section not in top_defaults
        for name, drop, _lists, defaults in strips:
            assert name != section or (field not in drop and field not in defaults)


def test_every_float_control_character_and_edge_prints_as_json_dumps_does() -> None:
    with native_mode("require"):
        writer = privacy_manifest._view_writer()
        assert writer is not None, "the native core has no IndexViewWriter: rebuild it"
        for capture in _torture():
            assert writer.json(capture, {}, [("signature", capture.get("signature"))]) is not None
            for ids in KEYS:
                assert index_manifest_json(capture, ids) == reference_index_manifest_json(capture, ids)


def test_what_the_core_cannot_print_exactly_goes_to_the_reference() -> None:
    with native_mode("require"):
        writer = privacy_manifest._view_writer()
        assert writer is not None
        for capture in _declined():
            assert writer.json(capture, {}, [("signature", capture.get("signature"))]) is None
            for ids in KEYS:
                expected = _outcome(reference_index_manifest_json, capture, ids)
                assert _outcome(index_manifest_json, capture, ids) == expected


def test_without_the_core_the_reference_writes_it() -> None:
    capture = next(_torture())
    with native_mode("off"):
        assert privacy_manifest._view_writer() is None
        assert index_manifest_json(capture, KEYS[1]) == reference_index_manifest_json(capture, KEYS[1])

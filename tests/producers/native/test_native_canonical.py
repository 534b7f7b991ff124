"""The native canonical JSON and part hashes are byte-identical to the Python reference.

Known answers (RFC 8785 Appendix B, cyberphone/json-canonicalization's test data), every float form
boundary, generated documents, and everything the core must *decline* so the reference raises its
own error (non-string keys, NaN, big integers, lone surrogates, subclasses, other types, depth).
"""

from __future__ import annotations

import collections
import enum
import hashlib
import json
import math
import random
import struct
import threading
import time
from decimal import Decimal
from functools import partial
from types import ModuleType
from typing import Any

import pytest
import rfc8785
from native_testing import both, native_mode
from schemas_testdata import AWKWARD_TEXT, EVERY_PLANE
from test_evidence_canonical import APPENDIX_B, TESTDATA, _document

from producers import native
from producers.evidence import canonical
from producers.evidence.canonical import canonical_json, json_hash, python_canonical_json, text_hash


def _double(bits: str) -> float:
    value: float = struct.unpack(">d", bytes.fromhex(bits))[0]
    return value


def _reference(value: Any, omit: bool = False) -> bytes | None:
    """The reference's bytes, or None where it raises."""
    try:
        return python_canonical_json(value, omit_null_members=omit)
    except Exception:
        return None


def test_the_core_loads_and_is_used_by_default() -> None:
    with native_mode("auto") as core:
        assert core is not None
        assert native.status() == "native"


@pytest.mark.parametrize(("bits", "expected"), APPENDIX_B)
def test_rfc8785_appendix_b_numbers(core: ModuleType, bits: str, expected: str) -> None:
    value = _double(bits)
    assert core.canonical_json(value) == expected.encode() == rfc8785.dumps(value)
    assert core.canonical_json([value, {"n": value}]) == f'[{expected},{{"n":{expected}}}]'.encode()


@pytest.mark.parametrize(("source", "expected"), TESTDATA)
def test_cyberphone_testdata(core: ModuleType, source: str, expected: str) -> None:
    value = json.loads(source)
    assert core.canonical_json(value) == expected.encode("utf-8") == rfc8785.dumps(value)


def test_every_float_form_boundary_and_random_doubles(core: ModuleType) -> None:
    """The ES6 number forms: each decimal exponent, both signs, and 100,000 random bit patterns."""
    rng = random.Random(262)
    values = [0.0, -0.0, 5e-324, 1e-7, 1e-6, 1e-5, 1e-4, 1e16, 1e21, 9.99e20, 2.0**53, 2.0**53 - 1, 0.1]
    for exponent in range(-324, 309):
        for mantissa in (1.0, 1.5, 9.999999999999998, 3.3333333333333335, 1.2345678901234567):
            values.append(float(f"{mantissa!r}e{exponent}"))
    values += [_double(f"{rng.getrandbits(64):016x}") for _ in range(100_000)]
    finite = [value for value in values if math.isfinite(value)]
    for value in finite:
        for signed in (value, -value):
            assert core.canonical_json(signed) == rfc8785.dumps(signed), repr(signed)


def test_integers_up_to_2_53_print_and_beyond_decline(core: ModuleType) -> None:
    for n in (0, 1, -1, 10**15, 2**53 - 1, -(2**53 - 1)):
        assert core.canonical_json(n) == str(n).encode() == rfc8785.dumps(n)
    for n in (2**53, -(2**53), 2**63, -(2**63) - 1, 2**64, 10**30):
        assert core.canonical_json({"ids": [1, n]}) is None
        natively, reference = both(partial(canonical_json, {"ids": [1, n]}, path="p"))
        assert natively == reference
        assert natively[0] == "ContractError" and natively[2] == "p.ids[1]"  # type: ignore[index]


def test_strings_escape_exactly_what_rfc8785_escapes(core: ModuleType) -> None:
    every_bmp_char = "".join(chr(c) for c in range(0xD800)) + "".join(chr(c) for c in range(0xE000, 0x10000))
    for text in (AWKWARD_TEXT, EVERY_PLANE, every_bmp_char, "", '"\\/\b\f\n\r\t\x00\x1f\x7f\u2028'):
        assert core.canonical_json(text) == rfc8785.dumps(text)
        assert core.canonical_json({text: text}) == rfc8785.dumps({text: text})


def test_keys_sort_by_utf16_code_units(core: ModuleType) -> None:
    keys = ["\ufb33", "😂", "\uffff", "\U00010000", "\ue000", "a", "", "é", "\U0010ffff", "aa", "\x00"]
    rng = random.Random(16)
    for _ in range(200):
        rng.shuffle(keys)
        value = {key: index for index, key in enumerate(keys)}
        assert core.canonical_json(value) == rfc8785.dumps(value)


class _Str(str):
    pass


class _Color(enum.IntEnum):
    RED = 1


class _Name(enum.StrEnum):
    ADA = "ada"


_DECLINED = [
    {1: "non-string key"},
    {"a": math.nan},
    [math.inf],
    -math.inf,
    "\ud800",
    {"\udc00": 1},
    ["ok", "lone \udfff surrogate"],
    {"k": _Str("str subclass")},
    {_Str("key subclass"): 1},
    [_Color.RED],
    [_Name.ADA],
    collections.OrderedDict(a=1),
    {"a": Decimal("1.5")},
    {"b": b"bytes"},
    {"s": {1, 2}},
    object(),
]


@pytest.mark.parametrize("value", _DECLINED, ids=lambda value: type(value).__name__)
def test_what_the_core_cannot_prove_goes_to_the_reference(core: ModuleType, value: Any) -> None:
    """Declined, so the reference gives its own bytes (subclasses) or its own error, path included."""
    assert core.canonical_json(value) is None
    assert core.json_hash(value) is None
    natively, reference = both(lambda: canonical_json({"part": value}, path="input.requestPayload"))
    assert natively == reference
    natively, reference = both(lambda: json_hash(value, path="x"))
    assert natively == reference


def test_deep_nesting_declines_before_the_reference_could_fail(core: ModuleType) -> None:
    shallow: Any = "leaf"
    for _ in range(64):
        shallow = [{"a": shallow}]  # 128 containers deep: printed
    assert core.canonical_json(shallow) == rfc8785.dumps(shallow)
    assert core.canonical_json([shallow]) is None  # 129: the reference decides (and prints it)
    assert both(lambda: canonical_json([shallow])) == (rfc8785.dumps([shallow]),) * 2
    deep: Any = "leaf"
    for _ in range(5000):
        deep = [deep]
    assert core.canonical_json(deep) is None
    natively, reference = both(lambda: canonical_json({"d": deep}, path="p"))
    assert natively == reference and natively[0] == "ContractError"  # type: ignore[index]
    circular: list[Any] = []
    circular.append(circular)
    assert core.canonical_json(circular) is None
    assert both(lambda: canonical_json(circular))[0][0] == "ContractError"  # type: ignore[index]


def test_omit_null_members_at_every_depth(core: ModuleType) -> None:
    value: dict[str, Any] = {"a": None, "b": {"c": None, "d": [None, {"e": None}]}, "f": 1.0}
    assert core.canonical_json(value, omit_null_members=True) == b'{"b":{"d":[null,{}]},"f":1}'
    assert core.canonical_json(value) == rfc8785.dumps(value)
    assert value["a"] is None


@pytest.mark.parametrize("omit", [False, True])
def test_generated_documents_equal_the_reference(core: ModuleType, omit: bool) -> None:
    """The evidence tests' generator: every boundary of the Python fast path and of RFC 8785."""
    rng = random.Random(1815 + omit)
    printed = 0
    for _ in range(6000):
        value = _document(rng)
        ours = core.canonical_json(value, omit_null_members=omit)
        if ours is not None:
            printed += 1
            assert ours == _reference(value, omit), value
        else:  # the generator makes no subclasses: declined means the reference refuses it too
            assert _reference(value, omit) is None, value
    assert printed > 3000


def test_json_hash_and_text_hash_are_the_references(core: ModuleType) -> None:
    rng = random.Random(256)
    for _ in range(500):
        value = _document(rng)
        expected = _reference(value)
        digest = core.json_hash(value)
        assert digest == (None if expected is None else "sha256:" + hashlib.sha256(expected).hexdigest())
    for text in (AWKWARD_TEXT, EVERY_PLANE, "", "x" * 100_000, EVERY_PLANE * 5_000):
        assert core.text_hash(text) == "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
        assert both(partial(text_hash, text)) == (core.text_hash(text),) * 2


def test_text_hash_declines_what_the_reference_raises_on(core: ModuleType) -> None:
    assert core.text_hash("lone \ud800") is None
    assert core.text_hash(_Str("subclass")) is None
    assert core.text_hash(b"bytes") is None
    natively, reference = both(lambda: text_hash("lone \ud800"))
    assert natively == reference and natively[0] == "UnicodeEncodeError"  # type: ignore[index]
    assert both(lambda: text_hash(_Str("subclass"))) == (text_hash("subclass"),) * 2


def test_the_public_functions_ask_the_core_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the core loaded, the Python paths do not run for a value the core prints."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the Python path ran")

    with native_mode("require"):
        monkeypatch.setattr(canonical, "python_canonical_json", refuse)
        monkeypatch.setattr(canonical, "_normalize", refuse)
        monkeypatch.setattr(canonical.hashlib, "sha256", refuse)
        value: dict[str, Any] = {"b": [1.5, "x"], "a": None}
        assert canonical_json(value) == rfc8785.dumps(value)
        assert json_hash(value).startswith("sha256:")
        assert canonical.fast_json_hash(value) == json_hash(value)
        assert text_hash("abc").startswith("sha256:")


def test_large_buffers_are_hashed_without_the_gil(core: ModuleType) -> None:
    """Another thread runs while a large text is hashed (the agent's thread is not blocked)."""
    text = "x" * (96 << 20)
    ticks: list[float] = []
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            ticks.append(time.perf_counter())

    thread = threading.Thread(target=spin)
    thread.start()
    try:
        time.sleep(0.01)
        start = time.perf_counter()
        digest = core.text_hash(text)
        end = time.perf_counter()
    finally:
        stop.set()
        thread.join()
    assert digest == "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    margin = (end - start) / 5
    assert any(start + margin < tick < end - margin for tick in ticks), "the GIL was held throughout"


def test_values_the_core_prints_are_never_refused_by_the_reference() -> None:
    """Every outcome compared with both paths: bytes or the same error, never one of each."""
    rng = random.Random(99)
    for _ in range(1000):
        value = _document(rng)
        natively, reference = both(partial(canonical_json, value, path="p"))
        assert natively == reference, value

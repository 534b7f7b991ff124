"""RFC 8785 canonical JSON: known answers, and the fast path against the ``rfc8785`` package."""

from __future__ import annotations

import json
import math
import random
import struct
from typing import Any

import pytest
import rfc8785

from producers.evidence import canonical
from producers.evidence.canonical import canonical_json, omit_nulls, reference_canonical_json
from schemas.errors import ContractError

# RFC 8785 Appendix B: IEEE-754 bit patterns and their canonical text (the same table is in
# cyberphone/json-canonicalization, the RFC's reference implementation).
APPENDIX_B = [
    ("0000000000000000", "0"),
    ("8000000000000000", "0"),
    ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"),
    ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"),
    ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"),
    ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"),
    ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"),
    ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"),
    ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
    ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"),
    ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"),
    ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"),
    ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]

# cyberphone/json-canonicalization testdata/input/*.json -> testdata/output/*.json
TESTDATA = [
    (  # structures
        '{\n  "1": {"f": {"f": "hi","F": 5} ,"\\n": 56.0},\n  "10": { },\n  "": "empty",\n  "a": { },\n'
        '  "111": [ { } ],\n  "A": { }\n}',
        '{"":"empty","1":{"\\n":56,"f":{"F":5,"f":"hi"}},"10":{},"111":[{}],"A":{},"a":{}}',
    ),
    (  # arrays
        '[\n  56,\n  {\n    "d": true,\n    "10": null,\n    "1": [ ]\n  }\n]',
        '[56,{"1":[],"10":null,"d":true}]',
    ),
    (  # values
        '{\n  "numbers": [1E30, 4.50, 333333333.33333329, 2e-3, 0.000000000000000000000000001],\n'
        '  "escaping": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",\n'
        '  "literals": [null, true, false]\n}',
        '{"escaping":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/","literals":[null,true,false],'
        '"numbers":[1e+30,4.5,333333333.3333333,0.002,1e-27]}',
    ),
    (  # weird: keys sorted by UTF-16 code units (the emoji's surrogates sort before U+FB33)
        '{\n  "\\u20ac": "Euro Sign",\n  "1": "One",\n  "\\u0080": "Control\\u007f",\n'
        '  "\\ud83d\\ude02": "Smiley",\n  "\\u00f6": "Latin Small Letter O With Diaeresis",\n'
        '  "\\ufb33": "Hebrew Letter Dalet With Dagesh",\n  "</script>": "Browser Challenge"\n}\n',
        '{"1":"One","</script>":"Browser Challenge","\u0080":"Control\u007f",'
        '"ö":"Latin Small Letter O With Diaeresis","€":"Euro Sign","😂":"Smiley",'
        '"\ufb33":"Hebrew Letter Dalet With Dagesh"}',
    ),
    (  # french: no locale, code units only
        '{\n  "peach": "This sorting order",\n  "péché": "is wrong according to French",\n'
        '  "pêche": "but canonicalization MUST",\n  "sin":   "ingnore locale"\n}\n',
        '{"peach":"This sorting order","péché":"is wrong according to French",'
        '"pêche":"but canonicalization MUST","sin":"ingnore locale"}',
    ),
    (  # unicode: no normalization
        '{\n  "Unnormalized Unicode":"\\u1e0d\\u0307"\n}\n',
        '{"Unnormalized Unicode":"\u1e0d\u0307"}',
    ),
]


def _double(bits: str) -> float:
    return struct.unpack(">d", bytes.fromhex(bits))[0]


@pytest.mark.parametrize(("bits", "expected"), APPENDIX_B)
def test_rfc8785_appendix_b_numbers(bits: str, expected: str) -> None:
    value = _double(bits)
    assert canonical_json(value) == expected.encode()
    assert canonical_json([value, {"n": value}]) == f'[{expected},{{"n":{expected}}}]'.encode()
    assert reference_canonical_json(value) == expected.encode()


@pytest.mark.parametrize("bits", ["7fffffffffffffff", "7ff0000000000000", "fff0000000000000"])
def test_nan_and_infinities_are_refused(bits: str) -> None:
    with pytest.raises(ContractError) as info:
        canonical_json({"a": [1, _double(bits)]}, path="input.requestPayload")
    assert info.value.path == "input.requestPayload.a[1]"


@pytest.mark.parametrize(("source", "expected"), TESTDATA)
def test_cyberphone_testdata(source: str, expected: str) -> None:
    value = json.loads(source)
    assert canonical_json(value) == expected.encode("utf-8")
    assert rfc8785.dumps(value) == expected.encode("utf-8")


def test_integers_beyond_double_precision_are_refused_with_their_path() -> None:
    assert canonical_json(2**53 - 1) == b"9007199254740991"
    assert canonical_json(-(2**53 - 1)) == b"-9007199254740991"
    with pytest.raises(ContractError) as info:
        canonical_json({"ids": [1, 2**63]}, path="executionTrace.toolCalls[0].output")
    assert info.value.path == "executionTrace.toolCalls[0].output.ids[1]"
    assert "as strings" in str(info.value)


def test_non_string_keys_and_lone_surrogates_are_refused() -> None:
    with pytest.raises(ContractError):
        canonical_json({2: "a", 10: "b"})  # json.dumps would print {"2":..,"10":..}: wrong order
    with pytest.raises(ContractError) as info:
        canonical_json({"k": "\ud800"}, path="p")
    assert info.value.path == "p.k"
    with pytest.raises(ContractError):
        canonical_json({"\udc00": 1})


def test_tuples_are_arrays_and_int_subclasses_print_as_ints() -> None:
    assert canonical_json((1, "a", (True, None))) == b'[1,"a",[true,null]]'
    assert canonical_json({"b": False, "a": 0}) == b'{"a":0,"b":false}'


def test_omit_null_members_drops_members_at_every_depth_but_keeps_list_elements() -> None:
    value = {"a": None, "b": {"c": None, "d": [None, {"e": None}]}, "f": 1.0}
    expected = b'{"b":{"d":[null,{}]},"f":1}'
    assert canonical_json(value, omit_null_members=True) == expected
    assert rfc8785.dumps(omit_nulls(value)) == expected
    assert value["a"] is None  # the input is not modified


def test_the_example_capture_takes_the_fast_path(
    monkeypatch: pytest.MonkeyPatch, example: dict[str, Any]
) -> None:
    expected = rfc8785.dumps(example)

    def refuse(value: Any, *, path: str = "") -> bytes:
        raise AssertionError("fell back to the slow path")

    monkeypatch.setattr(canonical, "reference_canonical_json", refuse)
    assert canonical_json(example) == expected


# --- the fast path equals the package on generated documents ----------------------------------
_KEY_CHARS = ["a", "B", "é", "€", "\ufb33", "\uffff", "😂", "𝄞", "\u0080", "\x00", "\n", '"', "\\", "1"]
_STRING_CHARS = [*_KEY_CHARS, " ", "\x1f", "\x7f", "\u2028", "\t", "\b", "\f", "\r", "/", "<"]
_SPECIAL_FLOATS = [
    0.0,
    -0.0,
    1e-4,
    9.999999999999999e-5,
    1e-9,
    9.99e-10,
    1.5e-7,
    1e-6,
    1e-5,
    5e-324,
    1e16,
    1e21,
    9.99e20,
    1.5e21,
    2.0**53,
    2.0**53 - 1,
    -(2.0**53),
    2.0**52 + 0.5,
    1e300,
    0.1,
    0.30000000000000004,
    880.0,
    -120.0,
    123456789.125,
    1.7976931348623157e308,
    math.nan,
    math.inf,
]
_SPECIAL_INTS = [0, 1, -1, 2**53 - 1, -(2**53 - 1), 2**53, -(2**53), 2**63, 10**16]


def _string(rng: random.Random, alphabet: list[str]) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 4)))


def _number(rng: random.Random) -> Any:
    pick = rng.random()
    if pick < 0.3:
        return rng.choice(_SPECIAL_FLOATS) * rng.choice([1, -1])
    if pick < 0.45:
        return rng.choice(_SPECIAL_INTS)
    if pick < 0.7:
        return rng.randint(-(10**6), 10**6)
    if pick < 0.85:
        return rng.uniform(-1e6, 1e6)
    return struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]


def _document(rng: random.Random, depth: int = 0) -> Any:
    pick = rng.random()
    if depth > 3 or pick < 0.35:
        return rng.choice(
            [None, True, False, _string(rng, _STRING_CHARS), _number(rng), _number(rng), rng.randint(-5, 5)]
        )
    if pick < 0.65:
        return [_document(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    keys = [_string(rng, _KEY_CHARS) for _ in range(rng.randint(0, 5))]
    if rng.random() < 0.03:
        keys.append(rng.choice([7, 1.5, True, None]))  # type: ignore[arg-type]
    return {key: _document(rng, depth + 1) for key in keys}


def _reference(value: Any, omit: bool) -> bytes | type[Exception]:
    try:
        return rfc8785.dumps(omit_nulls(value) if omit else value)
    except rfc8785.CanonicalizationError:
        return ContractError


def _ours(value: Any, omit: bool) -> bytes | type[Exception]:
    try:
        return canonical_json(value, omit_null_members=omit)
    except ContractError:
        return ContractError


@pytest.mark.parametrize("omit", [False, True])
def test_fast_path_equals_rfc8785_on_generated_documents(omit: bool) -> None:
    rng = random.Random(8785 + omit)
    fast = 0
    for _ in range(4000):
        value = _document(rng)
        assert _ours(value, omit) == _reference(value, omit), value
        try:
            canonical._ENCODER.encode(canonical._normalize(value, omit))
            fast += 1
        except Exception:
            pass
    assert fast > 1000  # the comparison exercised the fast path, not only the fallback


def test_every_float_form_boundary_matches_the_package() -> None:
    rng = random.Random(754)
    values = [*_SPECIAL_FLOATS[:-2]]
    for exponent in range(-323, 308):
        for mantissa in (1.0, 1.5, 9.999999999999998, 3.3333333333333335):
            values.append(float(f"{mantissa!r}e{exponent}"))
    values += [struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0] for _ in range(20000)]
    for value in values:
        if math.isfinite(value):
            assert canonical_json(value) == rfc8785.dumps(value), repr(value)
            assert canonical_json(-value) == rfc8785.dumps(-value), repr(-value)

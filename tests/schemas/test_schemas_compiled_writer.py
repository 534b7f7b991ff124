"""The compiled writer writes exactly fastavro's bytes, and refuses what fastavro would coerce."""

from __future__ import annotations

import copy
import io
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_reader, schemaless_writer
from schemas_testdata import (
    LENIENT_SAMPLING,
    busy_capture,
    claim_check_event,
    example,
    flag_event,
    hard_capture,
    padded_example,
    structured_only_capture,
)

from schemas import codec
from schemas._compiled_writer import UnsupportedSchema, compile_writer
from schemas.codec import Codec, EncodeError

FASTAVRO = Codec(codec.KNOWN_SCHEMAS, compiled=False)
COMPILED = Codec(codec.KNOWN_SCHEMAS, compiled=True)


def _no_rendered_context() -> dict[str, Any]:
    capture = example()
    capture["renderedContext"] = None
    return capture


def _lenient() -> dict[str, Any]:
    capture = example()
    capture["agentConfiguration"]["samplingParameters"] = copy.deepcopy(LENIENT_SAMPLING)
    return capture


@pytest.mark.parametrize(
    ("kind", "build"),
    [
        ("capture", example),
        ("capture", hard_capture),
        ("capture", structured_only_capture),
        ("capture", padded_example),
        ("capture", busy_capture),
        ("capture", _lenient),
        ("capture", _no_rendered_context),
        ("flag", lambda: flag_event(signed=True)),
        ("flag", lambda: flag_event(signed=False)),
        ("claim_check", claim_check_event),
    ],
)
def test_compiled_bytes_equal_fastavro_bytes(kind: str, build: Any) -> None:
    assert set(COMPILED._writers) == {"capture", "flag", "claim_check"}
    value = build()
    assert COMPILED.encode(kind, value) == FASTAVRO.encode(kind, value)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("executionTrace.toolCalls[1].sequence", "2"),
        ("executionTrace.toolCalls[0].sequence", True),
        ("consequential.flagged", 1),
        ("replayPolicy.piiRedacted", "no"),
        ("memoryState.workingSetEntries[1].contextPosition", 1.5),
        ("memoryState.workingSetEntries[1].retrievalScore", "high"),
        ("renderedContext.spans", "not a list"),
        ("input.requestPayload", {"x": float("nan")}),
        ("executionTrace.reasoningTokens", [1]),
        ("executionTrace.toolCalls[0].unexpected", 1),
    ],
)
@pytest.mark.parametrize("which", ["compiled", "fastavro"])
def test_both_writers_refuse_the_same_input(which: str, path: str, value: Any) -> None:
    capture = example()
    *parents, last = path.split(".")
    node: Any = capture
    for part in parents:
        name, _, index = part.partition("[")
        node = node[name][int(index.rstrip("]"))] if index else node[name]
    node[last] = value
    with pytest.raises(EncodeError) as info:
        (COMPILED if which == "compiled" else FASTAVRO).encode("capture", capture)
    assert info.value.path.startswith(path)


GENERIC = {
    "type": "record",
    "name": "Outer",
    "namespace": "t",
    "fields": [
        {"name": "i", "type": "int"},
        {"name": "l", "type": "long"},
        {"name": "d", "type": "double"},
        {"name": "b", "type": "boolean"},
        {"name": "raw", "type": "bytes"},
        {"name": "s", "type": "string", "default": "dflt"},
        {"name": "u", "type": ["null", "int", "long", "double", "string", "bytes", "boolean"]},
        {"name": "ua", "type": ["null", {"type": "array", "items": "long"}], "default": None},
        {
            "name": "items",
            "type": {
                "type": "array",
                "items": {
                    "type": "record",
                    "name": "Item",
                    "fields": [
                        {"name": "n", "type": "long"},
                        {"name": "inner", "type": ["null", "Item"], "default": None},
                    ],
                },
            },
        },
        {"name": "again", "type": ["null", "Item"], "default": None},
    ],
}

SAMPLES = [
    {"i": 0, "l": 0, "d": 0.0, "b": False, "raw": b"", "u": None, "items": []},
    {"i": -(2**31), "l": -(2**63), "d": -0.0, "b": True, "raw": b"\x00\xff", "u": 2**31, "items": []},
    {"i": 2**31 - 1, "l": 2**63 - 1, "d": 1e-300, "b": True, "raw": b"x" * 300, "u": 7, "items": []},
    {"i": 63, "l": 64, "d": 5, "b": False, "raw": b"", "u": 0.5, "s": "𝄞" * 40, "items": []},
    {"i": -64, "l": -65, "d": 1.5, "b": False, "raw": b"", "u": "text", "ua": [1, -1, 2**40], "items": []},
    {"i": 1, "l": 1, "d": 1.0, "b": True, "raw": b"", "u": b"bytes", "ua": [], "items": []},
    {"i": 1, "l": 1, "d": 1.0, "b": True, "raw": b"", "u": True, "items": [{"n": 1}]},
    {
        "i": 1,
        "l": 1,
        "d": 1.0,
        "b": True,
        "raw": b"",
        "u": None,
        "items": [{"n": i, "inner": {"n": -i, "inner": None}} for i in range(70)],
        "again": {"n": 5, "inner": {"n": 6}},
    },
]


@pytest.mark.parametrize("datum", SAMPLES)
def test_generic_schema_matches_fastavro(datum: dict[str, Any]) -> None:
    parsed = parse_schema(copy.deepcopy(GENERIC), named_schemas={})
    write = compile_writer(parsed)
    out = bytearray()
    write(datum, out)
    expected = io.BytesIO()
    schemaless_writer(expected, parsed, datum)
    assert bytes(out) == expected.getvalue()
    schemaless_reader(io.BytesIO(bytes(out)), parsed, None)


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("i", 2**31, OverflowError),
        ("l", 2**63, OverflowError),
        ("l", True, TypeError),
        ("l", 1.0, TypeError),
        ("d", True, TypeError),
        ("d", "1.0", TypeError),
        ("d", 2**53 + 1, TypeError),
        ("b", 1, TypeError),
        ("raw", "str", TypeError),
        ("s", b"bytes", TypeError),
        ("u", [1], TypeError),
        ("u", 2**70, TypeError),
        ("items", {"n": 1}, TypeError),
        ("items", [{"n": 1, "extra": 2}], ValueError),
        ("again", ("Item", {"n": 1}), TypeError),
    ],
)
def test_generic_schema_refuses_what_fastavro_would_coerce(field: str, value: Any, error: type) -> None:
    parsed = parse_schema(copy.deepcopy(GENERIC), named_schemas={})
    datum = dict(SAMPLES[0])
    datum[field] = value
    with pytest.raises(error):
        compile_writer(parsed)(datum, bytearray())


def test_missing_field_without_default_raises_key_error() -> None:
    datum = dict(SAMPLES[0])
    del datum["l"]
    with pytest.raises(KeyError):
        compile_writer(parse_schema(copy.deepcopy(GENERIC), named_schemas={}))(datum, bytearray())


@pytest.mark.parametrize(
    "field_type",
    [
        {"type": "enum", "name": "E", "symbols": ["a"]},
        {"type": "fixed", "name": "F", "size": 2},
        {"type": "map", "values": "long"},
        "float",
        {"type": "long", "logicalType": "timestamp-millis"},
        ["null", {"type": "array", "items": "long"}, {"type": "array", "items": "string"}],
    ],
)
def test_unsupported_constructs_are_left_to_fastavro(field_type: Any) -> None:
    schema = {"type": "record", "name": "R", "fields": [{"name": "f", "type": field_type}]}
    with pytest.raises(UnsupportedSchema):
        compile_writer(parse_schema(schema, named_schemas={}))


def test_compiled_encoding_is_faster_than_fastavro_on_a_20kb_capture() -> None:
    # Side by side in the same run (absolute times drift between machines); generous bound.
    import time

    capture = padded_example()

    def best(codec_: Codec) -> float:
        times = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(100):
                codec_.encode("capture", capture)
            times.append(time.perf_counter() - start)
        return min(times)

    assert best(COMPILED) < best(FASTAVRO)

"""The native Avro writer writes exactly the codec's bytes (compiled writer and fastavro alike).

Every capture the other tests know — 10,000 generated ones (sealed and not), the committed
goldens, the schema tests' captures and every refusal they check — is encoded by the core's
``AvroWriter``, by the codec (``schemas.codec.encode_capture``) and by ``fastavro.schemaless_writer``:
where the core writes, its bytes equal both and decode back to the codec's value; where the codec
refuses, the core declines (None), so :func:`producers.avro.encode_capture` raises the codec's
error, naming the same field.
"""

from __future__ import annotations

import collections
import copy
import io
import json
import random
import struct
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_reader, schemaless_writer
from native_testing import TESTS, native_mode, outcome
from schemas_testdata import (
    LENIENT_SAMPLING,
    busy_capture,
    example,
    hard_capture,
    padded_example,
    structured_only_capture,
)
from test_native_canonical_captures import GENERATED, SIGNER, generated_capture
from test_schemas_compiled_writer import GENERIC, SAMPLES

from producers import avro
from producers.evidence import seal
from schemas import codec
from schemas.codec import Codec, EncodeError

FASTAVRO = Codec(codec.KNOWN_SCHEMAS, compiled=False)
PLAN = codec.writer_plan("capture")
LATEST_PLAN = codec.writer_plan("capture", latest=True)  # a capture that sets pactVersion (capture/v4)
GOLDENS = [
    TESTS / "producers" / "evidence" / "golden" / "capture.signed.json",
    TESTS / "producers" / "evidence" / "golden" / "capture.tampered.json",
    *sorted((TESTS / "consumers" / "replay" / "golden").glob("*.json")),
    TESTS / "producers" / "recorder" / "golden" / "article_replay_v1.json",
    *sorted((TESTS / "schemas" / "golden").glob("capture_v*.expected.json")),
]


@pytest.fixture(scope="module")
def writer(core: ModuleType) -> Any:
    return core.AvroWriter(PLAN.schema, list(PLAN.json_fields), dict(PLAN.converters), PLAN.pinned)


@pytest.fixture(scope="module")
def latest_writer(core: ModuleType) -> Any:
    plan = LATEST_PLAN
    return core.AvroWriter(plan.schema, list(plan.json_fields), dict(plan.converters), plan.pinned)


def _compare(
    writer: Any, capture: Any, *, decode: bool = True, fastavro: bool = True, plan: codec.WriterPlan = PLAN
) -> bool:
    """Assert the core agrees with the codec and fastavro on ``capture``; True when it wrote it."""
    natively = writer.encode(capture, plan.header)
    compiled = outcome(lambda: codec.encode_capture(capture))
    if natively is None:
        assert not isinstance(compiled, bytes) or _declinable(capture), "declined what the codec writes"
        return False
    assert natively == compiled, "bytes differ from the codec's"
    if fastavro:
        assert natively == FASTAVRO.encode("capture", capture), "bytes differ from fastavro's"
    if decode:
        assert codec.decode(natively).value == codec.decode(compiled).value
    return True


def _declinable(capture: Any) -> bool:
    """What the core may leave to the codec although it writes it: JSON content deeper than the
    core walks, or with keys that are not strings (json prints ``7`` as ``"7"``). Nothing else."""
    return _depth(capture) > 128 or _odd_keys(capture)


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list | tuple):
        return 1 + max(map(_depth, value), default=0)
    return 0


def _odd_keys(value: Any) -> bool:
    if isinstance(value, dict):
        return any(type(key) is not str or _odd_keys(item) for key, item in value.items())
    return isinstance(value, list | tuple) and any(map(_odd_keys, value))


# --- generated captures --------------------------------------------------------------------------
def test_ten_thousand_generated_captures_encode_byte_identically(writer: Any) -> None:
    written = refused = 0
    for index in range(GENERATED):
        capture = generated_capture(index)
        if _compare(writer, capture, decode=index % 10 == 0):
            written += 1
        elif not isinstance(outcome(partial(codec.encode_capture, capture)), bytes):
            refused += 1
    # the core wrote nearly all of them, and the sequence reached the codec's refusals too
    assert written >= 0.93 * GENERATED and refused > 100


def test_generated_captures_sealed_encode_byte_identically(writer: Any) -> None:
    written = 0
    for index in range(0, GENERATED, 20):
        sealed = outcome(partial(seal, generated_capture(index), SIGNER))
        if isinstance(sealed, dict):
            written += _compare(writer, sealed)
    assert written > 400


# --- goldens and the schema tests' captures ------------------------------------------------------
@pytest.mark.parametrize("path", GOLDENS, ids=lambda path: path.name)
def test_committed_goldens_encode_byte_identically(writer: Any, latest_writer: Any, path: Path) -> None:
    golden = json.loads(path.read_text(encoding="utf-8"))
    if golden.get("pactVersion") is not None:  # capture/v4: the latest schema's writer
        written = _compare(latest_writer, golden, plan=LATEST_PLAN)
    else:
        written = _compare(writer, golden)
    # the article's replay/v1 JSON lacks fields the codec requires: both refuse it
    assert written == (path.name != "article_replay_v1.json")


def _no_rendered_context() -> dict[str, Any]:
    capture = example()
    capture["renderedContext"] = None
    return capture


def _lenient() -> dict[str, Any]:
    capture = example()
    capture["agentConfiguration"]["samplingParameters"] = copy.deepcopy(LENIENT_SAMPLING)
    return capture


def _defaults_omitted() -> dict[str, Any]:
    capture = example()
    for key in ("fidelity", "renderedContext", "privacy"):
        capture.pop(key, None)
    capture["executionTrace"]["toolCalls"][0].pop("input")
    capture["executionTrace"].pop("modelCalls", None)
    return capture


def _tuples() -> dict[str, Any]:
    capture = example()
    capture["executionTrace"]["reasoningTokens"] = ("a", "b")
    capture["input"]["requestPayload"] = {"t": (1, [2.5, (None,)]), "big": -(10**40)}
    return capture


@pytest.mark.parametrize(
    "make",
    [
        example,
        hard_capture,
        busy_capture,
        padded_example,
        lambda: padded_example(120_000),
        structured_only_capture,
        _no_rendered_context,
        _lenient,
        _defaults_omitted,
        _tuples,
    ],
)
def test_the_schema_tests_captures_encode_byte_identically(writer: Any, make: Callable[[], Any]) -> None:
    # fastavro reads a tuple as its (type name, value) union notation; the codec, as an array
    assert _compare(writer, make(), fastavro=make is not _tuples)


# The refusals the codec's tests check: the core declines each, the codec names the field.
REFUSALS = [
    ("executionTrace.toolCalls[1].sequence", "2"),
    ("memoryState.workingSetEntries[0].contextPosition", None),
    ("agentId", None),
    ("replayPolicy.piiRedacted", "no"),
    ("consequential.flagged", 1),
    ("memoryState.workingSetEntries[1].contextPosition", 1.5),
    ("memoryState.workingSetEntries[1].retrievalScore", "high"),
    ("executionTrace.toolCalls[0].sequence", True),
    ("renderedContext.spans[2].start", 237.0),
    ("renderedContext.spans", "not a list"),
    ("input.requestPayload", {"x": float("nan")}),
    ("input.requestPayload", {"n": 10**5000}),
    ("input.requestPayload", {1: "non-string key"}),
    ("input.requestPayload", {"x": object()}),
    ("executionTrace.toolCalls[0].output", {"x": float("inf")}),
    ("executionTrace.toolCalls[0].output", {"x": "lone \udfff"}),
    ("agentConfiguration.systemPromptText", "lone \ud800 surrogate"),
    ("agentConfiguration.samplingParameters", {"vendor_x": {1.5}}),
    ("agentConfiguration.samplingParameters", {"temperature": 0.5, "stop": ["ok", b"not text"]}),
    ("executionTrace.reasoningTokens", [1]),
    ("executionTrace.toolCalls[0].unexpected", 1),
    ("unexpectedTopLevel", 1),
    ("memoryState.workingSetEntries[0].contextPosition", 2**63),
    ("outcome", collections.OrderedDict(code="x")),  # a subclass: the codec writes it
]


def _set(capture: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    node: Any = capture
    for part in parents:
        name, _, index = part.partition("[")
        node = node[name][int(index.rstrip("]"))] if index else node[name]
    node[last] = value


@pytest.mark.parametrize(("path", "value"), REFUSALS, ids=[path for path, _ in REFUSALS])
def test_the_core_declines_what_the_codec_refuses(writer: Any, path: str, value: Any) -> None:
    capture = example()
    _set(capture, path, value)
    assert writer.encode(capture, PLAN.header) is None
    with native_mode("require"):
        natively = outcome(lambda: avro.encode_capture(capture))
    reference = outcome(lambda: codec.encode_capture(capture))
    assert natively == reference
    if not isinstance(reference, bytes):  # (an OrderedDict section is written by the codec)
        assert reference[0] == "EncodeError"


def test_a_missing_field_without_default_is_declined(writer: Any) -> None:
    capture = example()
    del capture["executionTrace"]["toolCalls"][1]["toolName"]
    assert writer.encode(capture, PLAN.header) is None
    with native_mode("require"), pytest.raises(EncodeError) as info:
        avro.encode_capture(capture)
    assert info.value.path == "executionTrace.toolCalls[1].toolName"


def test_a_non_mapping_is_declined(writer: Any) -> None:
    assert writer.encode([1, 2, 3], PLAN.header) is None
    with native_mode("require"), pytest.raises(EncodeError):
        avro.encode_capture([1, 2, 3])  # type: ignore[arg-type]


def test_pinned_json_text_is_used_as_the_codec_uses_it(writer: Any) -> None:
    capture = example()
    schema = {"tools": [{"name": "lookup", "weight": 0.1}]}
    codec.pin_json_text(schema)
    schema["tools"].append("added after pinning")  # a pinned value is not re-serialized
    capture["agentConfiguration"]["toolSchemaJson"] = schema
    assert _compare(writer, capture)
    assert codec.decode(writer.encode(capture, PLAN.header)).value["agentConfiguration"][
        "toolSchemaJson"
    ] == {"tools": [{"name": "lookup", "weight": 0.1}]}


# --- JSON text: numbers and strings --------------------------------------------------------------
JSON_SCHEMA = {"type": "record", "name": "J", "fields": [{"name": "j", "type": ["null", "string"]}]}


def _json_text(core: ModuleType, value: Any) -> str | None:
    json_writer = core.AvroWriter(parse_schema(JSON_SCHEMA, named_schemas={}), [("J", "j")], {}, {})
    data = json_writer.encode({"j": value}, b"")
    if data is None:
        return None
    datum = schemaless_reader(io.BytesIO(data), parse_schema(JSON_SCHEMA, named_schemas={}), None)
    text: str = datum["j"]  # type: ignore[call-overload,index]
    return text


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def test_floats_print_as_python_repr(core: ModuleType) -> None:
    rng = random.Random(20261201)
    boundaries = [
        0.0, -0.0, 1e-4, 1e-5, 9.999999999999999e-5, 1e15, 1e16, 9999999999999998.0, 1e16 - 2,
        123456789012345678.0, 5e-324, 1.7976931348623157e308, 2.0**53, 0.1, 1 / 3, 1e21, 1e22, 1e-7,
    ]  # fmt: skip
    values = boundaries + [
        struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0] for _ in range(200_000)
    ]
    values += [rng.uniform(-1e6, 1e6) for _ in range(20_000)] + [
        float(rng.randint(-(10**18), 10**18)) for _ in range(5000)
    ]
    finite = [value for value in values if value == value and abs(value) != float("inf")]
    for start in range(0, len(finite), 5000):
        chunk = finite[start : start + 5000]
        assert _json_text(core, chunk) == _dumps(chunk)


def test_strings_ints_and_containers_print_as_python_json(core: ModuleType) -> None:
    every_char = "".join(chr(code) for code in range(0x800)) + "\u2028\u2029\ufeff\uffff𝄞😂\U0010ffff"
    value = {
        "text": every_char,
        every_char[:200]: [True, False, None, [], {}, (), [[]], -(2**63), 2**63 - 1, 2**64, -(10**40), 0],
        "": {"nested": {"a": [1.5, "x", {"b": None}]}},
    }
    assert _json_text(core, value) == _dumps(value)
    assert _json_text(core, "plain") == _dumps("plain")
    for refused in (
        float("nan"),
        [float("-inf")],
        {1: 2},
        {"s": {1, 2}},
        "\ud800",
        10**5000,
        bytearray(b"x"),
    ):
        assert _json_text(core, refused) is None


# --- a generic schema: every construct the compiled writer handles --------------------------------
def test_a_generic_schema_writes_fastavros_bytes(core: ModuleType) -> None:
    parsed = parse_schema(copy.deepcopy(GENERIC), named_schemas={})
    generic = core.AvroWriter(parsed, [], {}, {})
    for datum in SAMPLES:
        expected = io.BytesIO()
        schemaless_writer(expected, parsed, datum)
        assert generic.encode(datum, b"\xc3\x01") == b"\xc3\x01" + expected.getvalue()
    for field, value in [("i", 2**31), ("l", 2**63), ("l", True), ("l", 1.0), ("d", True), ("d", "1.0"),
                         ("d", 2**53 + 1), ("b", 1), ("raw", "str"), ("s", b"bytes"), ("u", [1]),
                         ("u", 2**70), ("items", {"n": 1}), ("items", [{"n": 1, "extra": 2}]),
                         ("again", ("Item", {"n": 1}))]:  # fmt: skip
        datum = dict(SAMPLES[0], **{field: value})
        assert generic.encode(datum, b"") is None, field


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
def test_schemas_it_does_not_handle_are_refused_at_construction(core: ModuleType, field_type: Any) -> None:
    schema = {"type": "record", "name": "R", "fields": [{"name": "f", "type": field_type}]}
    with pytest.raises(ValueError, match="native Avro writer does not handle"):
        core.AvroWriter(parse_schema(schema, named_schemas={}), [], {}, {})


# --- the producer's path -------------------------------------------------------------------------
def test_the_pipeline_encodes_through_the_core_and_without_it_alike() -> None:
    capture = busy_capture()
    with native_mode("require") as core:
        natively = avro.encode_capture(capture)
        assert core is not None and avro._writers(core)[0] is not None  # the core writes captures
    with native_mode("off"):
        reference = avro.encode_capture(capture)
    assert natively == reference == codec.encode_capture(capture)

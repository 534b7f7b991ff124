"""The native Avro reader returns exactly the codec's decoded value, or declines.

Every capture the writer tests encode — 10,000 generated ones (sealed and not), the committed
goldens, the schema tests' captures — is decoded by the core's ``AvroReader`` and by the codec
(``schemas.codec.decode``): where the core reads, its value equals the codec's with the same key
order and the same types (compared by ``repr``, so ``1`` vs ``1.0`` vs ``True`` and ``-0.0`` differ);
JSON text is parsed as ``json.loads`` parses it, over a fuzzed corpus; and for garbage, truncated
or older-schema bytes :func:`producers.avro.decode` gives the codec's own value or error.
"""

from __future__ import annotations

import importlib
import io
import json
import random
import re
from collections.abc import Callable
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_writer
from native_testing import TESTS, native_mode, outcome
from schemas_testdata import busy_capture, example, hard_capture, padded_example, structured_only_capture
from test_native_avro import GOLDENS
from test_native_canonical_captures import GENERATED, SIGNER, generated_capture

from producers import avro
from producers.evidence import seal
from schemas import codec

PLAN = codec.writer_plan("capture")
OFFSET = len(PLAN.header)
SCHEMA_GOLDENS = TESTS / "schemas" / "golden"


@pytest.fixture(scope="module")
def reader(core: ModuleType) -> Any:
    avro._readers.forget()
    reader, _header = avro._readers(core)
    assert reader is not None
    return reader


@pytest.fixture(scope="module")
def latest_reader(core: ModuleType) -> Any:
    """The reader of capture/v4 (a capture that sets pactVersion)."""
    avro._latest_readers.forget()
    reader, _header = avro._latest_readers(core)
    assert reader is not None
    return reader


def _same(natively: Any, reference: Any) -> bool:
    """Equal, with the same key order and the same types all the way down."""
    return bool(natively == reference) and repr(natively) == repr(reference)


def _compare(reader: Any, data: bytes) -> bool:
    """Assert the core reads ``data`` as the codec does, or declines; True when it read it."""
    natively = reader.decode(data, OFFSET)
    if natively is None:
        return False
    assert _same(natively, codec.decode(data).value), "the value differs from the codec's"
    return True


def _deeper_than_the_core_walks(value: Any, depth: int = 0) -> bool:
    if depth > 128:
        return True
    if isinstance(value, dict):
        return any(_deeper_than_the_core_walks(item, depth + 1) for item in value.values())
    if isinstance(value, list):
        return any(_deeper_than_the_core_walks(item, depth + 1) for item in value)
    return False


# --- generated captures --------------------------------------------------------------------------
def test_ten_thousand_generated_captures_decode_to_the_codecs_value(reader: Any) -> None:
    read = 0
    for index in range(GENERATED):
        data = outcome(partial(codec.encode_capture, generated_capture(index)))
        if not isinstance(data, bytes):
            continue  # the codec refuses to write it: nothing to read
        if _compare(reader, data):
            read += 1
        else:  # the only captures the core leaves to the codec: JSON deeper than it walks
            assert _deeper_than_the_core_walks(codec.decode(data).value), index
    assert read >= 0.93 * GENERATED


def test_generated_captures_sealed_decode_to_the_codecs_value(reader: Any) -> None:
    read = 0
    for index in range(0, GENERATED, 20):
        sealed = outcome(partial(seal, generated_capture(index), SIGNER))
        if isinstance(sealed, dict):
            read += _compare(reader, codec.encode_capture(sealed))
    assert read > 400


# --- goldens, old schemas and the schema tests' captures -----------------------------------------
@pytest.mark.parametrize("path", GOLDENS, ids=lambda path: path.name)
def test_committed_goldens_decode_to_the_codecs_value(reader: Any, latest_reader: Any, path: Path) -> None:
    data = outcome(lambda: codec.encode_capture(json.loads(path.read_text(encoding="utf-8"))))
    if path.name == "article_replay_v1.json":  # the codec cannot write it (see test_native_avro)
        assert not isinstance(data, bytes)
        return
    assert isinstance(data, bytes)
    if data.startswith(codec.writer_plan("capture", latest=True).header):  # a golden with pactVersion
        assert _compare(latest_reader, data)
        assert reader.decode(data, OFFSET) is None  # not v3's bytes: that reader declines them
        return
    assert _compare(reader, data)


@pytest.mark.parametrize("path", sorted(SCHEMA_GOLDENS.glob("*.bin")), ids=lambda path: path.name)
def test_every_schema_version_decodes_as_the_codec_decodes_it(
    reader: Any, latest_reader: Any, path: Path
) -> None:
    data = path.read_bytes()
    with native_mode("require"):
        natively = avro.decode(data)
    reference = codec.decode(data)
    assert natively.kind == reference.kind and natively.schema == reference.schema
    assert _same(natively.value, reference.value)
    # the core reads the schema captures are written with (capture/v3) and the latest (capture/v4,
    # which adds pactVersion); older writers and other kinds go to the codec
    read = reader.decode(data, OFFSET) is not None or latest_reader.decode(data, OFFSET) is not None
    assert read == (path.name in ("capture_v3.bin", "capture_v4.bin"))


@pytest.mark.parametrize(
    "make",
    [
        example,
        hard_capture,
        busy_capture,
        padded_example,
        lambda: padded_example(120_000),
        structured_only_capture,
    ],
)
def test_the_schema_tests_captures_decode_to_the_codecs_value(reader: Any, make: Callable[[], Any]) -> None:
    assert _compare(reader, codec.encode_capture(make()))


# --- garbage -------------------------------------------------------------------------------------
def _both(data: bytes) -> tuple[Any, Any]:
    with native_mode("require"):
        natively = outcome(lambda: avro.decode(data))
    reference = outcome(lambda: codec.decode(data))
    return _without_addresses(natively), _without_addresses(reference)


def _without_addresses(result: Any) -> Any:
    # fastavro's messages name its buffer object ("<_io.BytesIO object at 0x...>")
    if isinstance(result, tuple):
        return (result[0], re.sub(r" at 0x[0-9a-f]+", "", result[1]), result[2])
    return result


def _as_compared(result: Any) -> Any:
    return (result.kind, result.schema, repr(result.value)) if isinstance(result, codec.Decoded) else result


def test_truncated_bytes_give_the_codecs_error(reader: Any) -> None:
    data = codec.encode_capture(busy_capture())
    for end in [*range(0, 64), *range(64, len(data), 7), len(data) - 1]:
        assert reader.decode(data[:end], OFFSET) is None, end
        natively, reference = _both(data[:end])
        assert natively == reference and isinstance(reference, tuple), end
    assert reader.decode(data + b"\x00", OFFSET) is None  # trailing bytes
    assert _both(data + b"\x00")[0][0] == "DecodeError"


def test_corrupted_bytes_give_the_codecs_value_or_error(reader: Any) -> None:
    rng = random.Random(20261201)
    data = codec.encode_capture(hard_capture())
    errors = 0
    for _ in range(3000):
        mutated = bytearray(data)
        for _ in range(rng.randint(1, 3)):
            mutated[rng.randrange(OFFSET, len(mutated))] = rng.randrange(256)
        natively, reference = _both(bytes(mutated))
        assert _as_compared(natively) == _as_compared(reference)
        errors += isinstance(reference, tuple)
    assert errors > 100  # the corpus reached the codec's errors, not only harmless flips


def test_an_offset_past_the_end_is_declined(reader: Any) -> None:
    assert reader.decode(b"", 0) is None
    assert reader.decode(b"\xc3\x01", 10) is None


# --- JSON text: json.loads exactly, or decline -----------------------------------------------------
JSON_SCHEMA = {"type": "record", "name": "J", "fields": [{"name": "j", "type": ["null", "string"]}]}
MUST_READ = [
    "0", "-0", "-0.0", "0.0", "1", "-1", "9223372036854775807", "-9223372036854775808", "1.5", "1E+2",
    "1e-2", "1.25e5", "5e-324", "1e-400", "2.2250738585072011e-308", "0.1", "123456789012345678901234567890.5",
    "1.7976931348623157e308", "true", "false", "null", '""', '"a\\"b\\\\c\\/d\\b\\f\\n\\r\\t"',
    '"\\u00e9\\u0000\\uFFFF\\ud83d\\ude02"', '"é😂\u2028"', " \t\r\n[ 1 , {\"a\" : [ ] } ] \n", "{}", "[]",
    '{"a":1,"b":2,"a":3}', "9223372036854775808", "-9223372036854775809", "-" + "7" * 4300, '{"": {"": [[[]]]}}', '[1.0, 1, true, null, "1"]',
]  # fmt: skip
MUST_DECLINE = [
    "NaN", "Infinity", "-Infinity", "1e400", "-1e400",
    '"\\ud800"', '"\\udc00"', '"\\ud800\\u0041"', "[" * 200 + "]" * 200,
]  # fmt: skip
INVALID = [
    "", " ", "01", "-", "1.", "1e", "[1e]", "1.e5", ".5", "+1", "[1,]", '{"a":1,}', "{,}", '{"a" 1}',
    "\ufeff1", '"\x01"', '"\\x"', '"\\u12"', '"\\u12G4"', "tru", "nul", "[", "]", '"abc', "1 2", "[1 2]",
    '{"a":1 "b":2}', "{1:2}", "7" * 4301, "'a'", "--1", "-01", "0x10", "1_000",
]  # fmt: skip


@pytest.fixture(scope="module")
def json_reader(core: ModuleType) -> Callable[[str], Any]:
    parsed = parse_schema(JSON_SCHEMA, named_schemas={})
    small = core.AvroReader(parsed, [("J", "j")], {})

    def read(text: str) -> Any:
        out = io.BytesIO()
        schemaless_writer(out, parsed, {"j": text})
        value = small.decode(out.getvalue(), 0)
        return None if value is None else (value["j"],)

    return read


def _check(json_reader: Callable[[str], Any], text: str) -> bool:
    """Assert the core parses ``text`` as json.loads does, or declines; True when it parsed it."""
    natively = json_reader(text)
    reference = outcome(lambda: json.loads(text))
    if natively is None:
        return False
    assert not isinstance(reference, tuple), f"{text!r}: json.loads refuses it ({reference[1]})"
    assert _same(natively[0], reference), text
    return True


@pytest.mark.parametrize("text", MUST_READ)
def test_json_text_is_parsed_as_json_loads_parses_it(json_reader: Callable[[str], Any], text: str) -> None:
    assert _check(json_reader, text)


@pytest.mark.parametrize("text", MUST_DECLINE + INVALID)
def test_json_text_the_core_cannot_mirror_or_json_refuses_is_declined(
    json_reader: Callable[[str], Any], text: str
) -> None:
    assert json_reader(text) is None


def test_fuzzed_json_text_is_parsed_as_json_loads_parses_it_or_declined(
    json_reader: Callable[[str], Any],
) -> None:
    rng = random.Random(7)
    alphabet = ' \t\n{}[]",:.-+eE0123456789\\/ubfnrtaxlsNIé\ud83d\x00'
    seeds = MUST_READ + MUST_DECLINE + INVALID
    read = 0
    for _ in range(20_000):
        text = list(rng.choice(seeds))
        for _ in range(rng.randint(1, 3)):
            at = rng.randint(0, len(text))
            op = rng.random()
            if op < 0.4 or not text:
                text.insert(at, rng.choice(alphabet))
            elif op < 0.7:
                del text[min(at, len(text) - 1)]
            else:
                text[min(at, len(text) - 1)] = rng.choice(alphabet)
        candidate = "".join(text)
        try:
            candidate.encode("utf-8")
        except UnicodeEncodeError:
            continue  # a lone surrogate is not Avro string data
        read += _check(json_reader, candidate)
    assert read > 2000


def test_random_floats_are_parsed_as_python_parses_them(json_reader: Callable[[str], Any]) -> None:
    rng = random.Random(11)
    texts = [f"{rng.random() * 10 ** rng.randint(-320, 308):.{rng.randint(1, 25)}e}" for _ in range(5000)]
    texts += [repr(rng.uniform(-1e9, 1e9)) for _ in range(5000)]
    texts += [
        "0." + "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 60))) for _ in range(2000)
    ]
    for chunk in range(0, len(texts), 500):
        text = "[" + ",".join(texts[chunk : chunk + 500]) + "]"
        assert _check(json_reader, text)


# --- schemas it does not read, and the ingest's path ----------------------------------------------
@pytest.mark.parametrize(
    "field_type",
    [
        {"type": "enum", "name": "E", "symbols": ["a"]},
        {"type": "fixed", "name": "F", "size": 2},
        {"type": "map", "values": "long"},
        "float",
        {"type": "long", "logicalType": "timestamp-millis"},
    ],
)
def test_schemas_it_does_not_handle_are_refused_at_construction(core: ModuleType, field_type: Any) -> None:
    schema = {"type": "record", "name": "R", "fields": [{"name": "f", "type": field_type}]}
    with pytest.raises(ValueError, match="native Avro reader does not handle"):
        core.AvroReader(parse_schema(schema, named_schemas={}), [], {})


def test_ingest_decodes_through_the_core_and_without_it_alike() -> None:
    for module in ("consumers.ingest.prepare", "consumers.ingest.batch"):
        assert importlib.import_module(module).decode is avro.decode, module
    data = codec.encode_capture(busy_capture())
    with native_mode("require") as core:
        natively = avro.decode(data)
        assert core is not None and avro._readers(core)[0] is not None  # the core reads captures
    with native_mode("off"):
        reference = avro.decode(data)
    assert natively == reference
    assert _same(natively.value, codec.decode(data).value)

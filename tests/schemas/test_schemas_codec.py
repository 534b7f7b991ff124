"""The codec: single-object framing, lossless JSON form round trips, refusals."""

from __future__ import annotations

import copy
import dataclasses
import io
import json
import math
from typing import Any

import pytest
from fastavro import schemaless_writer
from schemas_testdata import (
    AWKWARD_TEXT,
    EVERY_PLANE,
    LENIENT_SAMPLING,
    busy_capture,
    claim_check_event,
    dumps_ordered,
    example,
    flag_event,
    hard_capture,
    padded_example,
    structured_only_capture,
)

from schemas import codec
from schemas.codec import MAGIC, Decoded, EncodeError, decode, encode_capture, encode_event, fingerprint
from schemas.errors import DecodeError, SerializationError, UnknownFingerprint


@pytest.fixture
def capture() -> dict[str, Any]:
    """A fresh copy of the example capture (mutate freely)."""
    return example()


@pytest.fixture
def hard() -> dict[str, Any]:
    return hard_capture()


def round_trip(capture: dict[str, Any]) -> dict[str, Any]:
    decoded = decode(encode_capture(capture))
    assert decoded.kind == "capture"
    assert decoded.schema == codec.WRITTEN_SCHEMAS["capture"].name
    return decoded.value


# --- framing -------------------------------------------------------------------------------------


def test_header_is_magic_and_little_endian_rabin_fingerprint(capture: dict[str, Any]) -> None:
    data = encode_capture(capture)
    assert data[:2] == b"\xc3\x01" == MAGIC
    assert data[2:10] == fingerprint("capture") == codec.KNOWN_SCHEMAS["capture/v3"].fingerprint


def _rabin64(data: bytes) -> int:
    """CRC-64-AVRO written from the Avro specification, independent of fastavro."""
    empty = 0xC15D213AA4D7A795
    table = []
    for i in range(256):
        fp = i
        for _ in range(8):
            fp = (fp >> 1) ^ (empty & -(fp & 1))
        table.append(fp)
    fp = empty
    for byte in data:
        fp = (fp >> 8) ^ table[(fp ^ byte) & 0xFF]
    return fp


@pytest.mark.parametrize("name", sorted(codec.KNOWN_SCHEMAS))
def test_fingerprint_is_crc64_avro_of_canonical_form(name: str) -> None:
    info = codec.KNOWN_SCHEMAS[name]
    assert info.fingerprint == _rabin64(info.canonical.encode("utf-8")).to_bytes(8, "little")


def test_fingerprint_matches_a_published_vector() -> None:
    # avro-crc64 (npm) README: this schema's single-object fingerprint bytes are b75d6f7da238cf70.
    from schemas.registry import rabin_fingerprint

    canonical = '{"name":"Example","type":"record","fields":[{"name":"foobar","type":"string"}]}'
    assert rabin_fingerprint(canonical).hex() == "b75d6f7da238cf70"


def test_known_schemas_and_fingerprint_by_kind() -> None:
    assert {"capture/v1", "flag/v1", "claim_check/v1"} <= set(codec.KNOWN_SCHEMAS)
    assert set(codec.LATEST_SCHEMAS) == {"capture", "flag", "claim_check"}
    for kind, info in codec.WRITTEN_SCHEMAS.items():
        assert fingerprint(kind) == info.fingerprint and len(info.fingerprint) == 8
    # capture/v4 only adds pactVersion: a capture without one is still written as capture/v3
    assert codec.LATEST_SCHEMAS["capture"].name == "capture/v4"
    assert codec.WRITTEN_SCHEMAS["capture"].name == "capture/v3"
    assert {k: v.name for k, v in codec.WRITTEN_SCHEMAS.items() if k != "capture"} == {
        k: v.name for k, v in codec.LATEST_SCHEMAS.items() if k != "capture"
    }
    with pytest.raises(KeyError, match="unknown kind"):
        fingerprint("nope")


def test_decoded_is_frozen(capture: dict[str, Any]) -> None:
    decoded = decode(encode_capture(capture))
    assert isinstance(decoded, Decoded)
    with pytest.raises(dataclasses.FrozenInstanceError):
        decoded.kind = "flag"  # type: ignore[misc]


def test_decode_accepts_bytearray_and_memoryview(capture: dict[str, Any]) -> None:
    data = encode_capture(capture)
    assert decode(bytearray(data)).value == decode(memoryview(data)).value == capture


# --- lossless round trips -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "build", [example, hard_capture, structured_only_capture, padded_example, busy_capture]
)
def test_round_trip_is_exact_including_key_order(build: Any) -> None:
    capture = build()
    assert dumps_ordered(round_trip(capture)) == dumps_ordered(capture)


def test_encoding_does_not_mutate_the_input(hard: dict[str, Any]) -> None:
    before = copy.deepcopy(hard)
    encode_capture(hard)
    assert dumps_ordered(hard) == dumps_ordered(before)


def test_unicode_from_every_plane_survives_in_text_and_json(hard: dict[str, Any]) -> None:
    value = round_trip(hard)
    assert value["agentConfiguration"]["systemPromptText"] == AWKWARD_TEXT
    assert "\r\n" in value["renderedContext"]["text"]
    assert value["memoryState"]["workingSetEntries"][0]["renderedContent"].endswith("   ")
    assert value["input"]["requestPayload"][EVERY_PLANE] == "key from every plane"
    assert value["executionTrace"]["reasoningTokens"][0] == EVERY_PLANE
    for char in ("\u0000", "𝄞", "\U0010ffff", "\U000e0001", "\U00020000"):
        assert char in value["runtimeId"]


def test_floats_and_ints_keep_value_type_and_sign(hard: dict[str, Any]) -> None:
    value = round_trip(hard)
    floats = value["input"]["requestPayload"]["floats"]
    assert floats[:3] == [0.1, 1e-300, 0.0]
    assert math.copysign(1.0, floats[2]) == -1.0
    assert floats[3] == 5e-324 and floats[4] == 1.7976931348623157e308
    assert type(floats[6]) is float  # 880.0 stays a float
    assert value["input"]["requestPayload"]["ints"] == [0, -1, 2**53 + 1, 2**64, -(2**63) - 1, 10**30]
    assert value["executionTrace"]["toolCalls"][1]["output"] == 12345678901234567890123
    score = value["memoryState"]["workingSetEntries"][0]["retrievalScore"]
    assert score == 0.0 and math.copysign(1.0, score) == -1.0  # -0.0 through an Avro double
    assert value["memoryState"]["workingSetEntries"][1]["retrievalScore"] == 1e-300
    sampling = value["agentConfiguration"]["samplingParameters"]
    assert type(sampling["temperature"]) is int  # 0 stays 0, not 0.0
    assert math.copysign(1.0, sampling["presence_penalty"]) == -1.0


def test_json_objects_keep_key_order(capture: dict[str, Any]) -> None:
    ordered = {"z": 1, "a": 2, "m": {"z": None, "a": [{"z": 1, "a": 2}]}}
    capture["input"]["requestPayload"] = ordered
    capture["agentConfiguration"]["toolSchemaJson"] = ordered
    capture["executionTrace"]["toolCalls"][0]["input"] = ordered
    capture["executionTrace"]["toolCalls"][0]["output"] = ordered
    capture["externalState"]["observableExternals"][0]["capturedValue"] = ordered
    value = round_trip(capture)
    for got in (
        value["input"]["requestPayload"],
        value["agentConfiguration"]["toolSchemaJson"],
        value["executionTrace"]["toolCalls"][0]["input"],
        value["executionTrace"]["toolCalls"][0]["output"],
        value["externalState"]["observableExternals"][0]["capturedValue"],
    ):
        assert list(got) == ["z", "a", "m"]
        assert list(got["m"]["a"][0]) == ["z", "a"]


@pytest.mark.parametrize("scalar", ["text", "", 0, -0.0, 1e-300, True, False, [], {}])
def test_json_content_may_be_any_json_value(capture: dict[str, Any], scalar: Any) -> None:
    capture["externalState"]["observableExternals"][0]["capturedValue"] = scalar
    got = round_trip(capture)["externalState"]["observableExternals"][0]["capturedValue"]
    assert dumps_ordered(got) == dumps_ordered(scalar) and type(got) is type(scalar)


def test_a_one_megabyte_string_survives(capture: dict[str, Any]) -> None:
    big = ("0123456789abcdef" * 65536)[:-3] + "𝄞\r\n"
    capture["agentConfiguration"]["systemPromptText"] = big
    capture["executionTrace"]["toolCalls"][0]["output"] = {"blob": big}
    value = round_trip(capture)
    assert value["agentConfiguration"]["systemPromptText"] == big
    assert value["executionTrace"]["toolCalls"][0]["output"]["blob"] == big


def test_sampling_parameters_keep_absent_null_order_and_misfits(capture: dict[str, Any]) -> None:
    capture["agentConfiguration"]["samplingParameters"] = copy.deepcopy(LENIENT_SAMPLING)
    got = round_trip(capture)["agentConfiguration"]["samplingParameters"]
    assert dumps_ordered(got) == dumps_ordered(LENIENT_SAMPLING)
    assert got["frequency_penalty"] is True and got["seed"] == 2**64
    assert "top_k" not in got


def test_example_sampling_does_not_grow_null_keys(capture: dict[str, Any]) -> None:
    got = round_trip(capture)["agentConfiguration"]["samplingParameters"]
    assert list(got) == ["temperature", "top_p", "max_tokens", "stop", "seed"]


def test_absent_optional_fields_decode_as_null(capture: dict[str, Any]) -> None:
    del capture["runtimeId"]
    del capture["executionTrace"]["toolCalls"][0]["errorRef"]
    del capture["input"]["requestPayload"]
    del capture["renderedContext"]
    full = codec.normalize_capture(capture)
    assert full["runtimeId"] is None and full["renderedContext"] is None
    assert full["executionTrace"]["toolCalls"][0]["errorRef"] is None
    assert "requestPayload" in full["input"] and full["input"]["requestPayload"] is None
    assert dumps_ordered(round_trip(full)) == dumps_ordered(full)


# --- events --------------------------------------------------------------------------------------


@pytest.mark.parametrize("signed", [False, True])
def test_flag_event_round_trip(signed: bool) -> None:
    value = flag_event(signed=signed)
    decoded = decode(encode_event("flag", value))
    assert (decoded.kind, decoded.schema) == ("flag", "flag/v1")
    assert dumps_ordered(decoded.value) == dumps_ordered(value)
    assert ("signature" in decoded.value) is signed


def test_claim_check_round_trip() -> None:
    value = claim_check_event()
    decoded = decode(encode_event("claim_check", value))
    assert (decoded.kind, decoded.schema) == ("claim_check", "claim_check/v1")
    assert dumps_ordered(decoded.value) == dumps_ordered(value)


def test_encode_event_accepts_capture_and_refuses_unknown_kind(capture: dict[str, Any]) -> None:
    assert encode_event("capture", capture) == encode_capture(capture)
    with pytest.raises(EncodeError, match="unknown kind"):
        encode_event("nope", {})


def test_event_errors_name_the_field() -> None:
    value = flag_event(signed=False)
    del value["failure"]
    with pytest.raises(EncodeError) as info:
        encode_event("flag", value)
    assert info.value.path == "failure"
    value = claim_check_event()
    value["consequential"] = "yes"
    with pytest.raises(EncodeError) as info:
        encode_event("claim_check", value)
    assert info.value.path == "consequential"
    value = claim_check_event()
    value["size"] = 1.5
    with pytest.raises(EncodeError) as info:
        encode_event("claim_check", value)
    assert info.value.path == "size"


# --- refusals on encode ------------------------------------------------------------------------------


def _set(capture: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    node: Any = capture
    for part in parents:
        name, _, index = part.partition("[")
        node = node[name]
        if index:
            node = node[int(index.rstrip("]"))]
    node[last] = value


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("executionTrace.toolCalls[1].sequence", "2"),
        ("memoryState.workingSetEntries[0].contextPosition", None),
        ("agentId", None),
        ("replayPolicy.piiRedacted", "no"),
        ("consequential.flagged", 1),
        ("memoryState.workingSetEntries[1].contextPosition", 1.5),
        ("executionTrace.toolCalls[0].sequence", True),
        ("renderedContext.spans[2].start", 237.0),
        ("input.requestPayload", {"x": float("nan")}),
        ("executionTrace.toolCalls[0].output", {"x": float("inf")}),
        ("agentConfiguration.systemPromptText", "lone \ud800 surrogate"),
        ("executionTrace.toolCalls[0].unexpected", 1),
        ("unexpectedTopLevel", 1),
    ],
)
def test_encode_refuses_and_names_the_path(capture: dict[str, Any], path: str, value: Any) -> None:
    _set(capture, path, value)
    with pytest.raises(EncodeError) as info:
        encode_capture(capture)
    assert info.value.path == path
    assert isinstance(info.value, SerializationError)
    assert info.value.__cause__ is not None


def test_encode_refuses_missing_required_field(capture: dict[str, Any]) -> None:
    del capture["executionTrace"]["toolCalls"][1]["toolName"]
    with pytest.raises(EncodeError) as info:
        encode_capture(capture)
    assert info.value.path == "executionTrace.toolCalls[1].toolName"


def test_encode_refuses_a_non_mapping() -> None:
    with pytest.raises(EncodeError):
        encode_capture([1, 2, 3])  # type: ignore[arg-type]


def test_encode_refuses_integers_beyond_the_conversion_limit(capture: dict[str, Any]) -> None:
    capture["input"]["requestPayload"] = {"n": 10**5000}
    with pytest.raises(EncodeError):
        encode_capture(capture)


# --- refusals on decode ------------------------------------------------------------------------------


def test_unknown_fingerprint_is_refused_with_its_hex(capture: dict[str, Any]) -> None:
    data = bytearray(encode_capture(capture))
    data[2:10] = bytes.fromhex("0123456789abcdef")
    with pytest.raises(UnknownFingerprint, match="0123456789abcdef"):
        decode(bytes(data))
    assert issubclass(UnknownFingerprint, DecodeError)


@pytest.mark.parametrize("data", [b"", b"\xc3", b"\xc3\x01", b"\xc3\x01" + b"\x00" * 7])
def test_short_messages_are_refused(data: bytes) -> None:
    with pytest.raises(DecodeError, match="truncated"):
        decode(data)


def test_bad_magic_is_refused(capture: dict[str, Any]) -> None:
    data = encode_capture(capture)
    with pytest.raises(DecodeError, match="bad magic"):
        decode(b"\x00\x01" + data[2:])
    with pytest.raises(DecodeError, match="bad magic"):
        decode(b'{"version": "replay/v1"}')


def test_every_truncation_of_the_body_is_refused(capture: dict[str, Any]) -> None:
    data = encode_capture(capture)
    cuts = sorted({*range(10, len(data), 37), len(data) - 1, len(data) - 2, 11})
    for cut in cuts:
        with pytest.raises(DecodeError) as info:
            decode(data[:cut])
        assert not isinstance(info.value, UnknownFingerprint)


def test_trailing_bytes_are_refused(capture: dict[str, Any]) -> None:
    with pytest.raises(DecodeError, match="trailing"):
        decode(encode_capture(capture) + b"\x00")


def test_garbage_body_is_refused() -> None:
    header = MAGIC + fingerprint("capture")
    for body in (b"\xff" * 64, b"\x02" * 10, bytes(range(256)) * 4):
        with pytest.raises(DecodeError):
            decode(header + body)


def test_invalid_utf8_is_refused() -> None:
    schema = codec.LATEST_SCHEMAS["claim_check"].parsed
    buffer = io.BytesIO()
    schemaless_writer(buffer, schema, claim_check_event())
    body = buffer.getvalue()
    good_id = b"dec_01J9Z8K2V6XAMPLE"
    broken = body.replace(good_id, b"\xff" + good_id[1:], 1)
    assert broken != body
    with pytest.raises(DecodeError, match="invalid claim_check/v1 body") as info:
        decode(MAGIC + fingerprint("claim_check") + broken)
    assert isinstance(info.value.__cause__, UnicodeDecodeError)


def test_bad_json_text_inside_a_valid_body_is_refused(capture: dict[str, Any]) -> None:
    from schemas.codec import _capture_to_avro

    datum = _capture_to_avro(capture)
    datum["input"]["requestPayload"] = "{not json"
    buffer = io.BytesIO()
    schemaless_writer(buffer, codec.WRITTEN_SCHEMAS["capture"].parsed, datum)
    with pytest.raises(DecodeError, match="invalid capture/v3 content"):
        decode(MAGIC + fingerprint("capture") + buffer.getvalue())


def test_json_sizes_match_the_brief() -> None:
    # The padded example is the ~20 KB capture the timings in the report refer to.
    size = len(json.dumps(padded_example(), ensure_ascii=False).encode("utf-8"))
    assert 18_000 <= size <= 22_000


def test_package_reexports_lazily() -> None:
    import schemas

    assert schemas.decode is decode and schemas.fingerprint("flag") == fingerprint("flag")
    assert schemas.Capture.__name__ == "Capture"
    assert set(schemas.__all__) >= {"Capture", "decode", "encode_capture", "encode_event", "KNOWN_SCHEMAS"}
    with pytest.raises(AttributeError):
        _ = schemas.not_a_thing

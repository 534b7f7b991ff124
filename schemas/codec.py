"""Avro single-object encoding of captures and events: the bytes on the topic and in segments.

Wire format (Avro specification, "Single object encoding")::

    C3 01 | 8-byte little-endian CRC-64-AVRO fingerprint of the writer schema | Avro binary body

Writers use the latest schema of a kind, with one exception (:data:`WRITTEN_WHEN_SET`): top-level
fields the latest schema added that a value sets only sometimes (a capture's ``pactVersion``). A value
that leaves them all null is written with the schema before, byte for byte as before they existed,
so readers that predate them read it; :func:`decode` leaves such a field out of the JSON form when it
is null. :func:`decode` finds the writer schema by its fingerprint among every ``.avsc`` file under
``schemas/`` (all versions), reads the body into the latest schema of the same kind (Avro schema
resolution) and returns the JSON form.

This is the hot path (thousands of captures per second per core), so it never goes through
pydantic: the JSON form maps 1:1 onto the Avro records (same names, same order) and only the
JSON-valued content fields are converted, to and from JSON text. Encoding runs a writer compiled
once from the parsed schema (:mod:`schemas._compiled_writer`, byte-identical to
``fastavro.schemaless_writer`` and about twice as fast); decoding uses
``fastavro.schemaless_reader`` with writer-to-reader schema resolution. Validation of untrusted
input belongs to :mod:`schemas.models`; the codec only refuses what it cannot store losslessly
(never coercing a value), and on failure asks the models for the path of the offending field.

JSON text encoding of content: UTF-8 with no ASCII escaping, separators ``,`` and ``:``, keys in
their original order, ``NaN``/``Infinity`` refused. Python's ``json`` writes floats with ``repr``
(the shortest string that round-trips) and integers exactly, so ``-0.0``, ``1e-300``, ``0.1`` and
big integers come back identical. Integers above Python's int/str conversion limit (4300 digits)
are refused.

The decoded capture is the *full* JSON form: every field present, an absent optional value as
``null`` (``samplingParameters`` keeps exactly the keys it had), except a null field of
:data:`WRITTEN_WHEN_SET`, which is left out. A JSON-valued content part whose
value is JSON ``null`` is indistinguishable from absent content.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal, cast

from fastavro import schemaless_reader, schemaless_writer

from schemas._compiled_writer import UnsupportedSchema, Writer, compile_writer
from schemas.errors import ContractError, DecodeError, SerializationError, UnknownFingerprint
from schemas.registry import SchemaInfo, discover, latest_by_kind

__all__ = [
    "KNOWN_SCHEMAS",
    "LATEST_SCHEMAS",
    "MAGIC",
    "WRITTEN_SCHEMAS",
    "WRITTEN_WHEN_SET",
    "Codec",
    "Decoded",
    "EncodeError",
    "Kind",
    "WriterPlan",
    "decode",
    "encode_capture",
    "encode_event",
    "fingerprint",
    "normalize_capture",
    "pin_json_text",
    "writer_plan",
]

Kind = Literal["capture", "flag", "claim_check"]

WRITTEN_WHEN_SET: Mapping[str, frozenset[str]] = MappingProxyType({"capture": frozenset({"pactVersion"})})
"""Per kind, top-level fields written only by a value that sets one of them. When the latest schema of
the kind adds exactly (some of) these fields to the version before it, a value leaving them null is
written with that version: capture/v4 added ``pactVersion``, and a capture judged under no pact is
still capture/v3, byte for byte (the TypeScript SDK's vectors, readers that know only v3)."""

MAGIC = b"\xc3\x01"
_HEADER_LEN = len(MAGIC) + 8


class EncodeError(SerializationError):
    """A value could not be encoded; ``path`` names the offending field when it is known."""

    def __init__(self, message: str, *, path: str = "") -> None:
        self.path = path
        super().__init__(f"{path}: {message}" if path else message)


@dataclass(frozen=True, slots=True)
class Decoded:
    """One decoded message: its kind, the writer schema's name, and the value in JSON form."""

    kind: Kind
    schema: str
    value: dict[str, Any]


# --- JSON text of content ------------------------------------------------------------------------

_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_loads = json.JSONDecoder().decode
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


def _not_json(value: object) -> object:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# What _encoder.encode does, without building a C encoder per call (a third of a small encode);
# same bytes: the same C encoder with the same options (no circular-reference bookkeeping).
_c_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)
_c_encode_basestring: Any = getattr(json.encoder, "c_encode_basestring", None)
if _c_make_encoder is not None and _c_encode_basestring is not None:  # CPython
    _C_DUMPS = _c_make_encoder(None, _not_json, _c_encode_basestring, None, ":", ",", False, False, False)

    def _dumps(value: Any) -> str:
        return "".join(_C_DUMPS(value, 0))

else:  # pragma: no cover - other interpreters

    def _dumps(value: Any) -> str:
        return _encoder.encode(value)


# JSON text of values the producer SDK owns and never mutates (an agent's tool schema), by identity.
_PINNED: dict[int, tuple[Any, str]] = {}
_MAX_PINNED = 64


def pin_json_text(value: Any) -> str:
    """Remember the JSON text of ``value`` so encoding it again (same object) skips serializing.

    Only for values nobody mutates afterwards (the recorder pins its own snapshot of a
    configuration's tool schema); a pinned value is kept alive, so its identity cannot be reused.
    """
    text = _dumps(value)
    if len(_PINNED) >= _MAX_PINNED:
        with contextlib.suppress(KeyError, RuntimeError, StopIteration):  # a racing thread
            del _PINNED[next(iter(_PINNED))]
    _PINNED[id(value)] = (value, text)
    return text


def _json_text(value: Any) -> str | None:
    if value is None:
        return None
    pinned = _PINNED.get(id(value))
    if pinned is not None and pinned[0] is value:
        return pinned[1]
    return _dumps(value)


def _json_value(text: str | None) -> Any:
    return None if text is None else _loads(text)


# samplingParameters: known keys get typed slots when the value fits the slot exactly.
def _fits_number(value: Any) -> bool:
    kind = type(value)
    return value is None or kind is float or (kind is int and _LONG_MIN <= value <= _LONG_MAX)


def _fits_long(value: Any) -> bool:
    return value is None or (type(value) is int and _LONG_MIN <= value <= _LONG_MAX)


def _fits_strings(value: Any) -> bool:
    return value is None or (type(value) is list and all(type(item) is str for item in value))


_SAMPLING_SLOTS: dict[str, Callable[[Any], bool]] = {
    "temperature": _fits_number,
    "top_p": _fits_number,
    "max_tokens": _fits_long,
    "stop": _fits_strings,
    "seed": _fits_long,
    "presence_penalty": _fits_number,
    "frequency_penalty": _fits_number,
}


def _sampling_to_avro(params: Mapping[str, Any]) -> dict[str, Any]:
    record: dict[str, Any] = {"presentKeys": list(params)}
    other: dict[str, Any] | None = None
    for key, value in params.items():
        fits = _SAMPLING_SLOTS.get(key)
        if fits is not None and fits(value):
            record[key] = value
        else:
            if other is None:
                other = {}
            other[key] = value
    record["otherParametersJson"] = None if other is None else _dumps(other)
    return record


def _sampling_from_avro(record: dict[str, Any]) -> dict[str, Any]:
    other_text = record["otherParametersJson"]
    if other_text is None:
        return {key: record[key] for key in record["presentKeys"]}
    other = _loads(other_text)
    return {key: other[key] if key in other else record[key] for key in record["presentKeys"]}


# --- capture <-> Avro datum ------------------------------------------------------------------------


def _exact(value: Any, kind: type) -> None:
    # fastavro coerces non-union booleans and longs (1.5 -> 1, "no" -> True); refuse instead.
    if type(value) is not kind:
        raise TypeError(f"expected {kind.__name__}, got {type(value).__name__}")


def _capture_to_avro(capture: Mapping[str, Any]) -> dict[str, Any]:
    datum = dict(capture)
    _exact(capture["consequential"]["flagged"], bool)
    _exact(capture["replayPolicy"]["piiRedacted"], bool)
    for entry in capture["memoryState"]["workingSetEntries"]:
        _exact(entry["contextPosition"], int)
    rendered = capture.get("renderedContext")
    for span in () if rendered is None else rendered["spans"]:
        _exact(span["start"], int)
        _exact(span["end"], int)

    source = capture["input"]
    request = dict(source)
    request["requestPayload"] = _json_text(source.get("requestPayload"))
    datum["input"] = request

    source = capture["agentConfiguration"]
    config = dict(source)
    config["toolSchemaJson"] = _json_text(source.get("toolSchemaJson"))
    config["samplingParameters"] = _sampling_to_avro(source["samplingParameters"])
    datum["agentConfiguration"] = config

    source = capture["executionTrace"]
    trace = dict(source)
    calls = []
    for call in source["toolCalls"]:
        _exact(call["sequence"], int)
        call = dict(call)
        call["input"] = _json_text(call.get("input"))
        call["output"] = _json_text(call.get("output"))
        calls.append(call)
    trace["toolCalls"] = calls
    datum["executionTrace"] = trace

    source = capture["externalState"]
    externals = []
    for external in source["observableExternals"]:
        external = dict(external)
        external["capturedValue"] = _json_text(external.get("capturedValue"))
        externals.append(external)
    state = dict(source)
    state["observableExternals"] = externals
    datum["externalState"] = state
    return datum


def _reader_order(value: Any, schema: Any, named: dict[str, Any]) -> Any:
    """``value`` with every record's keys in the reader schema's field order.

    fastavro appends the fields an older writer lacked (their defaults) after the others; the JSON
    form's order is the schema's, so a capture read from an older version is put back in order.
    """
    if isinstance(schema, str):
        schema = named.get(schema, schema)
    if isinstance(schema, list):
        for branch in schema:
            resolved = named.get(branch, branch) if isinstance(branch, str) else branch
            kind = resolved.get("type") if isinstance(resolved, dict) else resolved
            if (kind == "record" and type(value) is dict) or (kind == "array" and type(value) is list):
                return _reader_order(value, resolved, named)
        return value
    if not isinstance(schema, dict):
        return value
    kind = schema.get("type")
    if kind == "record" and type(value) is dict:
        named[schema["name"]] = schema
        return {
            field["name"]: _reader_order(value[field["name"]], field["type"], named)
            for field in schema["fields"]
            if field["name"] in value
        }
    if kind == "array" and type(value) is list:
        return [_reader_order(item, schema["items"], named) for item in value]
    return value


def _capture_from_avro(datum: dict[str, Any]) -> dict[str, Any]:
    # The datum was just built by fastavro in the reader schema's field order (put back in that
    # order when an older writer lacked fields), which is the JSON form's order; it is ours to
    # patch in place.
    request = datum["input"]
    request["requestPayload"] = _json_value(request["requestPayload"])
    config = datum["agentConfiguration"]
    config["toolSchemaJson"] = _json_value(config["toolSchemaJson"])
    config["samplingParameters"] = _sampling_from_avro(config["samplingParameters"])
    for call in datum["executionTrace"]["toolCalls"]:
        call["input"] = _json_value(call["input"])
        call["output"] = _json_value(call["output"])
    for external in datum["externalState"]["observableExternals"]:
        external["capturedValue"] = _json_value(external["capturedValue"])
    return datum


def _flag_to_avro(value: Mapping[str, Any]) -> Mapping[str, Any]:
    _exact(value["failure"], bool)
    return value


def _claim_check_to_avro(value: Mapping[str, Any]) -> Mapping[str, Any]:
    _exact(value["size"], int)
    _exact(value["consequential"], bool)
    return value


def _flag_from_avro(datum: dict[str, Any]) -> dict[str, Any]:
    if datum.get("signature") is None:
        datum.pop("signature", None)
    return datum


def _identity(datum: dict[str, Any]) -> dict[str, Any]:
    return datum


# The compiled writers apply the same conversions field by field, without copying dicts.
_CONVERTERS: dict[str, dict[tuple[str, str], Callable[[Any], Any]]] = {
    "capture": {
        ("Input", "requestPayload"): _json_text,
        ("AgentConfiguration", "toolSchemaJson"): _json_text,
        ("AgentConfiguration", "samplingParameters"): _sampling_to_avro,
        ("ToolCall", "input"): _json_text,
        ("ToolCall", "output"): _json_text,
        ("ObservableExternal", "capturedValue"): _json_text,
    },
}

_TO_AVRO: dict[str, Callable[[Mapping[str, Any]], Mapping[str, Any]]] = {
    "capture": _capture_to_avro,
    "flag": _flag_to_avro,
    "claim_check": _claim_check_to_avro,
}
_FROM_AVRO: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "capture": _capture_from_avro,
    "flag": _flag_from_avro,
    "claim_check": _identity,
}


# --- public API ----------------------------------------------------------------------------------


class Codec:
    """Encoder/decoder over one set of schemas (the module functions use those in ``schemas/``).

    Encoding uses a writer compiled from the latest schema of each kind (see
    :mod:`schemas._compiled_writer`; same bytes as fastavro, 2-3x faster); ``compiled=False``, or
    a schema the compiler cannot handle, uses ``fastavro.schemaless_writer`` on a converted
    datum. Decoding always uses ``fastavro.schemaless_reader`` (it does schema resolution).
    Tests build a Codec over a temporary directory to exercise future versions.
    """

    def __init__(self, schemas: Mapping[str, SchemaInfo], *, compiled: bool = True) -> None:
        self.known: Mapping[str, SchemaInfo] = MappingProxyType(dict(schemas))
        self.latest: Mapping[str, SchemaInfo] = MappingProxyType(latest_by_kind(schemas))
        self.written: Mapping[str, SchemaInfo] = MappingProxyType(
            {kind: _written_by_default(schemas, info) for kind, info in self.latest.items()}
        )
        """The schema a value of each kind is written with unless it sets a :data:`WRITTEN_WHEN_SET` field."""
        self._when_set = {
            kind: tuple(WRITTEN_WHEN_SET[kind])
            for kind, info in self.latest.items()
            if self.written[kind] is not info
        }
        self._by_fingerprint = {info.fingerprint: info for info in schemas.values()}
        self._writers: dict[str, tuple[bytes, SchemaInfo, Writer | None]] = {}
        self._full_writers: dict[str, tuple[bytes, SchemaInfo, Writer | None]] = {}
        for kind, info in self.latest.items():
            self._full_writers[kind] = (MAGIC + info.fingerprint, info, self._compile(kind, info, compiled))
            base = self.written[kind]
            self._writers[kind] = (
                self._full_writers[kind]
                if base is info
                else (MAGIC + base.fingerprint, base, self._compile(kind, base, compiled))
            )

    @staticmethod
    def _compile(kind: str, info: SchemaInfo, compiled: bool) -> Writer | None:
        if not compiled or kind not in _TO_AVRO:
            return None
        with contextlib.suppress(UnsupportedSchema):  # fastavro handles it, only slower
            return compile_writer(info.parsed, converters=_CONVERTERS.get(kind))
        return None

    def encode(self, kind: str, value: Mapping[str, Any]) -> bytes:
        if kind not in self._writers:
            raise EncodeError(f"unknown kind {kind!r}; known: {sorted(self._writers)}")
        try:
            header, info, writer = self._choose(kind, value)
            if kind in self._when_set and info is self.written[kind]:
                value = self._without_null_when_set(kind, value)
            if writer is not None:
                out = bytearray(header)
                writer(value, out)
                return bytes(out)
            buffer = io.BytesIO()
            buffer.write(header)
            schemaless_writer(buffer, info.parsed, _TO_AVRO[kind](value), strict_allow_default=True)
            return buffer.getvalue()
        except EncodeError:
            raise
        except Exception as exc:  # json and the writers raise a zoo of types; say where instead
            raise _explain(kind, value, exc) from exc

    def _choose(self, kind: str, value: Mapping[str, Any]) -> tuple[bytes, SchemaInfo, Writer | None]:
        when_set = self._when_set.get(kind)
        if when_set is not None and any(value.get(name) is not None for name in when_set):
            return self._full_writers[kind]
        return self._writers[kind]

    def _without_null_when_set(self, kind: str, value: Mapping[str, Any]) -> Mapping[str, Any]:
        when_set = self._when_set[kind]
        if any(name in value for name in when_set):  # present but null: the older schema has no slot
            return {key: item for key, item in value.items() if key not in when_set}
        return value

    def decode(self, data: bytes | bytearray | memoryview) -> Decoded:
        if not isinstance(data, bytes):
            data = bytes(data)
        if len(data) < _HEADER_LEN:
            raise DecodeError(
                f"truncated message: {len(data)} bytes, a single-object message has at least {_HEADER_LEN}"
            )
        if data[:2] != MAGIC:
            raise DecodeError(f"bad magic {data[:2].hex()} (expected c301): not Avro single-object encoding")
        writer = self._by_fingerprint.get(data[2:_HEADER_LEN])
        if writer is None:
            known = ", ".join(f"{name}={info.fingerprint.hex()}" for name, info in self.known.items())
            raise UnknownFingerprint(
                f"unknown schema fingerprint {data[2:_HEADER_LEN].hex()}: "
                f"no .avsc under schemas/ has it (known: {known})"
            )
        reader = self.latest[writer.kind]
        if writer is self.written[writer.kind]:
            # the latest adds only WRITTEN_WHEN_SET fields, left out when null: read it as written,
            # with no schema resolution (the hot path, as before the latest existed)
            reader = writer
        body = io.BytesIO(data)
        body.seek(_HEADER_LEN)
        try:
            datum = schemaless_reader(body, writer.parsed, None if reader is writer else reader.parsed)
        except EOFError as exc:
            raise DecodeError(f"truncated {writer.name} body: {exc or 'unexpected end of data'}") from exc
        except Exception as exc:  # fastavro raises many types on garbage; the reason is in the message
            raise DecodeError(f"invalid {writer.name} body: {type(exc).__name__}: {exc}") from exc
        if body.tell() != len(data):
            raise DecodeError(f"{len(data) - body.tell()} trailing bytes after the {writer.name} body")
        try:
            if reader is not writer:
                datum = _reader_order(datum, reader.parsed, {})
            value = _FROM_AVRO.get(writer.kind, _identity)(cast(dict[str, Any], datum))
            for name in self._when_set.get(writer.kind, ()):
                if name in value and value[name] is None:
                    del value[name]
        except Exception as exc:
            raise DecodeError(f"invalid {writer.name} content: {type(exc).__name__}: {exc}") from exc
        return Decoded(kind=cast(Kind, writer.kind), schema=writer.name, value=value)


def _written_by_default(schemas: Mapping[str, SchemaInfo], latest: SchemaInfo) -> SchemaInfo:
    """The version before ``latest`` when ``latest`` only adds :data:`WRITTEN_WHEN_SET` fields to it
    at the top level, else ``latest`` itself."""
    optional = WRITTEN_WHEN_SET.get(latest.kind)
    previous = next(
        (
            info
            for info in schemas.values()
            if info.kind == latest.kind and info.version == latest.version - 1
        ),
        None,
    )
    if not optional or previous is None:
        return latest
    names = [field["name"] for field in latest.raw["fields"]]
    before = [field["name"] for field in previous.raw["fields"]]
    added = [name for name in names if name not in before]
    if added and set(added) <= optional and [name for name in names if name in before] == before:
        return previous
    return latest


def _explain(kind: str, value: Any, exc: Exception) -> EncodeError:
    """Turn an encoding failure into an EncodeError naming the field, using the models."""
    from schemas.models import validate_json  # the slow path only; keeps import light

    try:
        validate_json(kind, value)
    except ContractError as contract:
        message = str(contract).removeprefix(f"{contract.path}: ")
        error = EncodeError(f"{message} ({type(exc).__name__}: {exc})", path=contract.path)
        error.__cause__ = contract
        return error
    except Exception:  # the diagnosis itself must never hide the original failure
        pass
    return EncodeError(f"cannot encode {kind}: {type(exc).__name__}: {exc}")


_DEFAULT = Codec(discover())

KNOWN_SCHEMAS: Mapping[str, SchemaInfo] = _DEFAULT.known
"""Every schema in ``schemas/`` by name (``capture/v1``, ``flag/v1``, ``claim_check/v1``, ...)."""

LATEST_SCHEMAS: Mapping[str, SchemaInfo] = _DEFAULT.latest
"""The schema each kind is written with (and read into), by kind."""


WRITTEN_SCHEMAS: Mapping[str, SchemaInfo] = _DEFAULT.written
"""The schema each kind is written with unless a value sets a :data:`WRITTEN_WHEN_SET` field."""


def fingerprint(kind: str) -> bytes:
    """The 8-byte fingerprint written for ``kind`` (:data:`WRITTEN_SCHEMAS`)."""
    try:
        return WRITTEN_SCHEMAS[kind].fingerprint
    except KeyError:
        raise KeyError(f"unknown kind {kind!r}; known: {sorted(LATEST_SCHEMAS)}") from None


def encode_capture(capture_json: Mapping[str, Any]) -> bytes:
    """Single-object Avro bytes of a capture in JSON form (latest capture schema, or the one before
    when the capture sets no :data:`WRITTEN_WHEN_SET` field).

    Raises :class:`EncodeError` (a SerializationError) naming the field when the capture cannot
    be stored losslessly (missing required field, wrong type, unknown key, NaN, ...).
    """
    return _DEFAULT.encode("capture", capture_json)


def encode_event(kind: str, value: Mapping[str, Any]) -> bytes:
    """Single-object Avro bytes of an event (``flag``, ``claim_check``; ``capture`` also works)."""
    return _DEFAULT.encode(kind, value)


@dataclass(frozen=True, slots=True)
class WriterPlan:
    """What a writer outside this module needs to write exactly :func:`encode_event`'s bytes.

    The native core's writer (``producers/avro.py``) is built from it: the header, the latest
    schema as fastavro parsed it, the ``(record, field)`` pairs written as JSON text (the text
    :func:`pin_json_text` pinned for an object, else this module's JSON text), the other
    conversions (functions of this module, to call as they are) and the pinned texts themselves.
    """

    header: bytes
    name: str
    schema: Any
    json_fields: tuple[tuple[str, str], ...]
    converters: Mapping[tuple[str, str], Callable[[Any], Any]]
    pinned: dict[int, tuple[Any, str]]


def writer_plan(kind: str, *, latest: bool = False) -> WriterPlan:
    """The :class:`WriterPlan` of ``kind``: the schema it is written with by default
    (:data:`WRITTEN_SCHEMAS`), or with ``latest`` its latest schema (for values that set a
    :data:`WRITTEN_WHEN_SET` field)."""
    converters = _CONVERTERS.get(kind, {})
    info = (LATEST_SCHEMAS if latest else WRITTEN_SCHEMAS)[kind]
    return WriterPlan(
        header=MAGIC + info.fingerprint,
        name=info.name,
        schema=info.parsed,
        json_fields=tuple(key for key, convert in converters.items() if convert is _json_text),
        converters=MappingProxyType({k: f for k, f in converters.items() if f is not _json_text}),
        pinned=_PINNED,
    )


def decode(data: bytes | bytearray | memoryview) -> Decoded:
    """Decode single-object bytes of any known kind and version into the latest JSON form.

    Raises :class:`UnknownFingerprint` when no ``.avsc`` under ``schemas/`` has the writer's
    fingerprint, :class:`DecodeError` for anything else that is not a whole, valid message.
    """
    return _DEFAULT.decode(data)


def normalize_capture(capture_json: Mapping[str, Any]) -> dict[str, Any]:
    """The full JSON form of a capture, exactly as a consumer will decode it.

    Sign this form: absent optional fields become ``null`` on the way through Avro.
    """
    return decode(encode_capture(capture_json)).value

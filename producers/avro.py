"""Captures to and from Avro bytes: the native core's writer and reader when it loads, else :mod:`schemas.codec`.

:func:`encode_capture` returns exactly :func:`schemas.codec.encode_capture`'s bytes (proven in
``tests/producers/native/test_native_avro.py``). The core declines (returns None) whatever it does
not write exactly as the codec does — a subclass, an unknown or missing key, an int out of range,
a lone surrogate, JSON deeper than it walks — and the codec then writes it, or raises its
:class:`~schemas.codec.EncodeError` naming the field. The codec sits below ``producers/`` and
cannot ask for the core itself, so the producer's pipeline asks here.

:func:`decode` returns exactly :func:`schemas.codec.decode`'s value (proven in
``tests/producers/native/test_native_avro_decode.py``) for captures written with the schema
captures are written with by default (:data:`~schemas.codec.WRITTEN_SCHEMAS`) or the latest one; the core declines (None) bytes it does not read exactly as the codec does — truncated,
trailing or invalid bytes, JSON text with ``NaN``/``Infinity``, an int beyond 64 bits, a lone
surrogate — and every other kind or schema version goes to the codec, which resolves older
writers and raises its own errors. Ingest decodes through here.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from functools import partial
from types import ModuleType
from typing import Any

from producers import native
from schemas import codec

__all__ = ["decode", "encode_capture"]

_log = logging.getLogger("blackbox.native")
_HEADER_LEN = len(codec.MAGIC) + 8


def _new_writer(core: ModuleType, *, latest: bool = False) -> tuple[Any, bytes]:
    """The core's capture writer (None when the schema needs the codec) and the header it writes:
    the schema captures are written with by default, or with ``latest`` the one for a capture that
    sets a :data:`~schemas.codec.WRITTEN_WHEN_SET` field (``pactVersion``)."""
    plan = codec.writer_plan("capture", latest=latest)
    writer: Any = None
    try:
        writer = core.AvroWriter(plan.schema, list(plan.json_fields), dict(plan.converters), plan.pinned)
    except ValueError as exc:  # a schema construct it does not handle: the codec writes it all
        _log.warning("blackbox: the native core does not write captures (%s); the codec does", exc)
    return writer, plan.header


_writers: native.PerCore[tuple[Any, bytes]] = native.PerCore(_new_writer)
_latest_writers: native.PerCore[tuple[Any, bytes]] = native.PerCore(partial(_new_writer, latest=True))
_WHEN_SET = tuple(codec.WRITTEN_WHEN_SET.get("capture", ()))


def encode_capture(capture: Mapping[str, Any]) -> bytes:
    """Single-object Avro bytes of ``capture`` (see :func:`schemas.codec.encode_capture`)."""
    core = native.core()
    if core is not None:
        writers = _writers
        if isinstance(capture, Mapping) and any(capture.get(name) is not None for name in _WHEN_SET):
            writers = _latest_writers
        writer, header = writers(core)
        if writer is not None:
            data: bytes | None = writer.encode(capture, header)
            if data is not None:
                return data
    return codec.encode_capture(capture)


def _new_reader(core: ModuleType, *, latest: bool = False) -> tuple[Any, bytes]:
    """The core's capture reader (None when the schema needs the codec) and the header it reads:
    the schema captures are written with by default, or with ``latest`` the latest one."""
    plan = codec.writer_plan("capture", latest=latest)
    # What codec._capture_from_avro does besides parsing the JSON-text fields.
    converters = {("AgentConfiguration", "samplingParameters"): codec._sampling_from_avro}
    reader: Any = None
    try:
        reader = core.AvroReader(plan.schema, list(plan.json_fields), converters)
    except (AttributeError, ValueError) as exc:  # an older core, or a construct it does not read
        _log.warning("blackbox: the native core does not read captures (%s); the codec does", exc)
    return reader, plan.header


_readers: native.PerCore[tuple[Any, bytes]] = native.PerCore(_new_reader)
_latest_readers: native.PerCore[tuple[Any, bytes]] = native.PerCore(partial(_new_reader, latest=True))


def decode(data: bytes | bytearray | memoryview) -> codec.Decoded:
    """Decode single-object bytes of any known kind and version (see :func:`schemas.codec.decode`)."""
    core = native.core()
    if core is not None and isinstance(data, bytes):
        for readers, schema in ((_readers, _CAPTURE_SCHEMA), (_latest_readers, _LATEST_SCHEMA)):
            reader, header = readers(core)
            if reader is not None and data.startswith(header):
                value: dict[str, Any] | None = reader.decode(data, _HEADER_LEN)
                if value is None:
                    break
                for name in _WHEN_SET:  # as the codec: a null one is left out
                    if name in value and value[name] is None:
                        del value[name]
                return codec.Decoded(kind="capture", schema=schema, value=value)
    return codec.decode(data)


_CAPTURE_SCHEMA = codec.writer_plan("capture").name
_LATEST_SCHEMA = codec.writer_plan("capture", latest=True).name

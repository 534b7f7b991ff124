"""The Avro bytes of a capture: the native core's writer when it loads, else :mod:`schemas.codec`.

:func:`encode_capture` returns exactly :func:`schemas.codec.encode_capture`'s bytes (proven in
``tests/producers/native/test_native_avro.py``). The core declines (returns None) whatever it does
not write exactly as the codec does — a subclass, an unknown or missing key, an int out of range,
a lone surrogate, JSON deeper than it walks — and the codec then writes it, or raises its
:class:`~schemas.codec.EncodeError` naming the field. The codec sits below ``producers/`` and
cannot ask for the core itself, so the producer's pipeline asks here.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from producers import native
from schemas import codec

__all__ = ["encode_capture"]

_log = logging.getLogger("blackbox.native")
_lock = threading.Lock()
# (the core it was built by, its writer or None when the schema needs the codec, the header)
_built: tuple[ModuleType, Any, bytes] | None = None


def encode_capture(capture: Mapping[str, Any]) -> bytes:
    """Single-object Avro bytes of ``capture`` (see :func:`schemas.codec.encode_capture`)."""
    core = native.core()
    if core is not None:
        built = _built if _built is not None and _built[0] is core else _build(core)
        if built[1] is not None:
            data: bytes | None = built[1].encode(capture, built[2])
            if data is not None:
                return data
    return codec.encode_capture(capture)


def _build(core: ModuleType) -> tuple[ModuleType, Any, bytes]:
    global _built
    with _lock:
        if _built is not None and _built[0] is core:
            return _built
        plan = codec.writer_plan("capture")
        writer: Any = None
        try:
            writer = core.AvroWriter(plan.schema, list(plan.json_fields), dict(plan.converters), plan.pinned)
        except ValueError as exc:  # a schema construct it does not handle: the codec writes it all
            _log.warning("blackbox: the native core does not write captures (%s); the codec does", exc)
        _built = (core, writer, plan.header)
        return _built

"""The replay/v1 capture contract: Avro schemas, the pydantic models mirroring them, the codec.

Public names are re-exported lazily, so ``import schemas.errors`` stays cheap (no fastavro or
pydantic import, no schema parsing) for code that only needs the exceptions.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from schemas.codec import (
        KNOWN_SCHEMAS,
        LATEST_SCHEMAS,
        Decoded,
        EncodeError,
        decode,
        encode_capture,
        encode_event,
        fingerprint,
        normalize_capture,
    )
    from schemas.models import Capture, ClaimCheck, FlagEvent, validate_json

__all__ = [
    "KNOWN_SCHEMAS",
    "LATEST_SCHEMAS",
    "Capture",
    "ClaimCheck",
    "Decoded",
    "EncodeError",
    "FlagEvent",
    "decode",
    "encode_capture",
    "encode_event",
    "fingerprint",
    "normalize_capture",
    "validate_json",
]

_HOMES = {
    "KNOWN_SCHEMAS": "schemas.codec",
    "LATEST_SCHEMAS": "schemas.codec",
    "Decoded": "schemas.codec",
    "EncodeError": "schemas.codec",
    "decode": "schemas.codec",
    "encode_capture": "schemas.codec",
    "encode_event": "schemas.codec",
    "fingerprint": "schemas.codec",
    "normalize_capture": "schemas.codec",
    "Capture": "schemas.models",
    "ClaimCheck": "schemas.models",
    "FlagEvent": "schemas.models",
    "validate_json": "schemas.models",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'schemas' has no attribute {name!r}")
    return getattr(import_module(home), name)

"""DSSE v1 pre-authentication encoding and the JSON envelope (secure-systems-lab/dsse, protocol.md).

``PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body`` where ``LEN`` is the ASCII
decimal byte length with no leading zeros. The signature is over the PAE, never over the bare
payload, so a signature made for one payload type can never be replayed as another.

A capture carries its signature inline (``signature.signatureBytes``, the payload being the
manifest, rebuilt by the verifier). Events that travel alone (flag events) use the standard
envelope ``{"payload", "payloadType", "signatures": [{"keyid", "sig"}]}``; ``keyid`` there is a
hint for choosing the key, never trusted on its own.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from schemas.errors import SignatureInvalid


def pae(payload_type: str, payload: bytes) -> bytes:
    """The DSSE v1 pre-authentication encoding of ``payload`` under ``payload_type``."""
    type_bytes = payload_type.encode("utf-8")
    return b"DSSEv1 %d %b %d %b" % (len(type_bytes), type_bytes, len(payload), payload)


def b64encode(data: bytes) -> str:
    """Standard base64 with padding (what blackbox writes)."""
    return base64.b64encode(data).decode("ascii")


def b64decode(text: str) -> bytes:
    """Standard or URL-safe base64 (DSSE verifiers must accept both); ``ValueError`` otherwise."""
    if not isinstance(text, str):
        raise ValueError(f"expected base64 text, got {type(text).__name__}")
    try:
        if "-" in text or "_" in text:
            return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"not base64: {exc}") from exc


def make_envelope(payload: bytes, payload_type: str, signature: bytes, keyid: str) -> dict[str, Any]:
    """The DSSE JSON envelope for one signature."""
    return {
        "payload": b64encode(payload),
        "payloadType": payload_type,
        "signatures": [{"keyid": keyid, "sig": b64encode(signature)}],
    }


def open_envelope(envelope: Mapping[str, Any]) -> tuple[bytes, str, list[tuple[str | None, bytes]]]:
    """``(payload, payloadType, [(keyid hint, signature), ...])``; :class:`SignatureInvalid` if malformed."""
    try:
        payload = b64decode(envelope["payload"])
        payload_type = envelope["payloadType"]
        if not isinstance(payload_type, str):
            raise ValueError("payloadType must be a string")
        signatures = [(entry.get("keyid"), b64decode(entry["sig"])) for entry in envelope["signatures"]]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise SignatureInvalid(f"not a DSSE envelope: {exc}", part="envelope") from exc
    if not signatures:
        raise SignatureInvalid("the envelope carries no signature", part="envelope")
    return payload, payload_type, signatures

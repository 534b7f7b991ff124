"""The sealed original: the redacted parts' original content, encrypted under the decision's data key.

Plaintext: the JSON ``{"salt": <base64 of 32 random bytes>, "parts": {<part path>: <original>},
"spans": {<part path>: <original spans>}, "ids": {<identifier path>: <raw id>}}`` (text parts as
strings, JSON parts as their values; UTF-8, no ASCII escaping, keys in their order, so every original
comes back exactly; ``spans``: the rendered context's and model calls' spans as they framed the
original text; ``ids``: the identifiers of people the capture signs only as commitments,
:mod:`producers.privacy.identifiers`, absent in captures sealed before them). AES-256-GCM with a random 96-bit nonce and the decision id as
associated data; stored as ``base64:`` + base64(nonce | ciphertext and tag).

The salt keys the *original hashes* the manifest signs (``privacy.originalHashes``):
``hmac-sha256:`` + HMAC-SHA256(salt, the part's ordinary ``sha256:`` hash). A reader who may open the
original checks each one; nobody else can test a guessed original (a short tool input holding an
e-mail address) against them, and after erasure nobody ever can.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from schemas.errors import BlackboxError

__all__ = [
    "CIPHER",
    "KEYED_HASH_PREFIX",
    "OriginalParts",
    "SealedOriginalInvalid",
    "keyed_hash",
    "new_salt",
    "open_ids",
    "open_original",
    "seal_ids",
    "seal_original",
]

CIPHER = "AES-256-GCM"
KEYED_HASH_PREFIX = "hmac-sha256:"
_PREFIX = "base64:"
_NONCE = 12


class SealedOriginalInvalid(BlackboxError):
    """The sealed original does not open with its data key (altered, or another decision's)."""


@dataclass(frozen=True, slots=True)
class OriginalParts:
    salt: bytes
    parts: dict[str, Any]
    spans: dict[str, Any]
    ids: dict[str, str] = field(default_factory=dict)


def new_salt() -> bytes:
    return os.urandom(32)


def keyed_hash(salt: bytes, part_hash: str) -> str:
    return KEYED_HASH_PREFIX + hmac.new(salt, part_hash.encode("ascii"), hashlib.sha256).hexdigest()


def seal_original(
    parts: Mapping[str, Any],
    *,
    spans: Mapping[str, Any],
    salt: bytes,
    data_key: bytes,
    decision_id: str,
    ids: Mapping[str, str] | None = None,
) -> str:
    value: dict[str, Any] = {
        "salt": base64.b64encode(salt).decode("ascii"),
        "parts": dict(parts),
        "spans": dict(spans),
    }
    if ids:
        value["ids"] = dict(ids)
    plaintext = json.dumps(
        value,
        ensure_ascii=False,
        separators=(",", ":"),
        allow_nan=False,
    ).encode("utf-8")
    nonce = os.urandom(_NONCE)
    sealed = nonce + AESGCM(data_key).encrypt(nonce, plaintext, decision_id.encode("utf-8"))
    return _PREFIX + base64.b64encode(sealed).decode("ascii")


def open_original(sealed: str, *, data_key: bytes, decision_id: str) -> OriginalParts:
    if not sealed.startswith(_PREFIX):
        raise SealedOriginalInvalid(f"sealedOriginal does not start with {_PREFIX!r}")
    try:
        raw = base64.b64decode(sealed[len(_PREFIX) :], validate=True)
        plaintext = AESGCM(data_key).decrypt(raw[:_NONCE], raw[_NONCE:], decision_id.encode("utf-8"))
        value = json.loads(plaintext)
        return OriginalParts(
            salt=base64.b64decode(value["salt"]),
            parts=dict(value["parts"]),
            spans=dict(value.get("spans") or {}),
            ids={str(k): str(v) for k, v in (value.get("ids") or {}).items()},
        )
    except (binascii.Error, InvalidTag, ValueError, KeyError, TypeError) as exc:
        raise SealedOriginalInvalid(
            f"the sealed original of {decision_id} does not open with its data key ({type(exc).__name__})"
        ) from exc


_IDS_AAD = b"\x1fsealed ids"


def seal_ids(ids: Mapping[str, str], *, salt: bytes, data_key: bytes, decision_id: str) -> bytes:
    """The salt and raw identifiers, sealed under the data key for the key record (nonce | ciphertext)."""
    plaintext = json.dumps(
        {"salt": base64.b64encode(salt).decode("ascii"), "ids": dict(ids)},
        ensure_ascii=False,
        separators=(",", ":"),
    ).encode("utf-8")
    nonce = os.urandom(_NONCE)
    return nonce + AESGCM(data_key).encrypt(nonce, plaintext, decision_id.encode("utf-8") + _IDS_AAD)


def open_ids(sealed: bytes, *, data_key: bytes, decision_id: str) -> tuple[bytes, dict[str, str]]:
    """(salt, raw identifiers by path) from :func:`seal_ids`; :class:`SealedOriginalInvalid` if it does not open."""
    try:
        aad = decision_id.encode("utf-8") + _IDS_AAD
        value = json.loads(AESGCM(data_key).decrypt(sealed[:_NONCE], sealed[_NONCE:], aad))
        return base64.b64decode(value["salt"]), {str(k): str(v) for k, v in value["ids"].items()}
    except (binascii.Error, InvalidTag, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SealedOriginalInvalid(
            f"the sealed identifiers of {decision_id} do not open with its data key ({type(exc).__name__})"
        ) from exc

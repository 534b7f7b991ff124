"""Identifiers of people, signed only as salted commitments (DESIGN decision 16).

``input.originUserId`` and ``input.originSessionId`` name a person (a counterparty's subject is the
first). When the producer keeps originals (a vault), each non-empty one is replaced, before the
capture is sealed, by its *commitment*: ``hmac-sha256:`` + HMAC-SHA256(salt, the UTF-8 id), under the
decision's salt (the one that keys ``privacy.originalHashes``). The raw value travels only sealed
under the decision's data key: in the sealed original (``ids``, beside the salt) and in the key
record (``sealedIds``, :mod:`producers.privacy.keys`), which a structured-only or compacted capture,
whose sealed original is stripped with the content, still has. Erasure destroys the data key, so the
raw id is then gone from every copy at once, while the signed commitment still verifies; whoever
holds the raw id and the salt (revealed before the erasure) can still show which decision it was.

The index keeps looking people up by its own keyed hash of the raw id (ingest opens the sealed ids
with the vault: :mod:`consumers.privacy.identifiers`).

A capture without a vault keeps its raw ids: there would be nowhere to keep the value, and no key
to destroy. Captures sealed before this change hold raw ids and verify as they are.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "COMMITMENT_PREFIX",
    "IDENTIFIERS",
    "commit_identifiers",
    "commitment",
    "is_commitment",
    "raw_identifiers",
    "restore_identifiers",
]

IDENTIFIERS: tuple[tuple[str, str], ...] = (("input", "originUserId"), ("input", "originSessionId"))
"""Where a capture names a person, as (section, field); the path is ``section.field``."""

COMMITMENT_PREFIX = "hmac-sha256:"
_COMMITMENT = re.compile(r"hmac-sha256:[0-9a-f]{64}")


def commitment(salt: bytes, raw: str) -> str:
    """The signed form of one identifier: ``hmac-sha256:`` + hex HMAC-SHA256(salt, raw UTF-8)."""
    return COMMITMENT_PREFIX + hmac.new(salt, raw.encode("utf-8"), hashlib.sha256).hexdigest()


def is_commitment(value: object) -> bool:
    """Whether ``value`` has the form of a commitment (not a raw id)."""
    return isinstance(value, str) and _COMMITMENT.fullmatch(value) is not None


def raw_identifiers(capture: Mapping[str, Any]) -> dict[str, str]:
    """The raw (not yet committed) non-empty identifiers of ``capture``, by path."""
    found: dict[str, str] = {}
    for section, field in IDENTIFIERS:
        part = capture.get(section)
        value = part.get(field) if isinstance(part, Mapping) else None
        if isinstance(value, str) and value and not is_commitment(value):
            found[f"{section}.{field}"] = value
    return found


def commit_identifiers(capture: dict[str, Any], raw: Mapping[str, str], *, salt: bytes) -> None:
    """Replace each of ``raw`` (from :func:`raw_identifiers`) in ``capture`` by its commitment.

    The sections changed are copied first: a caller's dict is never mutated below the top level.
    """
    for path, value in raw.items():
        section, field = path.split(".", 1)
        part = dict(capture[section])
        part[field] = commitment(salt, value)
        capture[section] = part


def restore_identifiers(capture: dict[str, Any], raw: Mapping[str, str], *, salt: bytes) -> list[str]:
    """Put the raw identifiers back into ``capture`` where the commitment they open is; return the paths.

    An identifier whose commitment does not match (another salt, an edited capture) is not restored.
    """
    restored = []
    for path, value in raw.items():
        section, field = path.split(".", 1)
        part = capture.get(section)
        if isinstance(part, dict) and part.get(field) == commitment(salt, value):
            capture[section] = {**part, field: value}
            restored.append(path)
    return restored

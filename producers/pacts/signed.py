"""A pact version as a signed document: what it holds, how its id is made, how it is verified.

The document is a DSSE envelope (:data:`PAYLOAD_TYPE`) over the RFC 8785 record::

    {"kind": "pact-version", "version": "pv_…", "contentHash": "sha256:…", "parent": "pv_…" | "",
     "author": …, "reason": …, "createdAt": …, "agents": [GLOB, …], "document": "<the TOML text>"}

``version`` is ``pv_`` + the first 24 hex of sha256 over the canonical record without it, so the id
names the content, the parent, the author, the reason and the time; ``contentHash`` is sha256 of the
document's UTF-8 bytes. :func:`open_version` accepts a document only when a signature verifies under
a key of the trust store the reader holds (never a key the document names for itself), the record
hashes to its id and the document to its content hash; anything else is a :class:`PactVersionError`
naming what is wrong.

The same check serves the services (``consumers.pacts.versions`` stores and applies versions) and
an agent's runtime (:mod:`producers.pacts.source` reads the applied version from a file or a URL).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cryptography.exceptions import InvalidSignature

from producers.evidence.canonical import canonical_json
from producers.evidence.dsse import open_envelope, pae
from producers.evidence.events import sign_event
from producers.evidence.keys import Signer
from producers.evidence.trust import TrustStore, format_time, parse_time
from producers.pacts.book import PactBook, parse_pacts
from producers.pacts.expression import PactInvalid
from schemas.errors import BlackboxError

__all__ = [
    "PAYLOAD_TYPE",
    "PactVersion",
    "PactVersionError",
    "open_version",
    "sign_version",
    "version_id",
    "version_record",
]

PAYLOAD_TYPE = "application/vnd.blackbox.pact-version+json;version=v1"


class PactVersionError(BlackboxError):
    """A pact version cannot be proposed, found, verified or applied; the message says which and why."""


@dataclass(frozen=True, slots=True)
class PactVersion:
    """One pact set version, verified."""

    version: str
    content_hash: str
    parent: str
    author: str
    reason: str
    created_at: datetime
    document: str
    key_id: str
    book: PactBook

    def record(self) -> dict[str, Any]:
        """The signed record (what the envelope's payload holds)."""
        return version_record(
            document=self.document,
            parent=self.parent,
            author=self.author,
            reason=self.reason,
            created_at=self.created_at,
            agents=self.book.agents,
        ) | {"version": self.version}


def version_record(
    *, document: str, parent: str, author: str, reason: str, created_at: datetime, agents: tuple[str, ...]
) -> dict[str, Any]:
    """The record a version signs, without its ``version`` id (:func:`version_id` makes it)."""
    return {
        "kind": "pact-version",
        "contentHash": _content_hash(document),
        "parent": parent,
        "author": author,
        "reason": reason,
        "createdAt": format_time(created_at),
        "agents": list(agents),
        "document": document,
    }


def version_id(record: Mapping[str, Any]) -> str:
    """``pv_`` + 24 hex of sha256 over the canonical record without its ``version`` member."""
    unsigned = {k: v for k, v in record.items() if k != "version"}
    return "pv_" + hashlib.sha256(canonical_json(unsigned, path="pact")).hexdigest()[:24]


def sign_version(
    *,
    document: str,
    parent: str,
    author: str,
    reason: str,
    created_at: datetime,
    signer: Signer,
    source: str = "<pact>",
) -> tuple[PactVersion, bytes]:
    """Check ``document`` (every rule compiles), sign it as a new version: the version and the
    envelope's JSON bytes (what :func:`open_version` reads)."""
    book = parse_pacts(document, source=source)
    record = version_record(
        document=document,
        parent=parent,
        author=author,
        reason=reason,
        created_at=created_at,
        agents=book.agents,
    )
    record["version"] = version_id(record)
    envelope = sign_event(record, signer, payload_type=PAYLOAD_TYPE)
    version = PactVersion(
        version=record["version"],
        content_hash=record["contentHash"],
        parent=parent,
        author=author,
        reason=reason,
        created_at=parse_time(record["createdAt"]),
        document=document,
        key_id=signer.key_id,
        book=book,
    )
    return version, json.dumps(envelope, sort_keys=True).encode("utf-8")


def _content_hash(document: str) -> str:
    return "sha256:" + hashlib.sha256(document.encode("utf-8")).hexdigest()


def open_version(raw: bytes, trust: TrustStore, *, where: str, expect: str | None = None) -> PactVersion:
    """The version in ``raw`` (the envelope's JSON bytes), verified against ``trust``; ``expect``: the
    id it must have. Every rule is compiled (:class:`PactVersionError` naming the rule when one does
    not, or when the CEL engine is missing)."""
    try:
        envelope = json.loads(raw)
        payload, payload_type, signatures = open_envelope(envelope)
    except (ValueError, BlackboxError) as exc:
        raise PactVersionError(f"{where}: not a signed envelope: {exc}") from exc
    if payload_type != PAYLOAD_TYPE:
        raise PactVersionError(f"{where}: payloadType {payload_type!r} is not {PAYLOAD_TYPE!r}")
    try:
        record = json.loads(payload)
        if not isinstance(record, dict):
            raise TypeError(f"the payload is a JSON {type(record).__name__}, not an object")
        created_at = parse_time(record["createdAt"])
    except (ValueError, KeyError, TypeError) as exc:
        raise PactVersionError(f"{where}: the record is malformed: {exc}") from exc
    key_id = _verified_key(signatures, payload, trust, created_at, where)
    claimed = record.get("version")
    if not isinstance(claimed, str) or version_id(record) != claimed:
        raise PactVersionError(f"{where}: the record does not hash to its version id (altered)")
    if expect is not None and claimed != expect:
        raise PactVersionError(f"{where}: the document is version {claimed}, not {expect}")
    document = str(record.get("document", ""))
    if record.get("contentHash") != _content_hash(document):
        raise PactVersionError(f"{where}: the document does not match its content hash")
    try:
        book = parse_pacts(document, source=where)
    except PactInvalid as exc:
        raise PactVersionError(f"{where}: {exc}") from exc
    return PactVersion(
        version=claimed,
        content_hash=str(record["contentHash"]),
        parent=str(record.get("parent", "")),
        author=str(record.get("author", "")),
        reason=str(record.get("reason", "")),
        created_at=created_at,
        document=document,
        key_id=key_id,
        book=book,
    )


def _verified_key(
    signatures: list[tuple[str | None, bytes]],
    payload: bytes,
    trust: TrustStore,
    at: datetime,
    where: str,
) -> str:
    reasons: list[str] = []
    for key_id, signature in signatures:
        if not key_id:
            continue
        try:
            trust.check(key_id, at).verify(signature, pae(PAYLOAD_TYPE, payload))
        except InvalidSignature:
            reasons.append(f"{key_id}: the signature does not verify")
            continue
        except BlackboxError as exc:
            reasons.append(str(exc))
            continue
        return key_id
    raise PactVersionError(f"{where}: no trusted signature ({'; '.join(reasons) or 'none named a key'})")

"""Trusted time for checkpoints: an RFC 3161 timestamp over the signed checkpoint note.

The request's message imprint is ``sha256(note bytes)`` (the whole signed note, signatures
included), with a nonce; the response (``TimeStampResp``, DER) is stored beside the checkpoint. Built
and parsed with ``rfc3161-client``; sent with ``httpx`` as ``application/timestamp-query``.
:func:`check_timestamp` re-reads a stored response: granted, the imprint is this note's, and - given
the TSA's root certificates - its CMS signature and certificate chain verify.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import httpx
from cryptography import x509
from rfc3161_client import (
    HashAlgorithm,
    PKIStatus,
    TimestampRequestBuilder,
    TimeStampResponse,
    VerificationError,
    VerifierBuilder,
    decode_timestamp_response,
)

from schemas.errors import TransparencyLogError

__all__ = ["Stamp", "check_timestamp", "load_roots", "request_timestamp"]

CONTENT_TYPE = "application/timestamp-query"


@dataclass(frozen=True, slots=True)
class Stamp:
    """A checked timestamp: when the TSA says it saw the note, and whether its signature was checked."""

    time: datetime
    signature_checked: bool


def request_timestamp(url: str, note: bytes, *, timeout: float = 10.0) -> bytes:
    """The TSA's ``TimeStampResp`` (DER) for ``note``; :class:`TransparencyLogError` when it refuses
    or answers something else."""
    request = TimestampRequestBuilder().data(note).hash_algorithm(HashAlgorithm.SHA256).build()
    try:
        response = httpx.post(
            url, content=request.as_bytes(), headers={"Content-Type": CONTENT_TYPE}, timeout=timeout
        )
    except httpx.HTTPError as exc:
        raise TransparencyLogError(f"the TSA at {url} is unreachable: {exc}") from exc
    if response.status_code != 200:
        raise TransparencyLogError(f"the TSA at {url} answered HTTP {response.status_code}")
    body = response.content
    stamp = _decode(body)
    if PKIStatus(stamp.status) not in (PKIStatus.GRANTED, PKIStatus.GRANTED_WITH_MODS):
        raise TransparencyLogError(f"the TSA at {url} refused the request (status {stamp.status})")
    if stamp.tst_info.nonce != request.nonce:
        raise TransparencyLogError(f"the TSA at {url} answered another request (nonce mismatch)")
    if stamp.tst_info.message_imprint.message != hashlib.sha256(note).digest():
        raise TransparencyLogError(f"the TSA at {url} stamped other bytes than the checkpoint")
    return body


def load_roots(path: Path) -> list[x509.Certificate]:
    """The PEM certificates in ``path`` (``BLACKBOX_TLOG_TSA_ROOTS``)."""
    try:
        return x509.load_pem_x509_certificates(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise TransparencyLogError(f"cannot read TSA root certificates from {path}: {exc}") from exc


def check_timestamp(response: bytes, note: bytes, *, roots: list[x509.Certificate] | None = None) -> Stamp:
    """The time in a stored response for ``note``; :class:`TransparencyLogError` when it is not a
    granted timestamp of exactly these bytes or (with ``roots``) its signature does not verify."""
    stamp = _decode(response)
    if PKIStatus(stamp.status) != PKIStatus.GRANTED:
        raise TransparencyLogError(f"the timestamp is not granted (status {stamp.status})")
    if stamp.tst_info.message_imprint.message != hashlib.sha256(note).digest():
        raise TransparencyLogError("the timestamp is for other bytes than this checkpoint")
    checked = False
    if roots:
        builder = VerifierBuilder()
        for root in roots:
            builder = builder.add_root_certificate(root)
        try:
            builder.build().verify_message(stamp, note)
        except VerificationError as exc:
            raise TransparencyLogError(f"the timestamp's signature does not verify: {exc}") from exc
        checked = True
    gen_time = stamp.tst_info.gen_time
    if gen_time.tzinfo is None:
        gen_time = gen_time.replace(tzinfo=UTC)
    return Stamp(gen_time, checked)


def _decode(data: bytes) -> TimeStampResponse:
    try:
        return decode_timestamp_response(data)
    except ValueError as exc:
        raise TransparencyLogError(f"not an RFC 3161 TimeStampResp: {exc}") from exc

"""Verifying a capture: is it evidence, and if not, which part fails and why.

Checks, in this order (the first failure raises):

1. **Algorithms known** — ``signature.algorithm`` is ``ed25519`` and
   ``memoryState.contextSetAlgorithm`` is ``rfc6962-sha256``, else :class:`UnknownAlgorithm`
   (``part`` = that field). A hash field with another prefix than ``sha256:`` fails the same way
   when its part is checked.
2. **Key trusted** — ``publicKeyRef`` names a key id the trust store accepts for a signature made at
   ``capturedAt`` and checked at ``at`` (see :mod:`producers.evidence.trust`), else
   :class:`KeyNotTrusted` (``part="key"``).
3. **Manifest signature** — ed25519 over ``PAE(manifest payload type, manifest bytes)``, else
   :class:`SignatureInvalid` (``part="signature"``). Any changed manifest field fails here:
   ``agentId``, ``retentionDays``, any hash field — including a content part changed *together
   with* its hash field, because the hash field is part of the manifest.
   **Key bound to the agent** — then the signed ``agentId`` must be one the key's trust record
   allows, else :class:`KeyNotAuthorizedForAgent` (``part="agentId"``, naming the key and the
   agent): a trusted key cannot write evidence under another agent's id. Checked after the
   signature so that an ``agentId`` changed after signing is reported as tampering.
4. **Content** — every present content part hashes to its hash field, else
   :class:`ContentHashMismatch` (``part`` = the content path). Content that is present while its
   hash field is null fails too (content the signer never committed to). Absent content with a hash
   is reported in ``absent_parts``, not an error (structured-only or compacted).
5. **Working set** — the leaf count and the RFC 6962 root recomputed from the entries equal
   ``contextSetLeafCount`` and ``contextSetHash``, else :class:`ContentHashMismatch` (``part`` =
   that field). The entries are signed metadata, so with a valid signature this only fails when the
   signer itself committed an inconsistent root.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from hashlib import sha256
from typing import Any

from cryptography.exceptions import InvalidSignature

from producers import native
from producers.evidence.canonical import HASH_PREFIX, fast_json_hash, text_hash
from producers.evidence.dsse import b64decode, pae
from producers.evidence.keys import key_id_from_ref
from producers.evidence.manifest import MANIFEST_PAYLOAD_TYPE
from producers.evidence.merkle import CONTEXT_SET_ALGORITHM, merkle_root, working_set_leaves
from producers.evidence.parts import PART_FIELDS, PartRef, part_checker
from producers.evidence.payload import signing_payload
from producers.evidence.seal import SIGNATURE_ALGORITHM, SIGNATURE_PREFIX
from producers.evidence.trust import TrustStore, parse_time
from schemas.errors import (
    ContentHashMismatch,
    ContractError,
    KeyNotTrusted,
    SignatureInvalid,
    UnknownAlgorithm,
)


@dataclass(frozen=True, slots=True)
class VerificationReport:
    """What a successful verification established."""

    key_id: str
    absent_parts: tuple[str, ...] = ()  # content gone, hash kept (paths)
    checked_parts: int = 0  # present content parts whose hash matched
    decision_id: str | None = None
    envelope_hash: str = ""  # sha256 of the exact bytes the signature covers (the transparency-log leaf's)


def _text_hash_or_none(text: str) -> str | None:
    """:func:`~producers.evidence.canonical.text_hash` (native when loaded: it hashes the string's
    UTF-8 without a re-encoded copy), or None where it would raise."""
    try:
        return text_hash(text)
    except UnicodeEncodeError:
        return None


# PART_FIELDS unpacked once: (field, section, list key, content key, hash key, is text, repeats).
_SLOTS = tuple(
    (f, f.section, f.list_key, f.content_key, f.hash_key, f.kind == "text", f.repeats) for f in PART_FIELDS
)


def _check_content(capture: Mapping[str, Any]) -> tuple[list[str], int]:
    """Check 4: ``(absent paths, checked count)``, raising the first mismatch.

    With the native core, one call of its ``PartChecker`` (src/content.rs) checks every slot below
    and answers when all present parts match; on any failure (or anything it declines) the Python
    walk below runs and raises the first failure with its own message.
    """
    core = native.core()
    if core is not None:
        done = part_checker(core).check(capture)
        if done is not None:
            absent_slots, checked = done
            return [PartRef(PART_FIELDS[slot], index, {}).path for slot, index in absent_slots], checked
    return python_check_content(capture)


def python_check_content(capture: Mapping[str, Any]) -> tuple[list[str], int]:
    """:func:`_check_content` without the native core.

    The slots of :func:`~producers.evidence.parts.iter_parts`, in its order, without building a
    PartRef per slot (one is built for messages, absent paths, and for every hash the inline paths
    do not give). Inline: text that is a ``str`` (its UTF-8) and JSON that is not a repeating part
    (RFC 8785), through :func:`~producers.evidence.canonical.text_hash` and
    :func:`~producers.evidence.canonical.fast_json_hash` (the native core when it is loaded, else
    the Python fast paths) — each exactly what :meth:`PartRef.compute_hash` returns; every other
    case, every value they decline and every error goes through it.
    """
    absent: list[str] = []
    checked = 0
    for field, section_key, list_key, content_key, hash_key, is_text, repeats in _SLOTS:
        section = capture.get(section_key)
        if not isinstance(section, dict):
            continue
        if list_key is None:
            holders: Iterable[tuple[int | None, Any]] = ((None, section),)
        else:
            records = section.get(list_key)
            if not isinstance(records, list):
                continue
            holders = enumerate(records)
        for index, holder in holders:
            if not isinstance(holder, dict):
                continue
            recorded = holder.get(hash_key)
            content = holder.get(content_key)
            if content is None:
                if recorded is not None:
                    absent.append(PartRef(field, index, holder).path)
                continue
            if recorded is None:
                ref = PartRef(field, index, holder)
                raise ContentHashMismatch(
                    f"{ref.label} is present but the signed manifest records no hash for it", part=ref.path
                )
            if not isinstance(recorded, str) or not recorded.startswith(HASH_PREFIX):
                ref = PartRef(field, index, holder)
                raise UnknownAlgorithm(
                    f"{ref.label}: hash {recorded!r:.40} is not sha256", part=ref.hash_path
                )
            if is_text:
                computed = _text_hash_or_none(content) if type(content) is str else None
            else:
                computed = None if repeats else fast_json_hash(content)
            if computed is None:
                ref = PartRef(field, index, holder)
                try:
                    computed = ref.compute_hash()
                except ContractError as exc:
                    raise ContentHashMismatch(
                        f"{ref.label} cannot be what was hashed: {exc}", part=ref.path
                    ) from exc
            if computed != recorded:
                ref = PartRef(field, index, holder)
                raise ContentHashMismatch(
                    f"{ref.label} hashes to {computed}, the signed manifest says {recorded}", part=ref.path
                )
            checked += 1
    return absent, checked


def verify_capture(
    capture: Mapping[str, Any], trust: TrustStore, *, at: datetime | None = None
) -> VerificationReport:
    """Verify ``capture`` (JSON form) against ``trust``; raises the first failure (see module doc).

    ``at`` is the verification time used for revocation (default: now). The key's validity window
    is always checked at the signing time, ``capturedAt``.
    """
    signature = capture.get("signature")
    if not isinstance(signature, Mapping):
        raise SignatureInvalid("the capture has no signature block", part="signature")

    # 1. algorithms
    if signature.get("algorithm") != SIGNATURE_ALGORITHM:
        raise UnknownAlgorithm(
            f"signature algorithm {signature.get('algorithm')!r} is not supported (only {SIGNATURE_ALGORITHM})",
            part="signature.algorithm",
        )
    memory = capture.get("memoryState")
    memory = memory if isinstance(memory, Mapping) else {}
    if memory.get("contextSetAlgorithm") != CONTEXT_SET_ALGORITHM:
        raise UnknownAlgorithm(
            f"context-set algorithm {memory.get('contextSetAlgorithm')!r} is not supported "
            f"(only {CONTEXT_SET_ALGORITHM})",
            part="memoryState.contextSetAlgorithm",
        )

    # 2. key
    reference = signature.get("publicKeyRef")
    key_id = key_id_from_ref(reference)
    if key_id is None:
        raise KeyNotTrusted(f"publicKeyRef {reference!r} names no sha256:<hex> key id", part="key")
    captured_at = capture.get("capturedAt")
    try:
        signed_at = parse_time(captured_at if isinstance(captured_at, str) else None)
    except ValueError as exc:
        raise KeyNotTrusted(
            f"capturedAt {captured_at!r} is not an ISO-8601 time, so the key's window cannot be checked",
            part="key",
        ) from exc
    public_key = trust.check(key_id, signed_at, now=at)

    # 3. manifest signature
    encoded = signature.get("signatureBytes")
    try:
        if not isinstance(encoded, str) or not encoded.startswith(SIGNATURE_PREFIX):
            raise ValueError("missing the base64: prefix")
        signature_bytes = b64decode(encoded[len(SIGNATURE_PREFIX) :])
    except ValueError as exc:
        raise SignatureInvalid(
            f"signatureBytes {encoded!r:.40} is not base64:<signature>: {exc}", part="signature"
        ) from exc
    try:
        signed = signing_payload(dict(capture), fill_root=False)
    except ContractError as exc:
        raise SignatureInvalid(
            f"the manifest has no canonical form, so it cannot be what was signed ({exc})", part="signature"
        ) from exc
    signed_bytes = pae(MANIFEST_PAYLOAD_TYPE, signed.payload)
    try:
        public_key.verify(signature_bytes, signed_bytes)
    except InvalidSignature as exc:
        raise SignatureInvalid(
            f"the manifest signature does not verify with key {key_id}: a manifest field (metadata or "
            "a hash field) was changed after signing, or another key signed it",
            part="signature",
        ) from exc
    agent_id = capture.get("agentId")
    trust.check_agent(key_id, agent_id if isinstance(agent_id, str) else "")

    # 4. content
    absent, checked = _check_content(capture)

    # 5. working set
    entries = memory.get("workingSetEntries")
    entries = entries if isinstance(entries, list) else []
    if memory.get("contextSetLeafCount") != len(entries):
        raise ContentHashMismatch(
            f"the working set has {len(entries)} entries, the manifest says {memory.get('contextSetLeafCount')!r}",
            part="memoryState.contextSetLeafCount",
        )
    try:
        leaves = signed.leaves if signed.leaves is not None else working_set_leaves(entries)
        root = HASH_PREFIX + merkle_root(leaves).hex()
    except ContractError as exc:
        raise ContentHashMismatch(
            f"the working set has no Merkle root: {exc}", part="memoryState.contextSetHash"
        ) from exc
    if root != memory.get("contextSetHash"):
        raise ContentHashMismatch(
            f"the working set's RFC 6962 root is {root}, the manifest says {memory.get('contextSetHash')}",
            part="memoryState.contextSetHash",
        )

    decision_id = capture.get("decisionId")
    return VerificationReport(
        key_id=key_id,
        absent_parts=tuple(absent),
        checked_parts=checked,
        decision_id=decision_id if isinstance(decision_id, str) else None,
        envelope_hash=HASH_PREFIX + sha256(signed_bytes).hexdigest(),
    )

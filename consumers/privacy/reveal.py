"""Reveal the original of a redacted capture, for a caller whose grant includes personal data.

Everyone sees the redacted view by default; it is what was signed part by part, so it verifies as
stored. :func:`reveal` opens ``privacy.sealedOriginal`` with the decision's data key, checks every
original part against the keyed hash the manifest signed (``privacy.originalHashes``), and returns
the capture as the model saw it: original content, original spans, ordinary hashes of the original
parts and the working-set root over them. The caller authorizes first
(:func:`authorize_reveal`: the access log gets an ``reveal`` row, allowed or denied).

:func:`original_state` says, for ``show``, what became of the original: sealed, erased (when and
why), not kept, or gone with the content (structured-only, compacted).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from producers.evidence.merkle import context_set_hash
from producers.evidence.parts import iter_parts
from producers.privacy.envelope import keyed_hash, open_original
from producers.privacy.identifiers import restore_identifiers
from producers.privacy.keys import DataKeyStore, KeyUnavailable, Vault
from schemas.errors import BlackboxError, ContentHashMismatch

if TYPE_CHECKING:
    from consumers.access import AccessGate, Caller
    from consumers.access.log import AccessRecord

__all__ = ["NothingToReveal", "Revealed", "authorize_reveal", "erasure_note", "original_state", "reveal"]


class NothingToReveal(BlackboxError):
    """The capture has no sealed original to reveal (nothing redacted, not kept, or content gone)."""


@dataclass(frozen=True, slots=True)
class Revealed:
    """The capture with its original parts restored (``capture``) and which parts they were."""

    capture: dict[str, Any]
    parts: tuple[str, ...]
    identifiers: tuple[str, ...] = ()  # identifiers of people restored from their commitments

    def summary(self) -> dict[str, Any]:
        found = {"revealedIdentifiers": list(self.identifiers)} if self.identifiers else {}
        return {"view": "original", "originalVerified": True, "revealedParts": list(self.parts)} | found


def authorize_reveal(gate: AccessGate, caller: Caller, capture: Mapping[str, Any]) -> AccessRecord:
    """Log and allow one reveal, or log and raise :class:`~schemas.errors.AccessDenied`."""
    return gate.authorize(caller, capture, action="reveal")


def reveal(capture: Mapping[str, Any], *, vault: Vault) -> Revealed:
    """The original of ``capture`` (see the module docstring); raises :class:`NothingToReveal`,
    :class:`KeyUnavailable` (erased: says when and why), or :class:`ContentHashMismatch` naming the part."""
    decision_id = str(capture.get("decisionId"))
    privacy = capture.get("privacy")
    if not isinstance(privacy, dict):
        raise NothingToReveal(f"nothing was redacted from {decision_id}: the capture is its original")
    sealed = privacy.get("sealedOriginal")
    if not isinstance(sealed, str):
        raise NothingToReveal(f"{decision_id}: {_absent_reason(privacy)}")
    opened = open_original(sealed, data_key=vault.data_key(decision_id), decision_id=decision_id)
    signed = {item["part"]: item["hash"] for item in privacy.get("originalHashes") or ()}
    if set(signed) != set(opened.parts):
        raise ContentHashMismatch(
            f"{decision_id}: the sealed original holds parts {sorted(opened.parts)}, the manifest signed "
            f"{sorted(signed)}",
            part="privacy.originalHashes",
        )
    original = copy.deepcopy(dict(capture))
    restored: list[str] = []
    for ref in iter_parts(original):
        if ref.path not in opened.parts:
            continue
        ref.holder[ref.field.content_key] = opened.parts[ref.path]
        digest = ref.compute_hash()
        if keyed_hash(opened.salt, digest) != signed[ref.path]:
            raise ContentHashMismatch(
                f"{ref.label}: the revealed original does not match the hash the manifest signed",
                part=ref.path,
            )
        ref.holder[ref.field.hash_key] = digest
        if ref.path in opened.spans:
            ref.holder["spans"] = opened.spans[ref.path]
        restored.append(ref.path)
    missing = set(opened.parts) - set(restored)
    if missing:
        raise ContentHashMismatch(
            f"{decision_id}: no such part {sorted(missing)[0]}", part=sorted(missing)[0]
        )
    _refresh_working_set_root(original)
    identifiers = restore_identifiers(original, opened.ids, salt=opened.salt)
    return Revealed(capture=original, parts=tuple(restored), identifiers=tuple(identifiers))


def _refresh_working_set_root(capture: dict[str, Any]) -> None:
    memory = capture.get("memoryState")
    if not isinstance(memory, dict) or not memory.get("workingSetEntries"):
        return
    memory["contextSetHash"] = context_set_hash(memory["workingSetEntries"])


def _absent_reason(privacy: Mapping[str, Any]) -> str:
    if privacy.get("cipher") is None:
        return "the producer kept no original (no key store when it was captured)"
    return "the sealed original is not in this copy (structured-only or compacted: content is gone)"


def erasure_note(decision_id: str, keys: DataKeyStore) -> str | None:
    """The line "original erased on DATE (reason)" when ``decision_id``'s data key was shredded, else None
    (for ``verify``, which says it beside a verdict that still holds)."""
    try:
        record = keys.get(decision_id)
    except KeyUnavailable:
        return None  # an unreadable key record is not an erasure; reveal names it when asked
    if record is None or not record.erased:
        return None
    return _erased(record.erased_at, record.erase_reason)


def _erased(at: object, reason: object) -> str:
    return f"original erased on {at} ({reason})"


def original_state(capture: Mapping[str, Any], keys: DataKeyStore) -> dict[str, Any] | None:
    """What became of the original, for ``show``; None when nothing was redacted.

    ``{"redactions": n, "kinds": [...], "original": "sealed" | "erased" | "not kept" | "absent"
    | "key missing", "note": "..."}``
    """
    privacy = capture.get("privacy")
    if not isinstance(privacy, dict):
        return None
    redactions = privacy.get("redactions") or []
    kinds = sorted({str(r.get("kind")) for r in redactions if isinstance(r, dict)})
    state: dict[str, Any] = {"redactions": len(redactions), "kinds": kinds}
    decision_id = str(capture.get("decisionId"))
    try:
        record = keys.get(decision_id)
    except KeyUnavailable as exc:
        return state | {"original": "key missing", "note": str(exc)}
    if record is not None and record.erased:
        return state | {
            "original": "erased",
            "note": _erased(record.erased_at, record.erase_reason),
            "erasedAt": record.erased_at,
            "erasureReason": record.erase_reason,
        }
    if not isinstance(privacy.get("sealedOriginal"), str):
        return state | {
            "original": "not kept" if privacy.get("cipher") is None else "absent",
            "note": _absent_reason(privacy),
        }
    if record is None:
        return state | {
            "original": "key missing",
            "note": "no data key was stored: the original cannot be read",
        }
    return state | {"original": "sealed", "note": "original sealed; a grant with personal_data reveals it"}

"""Sealing: fill every hash field, the working-set Merkle root, and sign the manifest.

This runs on the producer's hot path (thousands of captures per second), so it copies with a
JSON-specific copier instead of :func:`copy.deepcopy` (or not at all, ``copy=False``), hashes the
parts and prints the manifest and the Merkle leaves with the native core when it is loaded (else
the fast Python paths of :mod:`producers.evidence.canonical` and :mod:`producers.evidence.payload`),
with the same bytes either way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from producers import native
from producers.evidence.canonical import is_hash
from producers.evidence.dsse import b64encode, pae
from producers.evidence.keys import Signer, key_id_from_ref
from producers.evidence.manifest import MANIFEST_PAYLOAD_TYPE
from producers.evidence.merkle import CONTEXT_SET_ALGORITHM
from producers.evidence.parts import iter_parts, part_checker, pinned_hash
from producers.evidence.payload import signing_payload
from producers.evidence.trust import parse_time
from schemas.errors import ContractError

SIGNATURE_ALGORITHM = "ed25519"
SIGNATURE_PREFIX = "base64:"

_ATOMS = frozenset({str, int, float, bool, type(None)})


def seal(
    capture: Mapping[str, Any], signer: Signer, *, copy: bool = True, pinned: bool = False
) -> dict[str, Any]:
    """The signed capture: ``capture`` deep-copied (filled in place with ``copy=False``), every hash set.

    - Present content: its hash is computed; a hash the caller already supplied must agree, else
      :class:`ContractError` with ``path`` = that hash field (e.g.
      ``memoryState.workingSetEntries[1].renderedContentHash``).
    - Absent content with a supplied hash (structured-only capture): the hash is kept (it must be a
      well-formed ``sha256:<hex>``).
    - ``memoryState.contextSetHash`` / ``contextSetAlgorithm`` (``rfc6962-sha256``) /
      ``contextSetLeafCount``; supplied values must agree.
    - ``signature`` = ``{"algorithm": "ed25519", "publicKeyRef", "signatureBytes": "base64:.."}``.
      A supplied ``publicKeyRef`` is kept when it names the signer's key id (``did:...#sha256:..``).

    ``copy=False`` skips the deep copy and fills ``capture`` itself (which must be a ``dict``) —
    for a caller that owns the dict and will not touch it again, such as the recorder. On error the
    dict may be partly filled.

    ``pinned=True`` also reuses hashes of JSON parts the SDK pinned on its own snapshots
    (:func:`~producers.evidence.parts.pin_part`; text pins are always safe to reuse) — for captures
    the recorder built itself. Input from outside (a file, ``Recorder.record``) is always hashed.
    """
    if copy:
        if not isinstance(capture, Mapping):
            raise ContractError(f"a capture is a JSON object, got {type(capture).__name__}")
        sealed: dict[str, Any] = _copy(dict(capture))
    elif isinstance(capture, dict):
        sealed = capture
    else:
        raise ContractError(f"seal(copy=False) needs a dict, got {type(capture).__name__}")
    captured_at = sealed.get("capturedAt")
    try:
        parse_time(captured_at if isinstance(captured_at, str) else None)
    except ValueError as exc:
        raise ContractError(
            f"capturedAt must be an ISO-8601 time (it is the signing time), got {captured_at!r}",
            path="capturedAt",
        ) from exc

    core = native.core()
    aside = _set_aside_pinned(sealed) if pinned else None
    try:
        if core is None or part_checker(core).fill(sealed) is None:
            fill_part_hashes(sealed, pinned=pinned)  # the reference; it names what the core declined
    finally:
        if aside is not None:
            aside[0]["toolSchemaJson"] = aside[1]
    _working_set(sealed)
    signature = _signature_block(sealed, signer)
    payload = signing_payload(sealed, fill_root=True).payload
    signature["signatureBytes"] = SIGNATURE_PREFIX + b64encode(
        signer.sign(pae(MANIFEST_PAYLOAD_TYPE, payload))
    )
    return sealed


def _set_aside_pinned(sealed: dict[str, Any]) -> tuple[dict[str, Any], Any] | None:
    """Take a pinned tool schema out of the part loop, its pinned hash filled in its place.

    The part loop (native or reference) then keeps that hash as it keeps a structured-only
    capture's, instead of canonicalising and hashing the schema again; the caller puts the schema
    back. Only when no hash was supplied (a supplied one is checked against the content as usual).
    """
    config = sealed.get("agentConfiguration")
    if type(config) is not dict or config.get("toolSchemaHash") is not None:
        return None
    schema = config.get("toolSchemaJson")
    digest = None if schema is None else pinned_hash(schema, "json")
    if digest is None:
        return None
    config["toolSchemaJson"] = None
    config["toolSchemaHash"] = digest
    return config, schema


def fill_part_hashes(sealed: dict[str, Any], *, pinned: bool) -> None:
    """Sealing's part loop without the native core (its ``PartChecker.fill`` does the same in one
    call): every present part's hash computed, checked against a supplied one, and filled in."""
    for ref in iter_parts(sealed):
        field, holder = ref.field, ref.holder
        supplied = holder.get(field.hash_key)
        content = holder.get(field.content_key)
        if content is None:
            if supplied is not None and not is_hash(supplied):
                raise ContractError(f"{ref.label}: {supplied!r} is not sha256:<64 hex>", path=ref.hash_path)
            continue
        computed = (
            pinned_hash(content, field.kind) if pinned or field.kind == "text" else None
        ) or ref.compute_hash()
        if supplied is not None and supplied != computed:
            raise ContractError(
                f"{ref.label}: supplied hash {supplied} disagrees with the content, which hashes to {computed}",
                path=ref.hash_path,
            )
        holder[field.hash_key] = computed


def _working_set(sealed: dict[str, Any]) -> None:
    """Check the working-set fields and fill the algorithm and leaf count (the root comes later)."""
    memory = sealed.get("memoryState")
    if memory is None:
        memory = sealed["memoryState"] = {}
    if not isinstance(memory, dict):
        raise ContractError("memoryState must be a JSON object", path="memoryState")
    entries = memory.get("workingSetEntries")
    if entries is None:
        entries = memory["workingSetEntries"] = []
    if not isinstance(entries, list):
        raise ContractError("workingSetEntries must be a list", path="memoryState.workingSetEntries")
    algorithm = memory.get("contextSetAlgorithm")
    if algorithm not in (None, CONTEXT_SET_ALGORITHM):
        raise ContractError(
            f"unknown context-set algorithm {algorithm!r} (blackbox computes {CONTEXT_SET_ALGORITHM})",
            path="memoryState.contextSetAlgorithm",
        )
    supplied = memory.get("contextSetLeafCount")
    if supplied is not None and supplied != len(entries):
        raise ContractError(
            f"supplied {supplied!r} disagrees with the working set, which has {len(entries)} entries",
            path="memoryState.contextSetLeafCount",
        )
    memory["contextSetAlgorithm"] = CONTEXT_SET_ALGORITHM
    memory["contextSetLeafCount"] = len(entries)


def _signature_block(sealed: dict[str, Any], signer: Signer) -> dict[str, Any]:
    signature = sealed.get("signature")
    if signature is None:
        signature = {}
    if not isinstance(signature, dict):
        raise ContractError("signature must be a JSON object", path="signature")
    algorithm = signature.get("algorithm")
    if algorithm not in (None, SIGNATURE_ALGORITHM):
        raise ContractError(
            f"blackbox signs with {SIGNATURE_ALGORITHM}, the capture asks for {algorithm!r}",
            path="signature.algorithm",
        )
    reference = signature.get("publicKeyRef")
    if reference is None:
        reference = signer.public_key_ref
    elif key_id_from_ref(reference) != signer.key_id:
        raise ContractError(
            f"publicKeyRef {reference!r} does not name the signing key {signer.key_id}",
            path="signature.publicKeyRef",
        )
    signature["algorithm"] = SIGNATURE_ALGORITHM
    signature["publicKeyRef"] = reference
    signature["signatureBytes"] = None
    sealed["signature"] = signature
    return signature


def _copy(value: Any) -> Any:
    """Deep copy of a JSON tree (dicts, lists; tuples become lists), much cheaper than deepcopy."""
    kind = type(value)
    if kind is dict:
        return {key: item if type(item) in _ATOMS else _copy(item) for key, item in value.items()}
    if kind is list or kind is tuple:
        return [item if type(item) in _ATOMS else _copy(item) for item in value]
    if kind in _ATOMS:
        return value
    if isinstance(value, Mapping):
        return {key: _copy(item) for key, item in value.items()}
    return value  # not JSON; canonicalization will name it

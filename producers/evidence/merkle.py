"""RFC 6962 §2.1 Merkle tree hash, and the working-set root (``memoryState.contextSetHash``).

MTH({}) = SHA-256(); MTH({d}) = SHA-256(0x00 || d); for n > 1 with k the largest power of two
below n, MTH(D[n]) = SHA-256(0x01 || MTH(D[0:k]) || MTH(D[k:n])). Computed bottom-up: hash the
leaves, pair neighbours level by level and carry an odd last node up unchanged, which yields the
same left-balanced tree.

Working set: one leaf per entry, in ``contextPosition`` order; the leaf bytes are the entry's
canonical manifest — the RFC 8785 form of its ``entryId``, ``tier``, ``provenance``,
``renderedContentHash``, ``contextPosition``, ``retrievalScore``, ``retrievalMethod``,
``embeddingModel`` and ``embeddingVersion``, with null members omitted like the capture manifest
(so absent and ``null`` agree, before and after the Avro round trip). The rendered content itself
is committed through its hash, so a compacted entry keeps its leaf.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from producers import native
from producers.evidence.canonical import HASH_PREFIX, canonical_json, encode_normalized
from schemas.errors import ContractError

CONTEXT_SET_ALGORITHM = "rfc6962-sha256"

WORKING_SET_LEAF_KEYS: tuple[str, ...] = (
    "entryId",
    "tier",
    "provenance",
    "renderedContentHash",
    "contextPosition",
    "retrievalScore",
    "retrievalMethod",
    "embeddingModel",
    "embeddingVersion",
)

_ENTRIES_PATH = "memoryState.workingSetEntries"
_sha256 = hashlib.sha256


def leaf_hash(data: bytes) -> bytes:
    """SHA-256(0x00 || data)."""
    return _sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """SHA-256(0x01 || left || right)."""
    return _sha256(b"\x01" + left + right).digest()


def merkle_root(leaves: Sequence[bytes]) -> bytes:
    """The RFC 6962 Merkle tree hash of ``leaves`` (raw leaf data, not leaf hashes); 32 bytes."""
    core = native.core()
    if core is not None and type(leaves) is list and all(type(leaf) is bytes for leaf in leaves):
        root: bytes = core.merkle_root(leaves)
        return root
    return python_merkle_root(leaves)


def python_merkle_root(leaves: Sequence[bytes]) -> bytes:
    """:func:`merkle_root` without the native core."""
    if not leaves:
        return _sha256(b"").digest()
    level = [_sha256(b"\x00" + leaf).digest() for leaf in leaves]
    while len(level) > 1:
        paired = [_sha256(b"\x01" + level[i] + level[i + 1]).digest() for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            paired.append(level[-1])
        level = paired
    return level[0]


def position_order(entries: Sequence[Any]) -> list[int]:
    """Indices of ``entries`` in ``contextPosition`` order.

    Raises :class:`ContractError` naming the entry when an entry is not an object, its
    ``contextPosition`` is not an integer, or two entries share a position.
    """
    keyed: list[tuple[int, int]] = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            raise ContractError("a working-set entry must be a JSON object", path=f"{_ENTRIES_PATH}[{index}]")
        position = entry.get("contextPosition")
        if type(position) is not int:
            raise ContractError(
                f"entry {entry.get('entryId')}: contextPosition must be an integer, got {position!r}",
                path=f"{_ENTRIES_PATH}[{index}].contextPosition",
            )
        keyed.append((position, index))
    keyed.sort()
    for (first, _), (second, index) in itertools.pairwise(keyed):
        if first == second:
            raise ContractError(
                f"two working-set entries share contextPosition {first}",
                path=f"{_ENTRIES_PATH}[{index}].contextPosition",
            )
    return [index for _, index in keyed]


def working_set_leaves(
    entries: Sequence[Mapping[str, Any]], *, normalized_entries: Sequence[Any] | None = None
) -> list[bytes]:
    """Leaf bytes of the working set in ``contextPosition`` order (see :func:`position_order`).

    ``normalized_entries`` — the same entries as they appear in an already normalized manifest
    (:func:`producers.evidence.manifest.normalized_manifest`) — lets seal and verify skip a second
    normalization; the bytes are the same.
    """
    order = position_order(entries)
    if normalized_entries is not None and native.core() is None:  # the core prints a leaf faster
        try:
            return [
                encode_normalized({key: item[key] for key in WORKING_SET_LEAF_KEYS if key in item})
                for item in (normalized_entries[index] for index in order)
            ]
        except UnicodeEncodeError:
            pass  # the reference path below names the field
    leaves = []
    for index in order:
        entry = entries[index]
        leaf = {key: entry.get(key) for key in WORKING_SET_LEAF_KEYS}
        leaves.append(canonical_json(leaf, path=f"{_ENTRIES_PATH}[{index}]", omit_null_members=True))
    return leaves


def working_set_root(entries: Sequence[Mapping[str, Any]]) -> bytes:
    """The RFC 6962 root over the working set (see :func:`working_set_leaves`)."""
    return merkle_root(working_set_leaves(entries))


def context_set_hash(entries: Sequence[Mapping[str, Any]]) -> str:
    """``"sha256:" + hex(working_set_root(entries))`` — the value of ``contextSetHash``."""
    return HASH_PREFIX + working_set_root(entries).hex()

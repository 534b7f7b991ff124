"""RFC 6962 Merkle tree hash: published vectors, and the working-set root."""

from __future__ import annotations

import hashlib
import random
from typing import Any

import pytest

from producers.evidence import context_set_hash, merkle_root, working_set_leaves, working_set_root
from producers.evidence.merkle import leaf_hash, node_hash
from schemas.errors import ContractError

# transparency-dev/merkle testonly/constants.go (LeafInputs, RootHashes) — the Certificate
# Transparency reference tree, also in google/certificate-transparency's merkletree tests.
CT_LEAVES = [bytes.fromhex(h) for h in ["", "00", "10", "2021", "3031", "40414243", "5051525354555657",
                                         "606162636465666768696a6b6c6d6e6f"]]  # fmt: skip
CT_ROOTS = [
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]


@pytest.mark.parametrize("size", range(len(CT_ROOTS)))
def test_certificate_transparency_roots(size: int) -> None:
    assert merkle_root(CT_LEAVES[:size]).hex() == CT_ROOTS[size]


def test_rfc6962_leaf_and_node_hashes() -> None:
    # transparency-dev/merkle rfc6962/rfc6962_test.go
    assert leaf_hash(b"").hex() == "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"
    assert leaf_hash(b"L123456").hex() == "395aa064aa4c29f7010acfe3f25db9485bbd4b91897b6ad7ad547639252b4d56"
    assert (
        node_hash(b"N123", b"N456").hex()
        == "aa217fe888e47007fa15edab33c2b492a722cb106c64667fc2b044444de66bbb"
    )


def _is_subtree_valid(start: int, end: int) -> bool:
    if start == 0:
        return True
    length = end - start
    bit_ceil = 1 if length <= 1 else 1 << (length - 1).bit_length()
    return start & (bit_ceil - 1) == 0


def test_accumulated_subtree_vector_covers_every_size_to_130() -> None:
    """transparency-dev/merkle testonly/vectors_test.go TestSubtreeHashVectors.

    It reproduces the "Subtree Test Vectors" appendix of draft-ietf-plants-merkle-tree-certs:
    d[i] = byte(i) for i < 130; for every valid subtree [start, end) write "[start, end) <hash>\\n"
    into one running SHA-256. [0, end) is valid for every end, so this pins MTH for all tree sizes
    1..130 (0..17 included) plus every aligned subtree.
    """
    data = [bytes([i]) for i in range(130)]
    rolling = hashlib.sha256()
    for end in range(1, 131):
        for start in range(end):
            if _is_subtree_valid(start, end):
                rolling.update(f"[{start}, {end}) {merkle_root(data[start:end]).hex()}\n".encode())
    assert rolling.hexdigest() == "94a95384a8c69acea9b50d035a58285b3a777cb7a724005faa5e1f1e1190007f"


def _reference_mth(leaves: list[bytes]) -> bytes:
    """RFC 6962 §2.1 literally: split at the largest power of two smaller than n."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return hashlib.sha256(b"\x00" + leaves[0]).digest()
    split = 1 << ((len(leaves) - 1).bit_length() - 1)
    return hashlib.sha256(b"\x01" + _reference_mth(leaves[:split]) + _reference_mth(leaves[split:])).digest()


@pytest.mark.parametrize("size", range(18))
def test_sizes_0_to_17_match_the_recursive_definition(size: int) -> None:
    leaves = [f"leaf {i}".encode() for i in range(size)]
    assert merkle_root(leaves) == _reference_mth(leaves)


def _entry(entry_id: str, position: Any, **extra: Any) -> dict[str, Any]:
    entry = {
        "entryId": entry_id,
        "tier": "hot",
        "provenance": {"writerId": "w", "writtenAt": "2026-07-20T09:12:00.000Z", "sourceType": "crm"},
        "renderedContent": f"content of {entry_id}",
        "contextPosition": position,
        "retrievalScore": 0.5,
        "retrievalMethod": "bm25",
        "embeddingModel": None,
        "embeddingVersion": None,
        "renderedContentHash": "sha256:" + "ab" * 32,
    }
    entry.update(extra)
    return entry


def test_working_set_leaf_is_the_entry_manifest_without_content_or_nulls() -> None:
    (leaf,) = working_set_leaves([_entry("mem_01", 0)])
    assert leaf == (
        b'{"contextPosition":0,"entryId":"mem_01","provenance":{"sourceType":"crm",'
        b'"writerId":"w","writtenAt":"2026-07-20T09:12:00.000Z"},"renderedContentHash":"sha256:'
        + b"ab" * 32
        + b'","retrievalMethod":"bm25","retrievalScore":0.5,"tier":"hot"}'
    )


def test_working_set_is_ordered_by_context_position_not_list_order() -> None:
    entries = [_entry(f"mem_{i}", i) for i in range(7)]
    shuffled = entries[:]
    random.Random(1).shuffle(shuffled)
    assert working_set_root(shuffled) == working_set_root(entries)
    swapped = [dict(e) for e in entries]
    swapped[0]["contextPosition"], swapped[1]["contextPosition"] = 1, 0
    assert working_set_root(swapped) != working_set_root(entries)
    assert context_set_hash([]) == "sha256:" + hashlib.sha256(b"").hexdigest()


def test_content_changes_do_not_move_the_root_but_its_hash_does() -> None:
    entries = [_entry("mem_01", 0)]
    assert working_set_root([{**entries[0], "renderedContent": None}]) == working_set_root(entries)
    assert working_set_root(
        [{**entries[0], "renderedContentHash": "sha256:" + "cd" * 32}]
    ) != working_set_root(entries)


@pytest.mark.parametrize(
    ("entries", "path"),
    [
        ([_entry("a", 0), _entry("b", 0)], "memoryState.workingSetEntries[1].contextPosition"),
        ([_entry("a", 0), _entry("b", "1")], "memoryState.workingSetEntries[1].contextPosition"),
        ([_entry("a", True)], "memoryState.workingSetEntries[0].contextPosition"),
        ([_entry("a", 0), "not an entry"], "memoryState.workingSetEntries[1]"),
    ],
)
def test_bad_positions_are_contract_errors(entries: list[Any], path: str) -> None:
    with pytest.raises(ContractError) as info:
        working_set_root(entries)
    assert info.value.path == path

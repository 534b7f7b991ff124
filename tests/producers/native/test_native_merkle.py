"""The native RFC 6962 Merkle root is the reference's: the Certificate Transparency vectors, every
tree size to 130 (the accumulated subtree vector), and random leaves of every size."""

from __future__ import annotations

import hashlib
import random
from types import ModuleType
from typing import Any

import pytest
from native_testing import both, native_mode
from test_evidence_merkle import CT_LEAVES, CT_ROOTS, _is_subtree_valid, _reference_mth

from producers.evidence import merkle
from producers.evidence.merkle import merkle_root, python_merkle_root


@pytest.mark.parametrize("size", range(len(CT_ROOTS)))
def test_certificate_transparency_roots(core: ModuleType, size: int) -> None:
    assert core.merkle_root(CT_LEAVES[:size]).hex() == CT_ROOTS[size]
    assert core.merkle_root(tuple(CT_LEAVES[:size])).hex() == CT_ROOTS[size]


def test_accumulated_subtree_vector_covers_every_size_to_130(core: ModuleType) -> None:
    """transparency-dev/merkle TestSubtreeHashVectors (see tests/producers/evidence)."""
    data = [bytes([i]) for i in range(130)]
    rolling = hashlib.sha256()
    for end in range(1, 131):
        for start in range(end):
            if _is_subtree_valid(start, end):
                rolling.update(f"[{start}, {end}) {core.merkle_root(data[start:end]).hex()}\n".encode())
    assert rolling.hexdigest() == "94a95384a8c69acea9b50d035a58285b3a777cb7a724005faa5e1f1e1190007f"


def test_random_trees_equal_the_reference(core: ModuleType) -> None:
    rng = random.Random(6962)
    for size in [*range(70), 255, 256, 257, 1000]:
        leaves = [rng.randbytes(rng.choice([0, 1, 31, 32, 33, 300, 5000])) for _ in range(size)]
        expected = python_merkle_root(leaves)
        assert core.merkle_root(leaves) == expected == _reference_mth(leaves)
    big = [rng.randbytes(1 << 20) for _ in range(3)]  # large enough to hash without the GIL
    assert core.merkle_root(big) == python_merkle_root(big)


def test_leaves_that_are_not_bytes_take_the_reference(core: ModuleType) -> None:
    with pytest.raises(TypeError):
        core.merkle_root([b"a", "b"])
    with pytest.raises(TypeError):
        core.merkle_root(7)
    natively, reference = both(lambda: merkle_root([b"a", "text"]))  # type: ignore[list-item]
    assert natively == reference and natively[0] == "TypeError"  # type: ignore[index]
    mixed: list[Any] = [bytearray(b"a"), b"b"]
    assert both(lambda: merkle_root(mixed)) == (python_merkle_root([b"a", b"b"]),) * 2


def test_the_public_root_asks_the_core_first(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(leaves: object) -> bytes:
        raise AssertionError("the Python path ran")

    with native_mode("require"):
        monkeypatch.setattr(merkle, "python_merkle_root", refuse)
        assert merkle_root(CT_LEAVES).hex() == CT_ROOTS[-1]

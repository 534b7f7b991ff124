"""The C2SP tlog-tiles layout in the blob store, and the Merkle tree read back from it.

Under the log's prefix ``P``:

- ``P/tile/<L>/<N>`` — a full tile: 256 hashes (8,192 bytes). Level 0 holds leaf hashes; at level
  ``L`` each hash is the Merkle tree hash of a full tile of level ``L-1`` (a tree node at height 8L).
- ``P/tile/<L>/<N>.p/<W>`` — the partial tile of width ``W`` (1-255) at the tree size that needed it.
- ``P/tile/entries/<N>[.p/<W>]`` — entry bundles: the leaves, each a big-endian uint16 length then
  the bytes.
- ``<N>`` is written as 3-digit groups, all but the last prefixed with ``x`` (1234067:
  ``x001/x234/067``).

Checkpoints live beside them (:mod:`consumers.tlog.checkpoints`). :class:`TreeReader` computes any
subtree hash, inclusion proof or consistency proof of a tree size from the tiles (RFC 6962 §2.1.1-2).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from producers.evidence.merkle import node_hash
from schemas.errors import BlobNotFound, TransparencyLogError

if TYPE_CHECKING:
    from producers.blobstore import BlobStore

__all__ = [
    "HASH_SIZE",
    "WIDTH",
    "TreeReader",
    "decode_bundle",
    "encode_bundle",
    "entries_key",
    "perfect_root",
    "tile_key",
    "tile_path",
    "tile_width",
]

WIDTH = 256
HASH_SIZE = 32


def tile_path(n: int) -> str:
    """``<N>`` as zero-padded 3-digit path elements, all but the last starting with ``x``."""
    if n < 0:
        raise ValueError("a tile index is non-negative")
    digits = str(n)
    digits = "0" * (-len(digits) % 3) + digits
    groups = [digits[i : i + 3] for i in range(0, len(digits), 3)]
    return "/".join([*("x" + g for g in groups[:-1]), groups[-1]])


def _suffix(width: int) -> str:
    if not 1 <= width <= WIDTH:
        raise ValueError(f"a tile width is 1..256, got {width}")
    return "" if width == WIDTH else f".p/{width}"


def tile_key(prefix: str, level: int, n: int, width: int = WIDTH) -> str:
    return f"{prefix}/tile/{level}/{tile_path(n)}{_suffix(width)}"


def entries_key(prefix: str, n: int, width: int = WIDTH) -> str:
    return f"{prefix}/tile/entries/{tile_path(n)}{_suffix(width)}"


def tile_width(size: int, level: int, n: int) -> int:
    """Hashes tile ``n`` of ``level`` holds in a tree of ``size`` leaves (256 when full, 0 when none)."""
    span = WIDTH ** (level + 1)
    if size >= (n + 1) * span:
        return WIDTH
    if n != size // span:
        return 0
    return (size // WIDTH**level) % WIDTH


def encode_bundle(leaves: Sequence[bytes]) -> bytes:
    return b"".join(struct.pack(">H", len(leaf)) + leaf for leaf in leaves)


def decode_bundle(data: bytes) -> list[bytes]:
    out: list[bytes] = []
    at = 0
    while at < len(data):
        if at + 2 > len(data):
            raise TransparencyLogError("an entry bundle ends inside a length prefix")
        (length,) = struct.unpack_from(">H", data, at)
        if at + 2 + length > len(data):
            raise TransparencyLogError("an entry bundle ends inside an entry")
        out.append(data[at + 2 : at + 2 + length])
        at += 2 + length
    return out


def perfect_root(hashes: Sequence[bytes]) -> bytes:
    """The root over a power-of-two count of node hashes (a perfect subtree)."""
    level = list(hashes)
    while len(level) > 1:
        level = [node_hash(level[i], level[i + 1]) for i in range(0, len(level), 2)]
    return level[0]


def split_hashes(data: bytes) -> list[bytes]:
    if len(data) % HASH_SIZE:
        raise TransparencyLogError(f"a tile of {len(data)} bytes is not a whole number of hashes")
    return [data[i : i + HASH_SIZE] for i in range(0, len(data), HASH_SIZE)]


def _largest_power_below(n: int) -> int:
    """The largest power of two strictly smaller than ``n`` (n > 1)."""
    return 1 << ((n - 1).bit_length() - 1)


class TreeReader:
    """The tree of ``size`` leaves as stored under ``prefix``: tiles fetched once, then cached."""

    def __init__(self, store: BlobStore, prefix: str, size: int) -> None:
        self.store = store
        self.prefix = prefix
        self.size = size
        self._tiles: dict[tuple[int, int], list[bytes]] = {}

    def tile(self, level: int, n: int) -> list[bytes]:
        """The hashes of tile ``n`` at ``level`` as they stand at :attr:`size` (full or partial)."""
        cached = self._tiles.get((level, n))
        if cached is not None:
            return cached
        width = tile_width(self.size, level, n)
        if not width:
            raise TransparencyLogError(f"tile {level}/{n} holds nothing in a tree of {self.size} leaves")
        key = tile_key(self.prefix, level, n, width)
        try:
            hashes = split_hashes(self.store.get(key))
        except BlobNotFound as exc:
            raise TransparencyLogError(f"the log is missing tile {key}") from exc
        if len(hashes) != width:
            raise TransparencyLogError(f"tile {key} holds {len(hashes)} hashes, not {width}")
        self._tiles[(level, n)] = hashes
        return hashes

    def entries(self, n: int) -> list[bytes]:
        """The leaves of entry bundle ``n`` at :attr:`size`."""
        width = tile_width(self.size, 0, n)
        if not width:
            raise TransparencyLogError(f"entry bundle {n} holds nothing in a tree of {self.size} leaves")
        key = entries_key(self.prefix, n, width)
        try:
            leaves = decode_bundle(self.store.get(key))
        except BlobNotFound as exc:
            raise TransparencyLogError(f"the log is missing entry bundle {key}") from exc
        if len(leaves) != width:
            raise TransparencyLogError(f"entry bundle {key} holds {len(leaves)} leaves, not {width}")
        return leaves

    def leaf(self, index: int) -> bytes:
        return self.entries(index // WIDTH)[index % WIDTH]

    def iter_leaves(self) -> Iterator[tuple[int, bytes]]:
        for n in range(-(-self.size // WIDTH)):
            for i, leaf in enumerate(self.entries(n)):
                yield n * WIDTH + i, leaf

    # --- hashes -------------------------------------------------------------------------------------
    def node(self, height: int, index: int) -> bytes:
        """The hash of the perfect subtree of ``2**height`` leaves starting at leaf ``index * 2**height``."""
        level, within = divmod(height, 8)
        first = index << within  # its first hash at tree height 8 * level
        hashes = self.tile(level, first // WIDTH)
        start = first % WIDTH
        part = hashes[start : start + (1 << within)]
        if len(part) != 1 << within:
            raise TransparencyLogError(f"node {height}/{index} is not complete in a tree of {self.size}")
        return perfect_root(part)

    def subtree(self, start: int, end: int) -> bytes:
        """MTH(D[start:end]) for a range that RFC 6962's recursion produces (``start`` aligned)."""
        n = end - start
        if n <= 0:
            raise TransparencyLogError("an empty range has no subtree hash")
        if n & (n - 1) == 0 and start % n == 0:
            return self.node(n.bit_length() - 1, start // n)
        k = _largest_power_below(n)
        return node_hash(self.subtree(start, start + k), self.subtree(start + k, end))

    def root(self) -> bytes:
        return self.subtree(0, self.size) if self.size else hashlib.sha256(b"").digest()

    def inclusion(self, index: int) -> list[bytes]:
        """RFC 6962 PATH(index, D[0:size])."""
        if not 0 <= index < self.size:
            raise TransparencyLogError(f"leaf {index} is not in a tree of {self.size} leaves")
        return self._path(index, 0, self.size)

    def _path(self, m: int, start: int, end: int) -> list[bytes]:
        n = end - start
        if n == 1:
            return []
        k = _largest_power_below(n)
        if m < k:
            return [*self._path(m, start, start + k), self.subtree(start + k, end)]
        return [*self._path(m - k, start + k, end), self.subtree(start, start + k)]

    def consistency(self, old_size: int) -> list[bytes]:
        """RFC 6962 PROOF(old_size, D[0:size])."""
        if not 0 <= old_size <= self.size:
            raise TransparencyLogError(f"no consistency proof from {old_size} to {self.size} leaves")
        if old_size in (0, self.size):
            return []
        return self._subproof(old_size, 0, self.size, True)

    def _subproof(self, m: int, start: int, end: int, whole: bool) -> list[bytes]:
        n = end - start
        if m == n:
            return [] if whole else [self.subtree(start, end)]
        k = _largest_power_below(n)
        if m <= k:
            return [*self._subproof(m, start, start + k, whole), self.subtree(start + k, end)]
        return [*self._subproof(m - k, start + k, end, False), self.subtree(start, start + k)]

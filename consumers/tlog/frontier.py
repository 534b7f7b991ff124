"""The right edge of the tree: what an append needs, and the tiles an append writes.

A tree of ``size`` leaves is fully described, for appending, by its partial tiles: at every level
``L`` the ``(size // 256**L) % 256`` hashes of the rightmost, incomplete tile, plus the partial entry
bundle. Everything left of them is in full tiles that never change. :meth:`Frontier.extend` is pure:
it returns the new frontier and the objects to write, so a failed write leaves the old one intact.
The root of the tree is computable from the frontier alone (:meth:`Frontier.root`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from producers.blobstore import BlobStore
from producers.evidence.merkle import leaf_hash, node_hash
from schemas.errors import BlobNotFound, TransparencyLogError

from .tiles import WIDTH, decode_bundle, encode_bundle, entries_key, perfect_root, split_hashes, tile_key

__all__ = ["Frontier"]


@dataclass(frozen=True, slots=True)
class Frontier:
    """``levels[L]``: the hashes of the partial tile at level L (fewer than 256); ``entries``: the
    leaves of the partial entry bundle."""

    size: int = 0
    levels: tuple[tuple[bytes, ...], ...] = ()
    entries: tuple[bytes, ...] = ()

    @classmethod
    def load(cls, store: BlobStore, prefix: str, size: int) -> Frontier:
        """The frontier of the stored tree of ``size`` leaves, read from its partial tiles."""
        levels: list[tuple[bytes, ...]] = []
        level = 0
        while size >= WIDTH**level:
            width = (size // WIDTH**level) % WIDTH
            n = size // WIDTH ** (level + 1)
            hashes: tuple[bytes, ...] = ()
            if width:
                hashes = tuple(split_hashes(_get(store, tile_key(prefix, level, n, width))))
                if len(hashes) != width:
                    raise TransparencyLogError(f"tile {level}/{n}.p/{width} holds {len(hashes)} hashes")
            levels.append(hashes)
            level += 1
        entries: tuple[bytes, ...] = ()
        width = size % WIDTH
        if width:
            entries = tuple(decode_bundle(_get(store, entries_key(prefix, size // WIDTH, width))))
            if len(entries) != width:
                raise TransparencyLogError(
                    f"entry bundle {size // WIDTH}.p/{width} holds {len(entries)} leaves"
                )
        return cls(size, _trim(levels), entries)

    def extend(self, leaves: Sequence[bytes]) -> tuple[Frontier, dict[str, bytes], list[str]]:
        """``(new frontier, {key: bytes} to write, keys in write order)``: full tiles and bundles first,
        lowest level first, then the partial tiles of the new size."""
        objects: dict[str, bytes] = {}
        order: list[str] = []
        levels = [list(hashes) for hashes in self.levels]
        entries = list(self.entries)
        size = self.size
        full: list[tuple[str, bytes]] = []

        def push(level: int, value: bytes, position: int) -> None:
            while len(levels) <= level:
                levels.append([])
            levels[level].append(value)
            if len(levels[level]) == WIDTH:
                tile = levels[level]
                n = position // WIDTH ** (level + 1)
                full.append((f"{level}/{n}", b"".join(tile)))
                levels[level] = []
                push(level + 1, perfect_root(tile), position)

        for leaf in leaves:
            entries.append(leaf)
            push(0, leaf_hash(leaf), size)
            size += 1
            if len(entries) == WIDTH:
                full.append((f"entries/{(size - 1) // WIDTH}", _bundle(entries)))
                entries = []
        for name, body in full:
            objects[name] = body
            order.append(name)
        new = Frontier(size, _trim([tuple(h) for h in levels]), tuple(entries))
        for level, hashes in enumerate(new.levels):
            if hashes and (level >= len(self.levels) or hashes != self.levels[level]):
                name = f"{level}/{size // WIDTH ** (level + 1)}.p/{len(hashes)}"
                objects[name] = b"".join(hashes)
                order.append(name)
        if new.entries and new.entries != self.entries:
            name = f"entries/{size // WIDTH}.p/{len(new.entries)}"
            objects[name] = _bundle(list(new.entries))
            order.append(name)
        return new, objects, order

    def root(self) -> bytes:
        """The RFC 6962 root of the tree: the perfect subtrees of the size's binary decomposition,
        largest first, folded from the right."""
        if not self.size:
            return hashlib.sha256(b"").digest()
        peaks: list[bytes] = []
        for level in range(len(self.levels) - 1, -1, -1):
            hashes = self.levels[level]
            at = 0
            for bit in range(7, -1, -1):
                if len(hashes) & (1 << bit):
                    peaks.append(perfect_root(hashes[at : at + (1 << bit)]))
                    at += 1 << bit
        root = peaks[-1]
        for peak in reversed(peaks[:-1]):
            root = node_hash(peak, root)
        return root


def object_key(prefix: str, name: str) -> str:
    """The blob key of a tile named ``<L>/<N>[.p/<W>]`` or ``entries/<N>[.p/<W>]`` by :meth:`Frontier.extend`."""
    head, _, rest = name.partition("/")
    number, _, width = rest.partition(".p/")
    w = int(width) if width else WIDTH
    if head == "entries":
        return entries_key(prefix, int(number), w)
    return tile_key(prefix, int(head), int(number), w)


def _bundle(leaves: list[bytes]) -> bytes:
    return encode_bundle(leaves)


def _trim(levels: Sequence[tuple[bytes, ...]]) -> tuple[tuple[bytes, ...], ...]:
    out = list(levels)
    while out and not out[-1]:
        out.pop()
    return tuple(out)


def _get(store: BlobStore, key: str) -> bytes:
    try:
        return store.get(key)
    except BlobNotFound as exc:
        raise TransparencyLogError(f"the log is missing {key}: its tiles do not match the index") from exc

"""Blob segments: many captures in one object, each readable on its own.

A segment is a plain concatenation of independently zstd-compressed frames, one frame per capture
(frame = zstd(Avro single-object bytes), with zstd's content checksum so a flipped byte is caught at
decompression). The index stores each capture's ``(segment key, byte offset, length)``; reading one
capture back is one range GET plus one decompress, and expiring a whole segment is one delete.

Keys are deterministic::

    segments/<class>/<topic>/<partition>/<first_offset:019d>-<digest>.seg

``partition`` is the Kafka partition as ``%04d`` (or the spool file name in embedded mode) and
``first_offset`` the offset of the segment's first frame. ``digest`` is a short hash of the segment
bytes: a redelivered batch with the same frames writes the same key (the PUT overwrites, nothing is
duplicated), while a *differently composed* batch starting at the same offset - a zombie consumer
after a rebalance, a smaller redelivered batch - gets its own object instead of overwriting bytes that
index rows written by the other writer may already point into.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

import zstandard

from producers.transports.base import partition_label
from schemas.errors import BlobStoreError

if TYPE_CHECKING:
    from producers.blobstore import BlobStore

SEGMENT_PREFIX = "segments"
SEGMENT_SUFFIX = ".seg"
DEFAULT_LEVEL = 3
_DIGEST_BYTES = 8
_FRAME_HEADER_MAX = 18  # ZSTD_FRAMEHEADERSIZE_MAX
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


class SegmentCorrupt(BlobStoreError):
    """The bytes at a segment range are not one intact zstd frame (truncated, tampered or misaddressed)."""

    def __init__(self, message: str, *, key: str, offset: int, length: int) -> None:
        self.key = key
        self.offset = offset
        self.length = length
        self.reason = message
        super().__init__(f"segment {key} [{offset}, +{length}): {message}")


@dataclass(frozen=True, slots=True)
class FrameLocation:
    """Where one capture lives: the index stores exactly these three values."""

    key: str
    offset: int
    length: int


def segment_prefix(*, retention_class: str, topic: str, partition: int | str) -> str:
    """The folder all segments of one class/topic/partition share (for listing and lifecycle rules)."""
    return f"{SEGMENT_PREFIX}/{retention_class}/{_SAFE.sub('_', topic)}/{partition_label(partition)}/"


def segment_key(
    *, retention_class: str, topic: str, partition: int | str, first_offset: int, digest: str
) -> str:
    """The deterministic object key of a segment (see the module docstring)."""
    if first_offset < 0:
        raise ValueError(f"first_offset must be >= 0, got {first_offset}")
    prefix = segment_prefix(retention_class=retention_class, topic=topic, partition=partition)
    return f"{prefix}{first_offset:019d}-{digest}{SEGMENT_SUFFIX}"


class SegmentWriter:
    """Packs captures of one retention class into one segment body.

    ``append`` compresses a capture into its own frame and returns the frame's offset and length;
    ``finish`` fixes the key (it depends on the bytes) and returns it with the body. Frames are only
    addressable once the key is known, hence :meth:`locations`.
    """

    def __init__(
        self,
        *,
        retention_class: str,
        topic: str,
        partition: int | str,
        first_offset: int,
        level: int = DEFAULT_LEVEL,
    ) -> None:
        self.retention_class = retention_class
        self.topic = topic
        self.partition = partition
        self.first_offset = first_offset
        self._compressor = zstandard.ZstdCompressor(level=level, write_checksum=True, write_content_size=True)
        self._frames: list[bytes] = []
        self._spans: list[tuple[int, int]] = []
        self._size = 0
        self._key: str | None = None

    def __len__(self) -> int:
        return len(self._frames)

    @property
    def size(self) -> int:
        """Compressed bytes so far."""
        return self._size

    def append(self, capture_bytes: bytes) -> int:
        """Compress one capture into a frame; returns the frame's index within the segment."""
        return self.append_frame(self._compressor.compress(capture_bytes))

    def append_frame(self, frame: bytes) -> int:
        """Add a frame compressed elsewhere (a worker process) with the same settings."""
        if self._key is not None:
            raise RuntimeError("segment already finished")
        self._spans.append((self._size, len(frame)))
        self._frames.append(frame)
        self._size += len(frame)
        return len(self._frames) - 1

    def finish(self) -> tuple[str, bytes]:
        """The segment's key and body; the writer accepts no more frames afterwards."""
        body = b"".join(self._frames)
        if self._key is None:
            digest = hashlib.blake2b(body, digest_size=_DIGEST_BYTES).hexdigest()
            self._key = segment_key(
                retention_class=self.retention_class,
                topic=self.topic,
                partition=self.partition,
                first_offset=self.first_offset,
                digest=digest,
            )
        return self._key, body

    def locations(self) -> list[FrameLocation]:
        """One location per appended frame, in order (call after :meth:`finish`)."""
        if self._key is None:
            raise RuntimeError("call finish() before locations()")
        key = self._key
        return [FrameLocation(key, offset, length) for offset, length in self._spans]


_DECOMPRESSOR = zstandard.ZstdDecompressor()


def decompress_frame(frame: bytes, *, key: str = "", offset: int = 0) -> bytes:
    """Decompress exactly one frame; anything else (trailing bytes, a bad checksum) is :class:`SegmentCorrupt`."""
    try:
        params = zstandard.get_frame_parameters(frame)
        out = _DECOMPRESSOR.decompressobj()
        data = out.decompress(frame)
    except zstandard.ZstdError as exc:
        raise SegmentCorrupt(str(exc), key=key, offset=offset, length=len(frame)) from exc
    if not out.eof:
        raise SegmentCorrupt("frame is truncated", key=key, offset=offset, length=len(frame))
    if out.unused_data:
        raise SegmentCorrupt(
            f"{len(out.unused_data)} bytes after the frame", key=key, offset=offset, length=len(frame)
        )
    if params.content_size not in (zstandard.CONTENTSIZE_UNKNOWN, len(data)):
        raise SegmentCorrupt("content size does not match", key=key, offset=offset, length=len(frame))
    return data


def read_capture(
    store: BlobStore, key: str, offset: int, length: int, *, version_id: str | None = None
) -> bytes:
    """The Avro bytes of one capture: one range GET of ``[offset, offset+length)`` (of ``version_id``,
    when given) and one decompress."""
    frame = (
        store.get(key, offset=offset, length=length)
        if version_id is None
        else store.get(key, offset=offset, length=length, version_id=version_id)
    )
    if len(frame) != length:
        raise SegmentCorrupt(f"range GET returned {len(frame)} bytes", key=key, offset=offset, length=length)
    return decompress_frame(frame, key=key, offset=offset)


def frame_length(body: bytes | memoryview, pos: int = 0) -> int:
    """Compressed length of the zstd frame starting at ``pos``, from its block headers (no decompression)."""
    view = memoryview(body)
    try:
        params = zstandard.get_frame_parameters(view[pos : pos + _FRAME_HEADER_MAX])
        cursor = pos + zstandard.frame_header_size(view[pos : pos + _FRAME_HEADER_MAX])
    except zstandard.ZstdError as exc:
        raise SegmentCorrupt(str(exc), key="", offset=pos, length=len(view) - pos) from exc
    while True:
        if cursor + 3 > len(view):
            raise SegmentCorrupt("frame is truncated", key="", offset=pos, length=len(view) - pos)
        header = int.from_bytes(view[cursor : cursor + 3], "little")
        last, block_type, block_size = header & 1, (header >> 1) & 3, header >> 3
        cursor += 3 + (1 if block_type == 1 else block_size)  # an RLE block stores one byte
        if last:
            break
    return cursor + (4 if params.has_checksum else 0) - pos


def iter_frames(body: bytes, *, key: str = "") -> Iterator[tuple[FrameLocation, bytes]]:
    """Walk a whole segment body frame by frame: ``(location, capture bytes)``.

    Used by compaction and repair tools that read a segment end to end rather than through the index.
    """
    view = memoryview(body)
    pos = 0
    while pos < len(view):
        try:
            length = frame_length(view, pos)
        except SegmentCorrupt as exc:
            raise SegmentCorrupt("bad frame header", key=key, offset=pos, length=exc.length) from exc
        if pos + length > len(view):
            raise SegmentCorrupt("frame is truncated", key=key, offset=pos, length=len(view) - pos)
        yield (
            FrameLocation(key, pos, length),
            decompress_frame(bytes(view[pos : pos + length]), key=key, offset=pos),
        )
        pos += length

"""Segments, the storage room's format: frames are independently readable, keys are deterministic,
corruption is caught."""

from __future__ import annotations

import os
import random

import pytest

from consumers.storage.segments import (
    FrameLocation,
    SegmentCorrupt,
    SegmentWriter,
    decompress_frame,
    frame_length,
    iter_frames,
    partition_label,
    read_capture,
    segment_key,
)
from producers.blobstore import LocalBlobStore


def _writer(**kw: object) -> SegmentWriter:
    args: dict[str, object] = {
        "retention_class": "routine",
        "topic": "blackbox.captures.v1",
        "partition": 3,
        "first_offset": 42,
    }
    args.update(kw)
    return SegmentWriter(**args)  # type: ignore[arg-type]


def test_key_format_is_deterministic() -> None:
    key = segment_key(
        retention_class="consequential",
        topic="blackbox.captures.v1",
        partition=7,
        first_offset=12,
        digest="ab",
    )
    assert key == "segments/consequential/blackbox.captures.v1/0007/0000000000000000012-ab.seg"
    assert partition_label("20260723-000001.avro") == "20260723-000001.avro"
    assert partition_label("a b/c") == "a_b_c"


def test_same_frames_same_key_different_frames_different_key() -> None:
    a, b, c = _writer(), _writer(), _writer()
    for w in (a, b):
        w.append(b"one")
        w.append(b"two")
    c.append(b"one")
    assert a.finish() == b.finish()
    assert a.finish()[0] != c.finish()[0]
    assert a.finish()[0].startswith("segments/routine/blackbox.captures.v1/0003/0000000000000000042-")


def test_every_frame_reads_back_alone(tmp_path: object) -> None:
    rng = random.Random(5)
    payloads = [os.urandom(rng.randint(0, 5000)) + b"x" * rng.randint(0, 200_000) for _ in range(30)] + [b""]
    writer = _writer()
    for p in payloads:
        writer.append(p)
    key, body = writer.finish()
    store = LocalBlobStore(str(tmp_path))
    store.put(key, body)
    locations = writer.locations()
    assert [loc.key for loc in locations] == [key] * len(payloads)
    for loc, payload in zip(locations, payloads, strict=True):
        assert read_capture(store, loc.key, loc.offset, loc.length) == payload
        assert frame_length(body, loc.offset) == loc.length
    walked = list(iter_frames(body, key=key))
    assert [loc for loc, _ in walked] == locations
    assert [data for _, data in walked] == payloads


def test_corruption_is_caught() -> None:
    writer = _writer()
    writer.append(b"hello world " * 1000)
    writer.append(b"second")
    _, body = writer.finish()
    loc = writer.locations()[0]
    frame = bytearray(body[loc.offset : loc.offset + loc.length])
    frame[len(frame) // 2] ^= 0xFF
    with pytest.raises(SegmentCorrupt):
        decompress_frame(bytes(frame))
    with pytest.raises(SegmentCorrupt):
        decompress_frame(body[: loc.length - 3])  # truncated
    with pytest.raises(SegmentCorrupt):
        decompress_frame(body)  # two frames: bytes after the first
    with pytest.raises(SegmentCorrupt):
        list(iter_frames(body[:-2]))


def test_writer_refuses_appends_after_finish() -> None:
    writer = _writer()
    writer.append(b"x")
    writer.finish()
    with pytest.raises(RuntimeError):
        writer.append(b"y")
    assert writer.locations() == [FrameLocation(writer.finish()[0], 0, writer.size)]

"""Replay from where ingest stores captures: index row → segment range GET → zstd frame → JSON form."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from replay_servers import GOLDEN

from consumers.index import ChdbIndex, decision_rows
from consumers.ingest import manifest_json
from consumers.ingest.store import insert_captures, update_decisions
from consumers.replay import ContentAbsent, IndexedCaptureSource, Replayer
from consumers.storage.segments import SegmentWriter
from producers.blobstore import BlobStore, LocalBlobStore, S3BlobStore
from schemas.codec import encode_capture


def _ingest(index: ChdbIndex, store: BlobStore, captures: list[dict[str, Any]]) -> None:
    """What ingest does, minimally: one segment of zstd frames, one index row per capture."""
    writer = SegmentWriter(
        retention_class="consequential", topic="blackbox.captures.v1", partition=0, first_offset=0
    )
    encoded = [encode_capture(c) for c in captures]
    for data in encoded:
        writer.append(data)
    key, body = writer.finish()
    store.put(key, body)
    rows = [
        decision_rows(
            capture,
            segment_key=location.key,
            segment_offset=location.offset,
            segment_length=location.length,
            capture_bytes=len(data),
            content_sha256="sha256:" + hashlib.sha256(data).hexdigest(),
            manifest_json=manifest_json(capture),
        )
        for capture, data, location in zip(captures, encoded, writer.locations(), strict=True)
    ]
    insert_captures(index, rows)


def _goldens() -> list[dict[str, Any]]:
    return [
        json.loads((GOLDEN / n).read_text(encoding="utf-8"))
        for n in ("replay-identical.json", "replay-diverging.json")
    ]


def _check_source(
    make_replayer: Callable[..., Replayer], index: ChdbIndex, source: IndexedCaptureSource
) -> None:
    replayer = make_replayer(source=source)
    result = replayer.replay("dec_golden_identical")
    assert result.verified and not result.compared_to_original().changed  # type: ignore[union-attr]
    assert sorted(source.sample(since=None, agent="agt_support_1", n=10)) == [
        "dec_golden_diverging",
        "dec_golden_identical",
    ]

    update_decisions(index, ["dec_golden_identical"], {"content_state": "metadata-only", "segment_key": ""})
    with pytest.raises(ContentAbsent, match="metadata-only"):
        replayer.replay("dec_golden_identical")  # the manifest still verifies; the content is gone
    assert source.sample(since=None, agent=None, n=10) == ["dec_golden_diverging"]


def test_replay_from_local_segments(
    make_replayer: Callable[..., Replayer], index: ChdbIndex, tmp_path: Path
) -> None:
    store = LocalBlobStore(tmp_path / "blobs")
    _ingest(index, store, _goldens())
    _check_source(make_replayer, index, IndexedCaptureSource(index, store))


@pytest.mark.minio
def test_replay_from_minio_segments(
    make_replayer: Callable[..., Replayer], index: ChdbIndex, minio_config: dict[str, Any]
) -> None:
    store = S3BlobStore(**minio_config)
    _ingest(index, store, _goldens())
    _check_source(make_replayer, index, IndexedCaptureSource(index, store))

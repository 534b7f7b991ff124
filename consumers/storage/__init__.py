"""Storage: where captures rest and how one is read back intact. Ingest writes it, retention rewrites
it, replay, ``show`` and ``verify`` read it; it imports none of them.

- :mod:`~consumers.storage.segments` — the segment format: zstd frames, deterministic keys, ``read_capture``
- :mod:`~consumers.storage.reader` — one capture by decision id: row → range GET → hash check → decode
- :mod:`~consumers.storage.store` — the SQL: a decision's current row, quarantine rows, child rows
- the blob store itself (:func:`open_blob_store` from settings) is :mod:`producers.blobstore`, which
  the SDK's claim check needs as well; the services open it from here.
"""

from consumers.storage.reader import (
    SegmentMissing,
    StoredCapture,
    StoredCaptureMismatch,
    load_capture,
    read_stored,
)
from consumers.storage.segments import FrameLocation, SegmentCorrupt, SegmentWriter, read_capture, segment_key
from producers.blobstore import BlobStore, open_blob_store

__all__ = [
    "BlobStore",
    "FrameLocation",
    "SegmentCorrupt",
    "SegmentMissing",
    "SegmentWriter",
    "StoredCapture",
    "StoredCaptureMismatch",
    "load_capture",
    "open_blob_store",
    "read_capture",
    "read_stored",
    "segment_key",
]

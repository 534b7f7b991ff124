"""Ingest: topic (or local spool) → decode, verify, dedup → blob segments + index rows → commit.

What ingest reads (the ``Source`` seam, the Kafka consumer group, the spool with its checkpoint) and
where dead letters go are the transport backend's: :mod:`producers.transports`.

Module map (one concept each):

- :mod:`~consumers.ingest.segments` — segment format, deterministic keys, ``read_capture``
- :mod:`~consumers.ingest.classify` — retention class and expiry
- :mod:`~consumers.ingest.dlq` — dead-letter reasons and ``DlqLimit`` (when to stop instead)
- :mod:`~consumers.ingest.prepare` — per-message CPU work (decode, verify, frame, rows), inline or in workers
- :mod:`~consumers.ingest.batch` — one batch: prepared messages → dedup → segments → rows → DLQ
- :mod:`~consumers.ingest.flags` — flag events: verify, apply early flags, upgrade indexed decisions
- :mod:`~consumers.ingest.loop` — consume → process → commit, retries, ``--drain``, fault hooks
- :mod:`~consumers.ingest.service` — settings → a running ingest (``signals``: graceful stop)
- :mod:`~consumers.ingest.show` / :mod:`~consumers.ingest.verify_stored` — read one capture back
- :mod:`~consumers.ingest.verdict` — the read-time verdict of ``show``/``verify`` and their exit codes
"""

from consumers.ingest.batch import BatchProcessor, BatchResult
from consumers.ingest.classify import Retention, classify, retention_class
from consumers.ingest.dlq import DlqLimit, DlqLimitExceeded
from consumers.ingest.loop import IngestLoop, LoopConfig, LoopStats
from consumers.ingest.prepare import Prepared, PreparePool, manifest_json, prepare
from consumers.ingest.segments import FrameLocation, SegmentCorrupt, SegmentWriter, read_capture, segment_key
from consumers.ingest.service import IngestService, build_service
from consumers.ingest.show import SegmentMissing, ShownCapture, StoredCaptureMismatch, load_capture
from consumers.ingest.verdict import Verdict
from consumers.ingest.verify_stored import (
    IndexRowMismatch,
    StoredVerification,
    judge_shown,
    stored_verdict,
    verify_stored,
)

__all__ = [
    "BatchProcessor",
    "BatchResult",
    "DlqLimit",
    "DlqLimitExceeded",
    "FrameLocation",
    "IndexRowMismatch",
    "IngestLoop",
    "IngestService",
    "LoopConfig",
    "LoopStats",
    "PreparePool",
    "Prepared",
    "Retention",
    "SegmentCorrupt",
    "SegmentMissing",
    "SegmentWriter",
    "ShownCapture",
    "StoredCaptureMismatch",
    "StoredVerification",
    "Verdict",
    "build_service",
    "classify",
    "judge_shown",
    "load_capture",
    "manifest_json",
    "prepare",
    "read_capture",
    "retention_class",
    "segment_key",
    "stored_verdict",
    "verify_stored",
]

"""Ingest: topic (or local spool) → decode, verify, dedup → blob segments + index rows → commit.

Module map (one concept each):

- :mod:`~consumers.ingest.source` — the source seam (``SourceMessage``, ``Source``)
- :mod:`~consumers.ingest.consumer` — Kafka consumer group source, manual synchronous commits
- :mod:`~consumers.ingest.spool_source` — the embedded spool source with a durable checkpoint
- :mod:`~consumers.ingest.segments` — segment format, deterministic keys, ``read_capture``
- :mod:`~consumers.ingest.classify` — retention class and expiry
- :mod:`~consumers.ingest.dlq` — dead letters (Kafka topic or directory) and ``DlqLimit``
- :mod:`~consumers.ingest.prepare` — per-message CPU work (decode, verify, frame, rows), inline or in workers
- :mod:`~consumers.ingest.batch` — one batch: prepared messages → dedup → segments → rows → DLQ
- :mod:`~consumers.ingest.flags` — flag events: verify, apply early flags, upgrade indexed decisions
- :mod:`~consumers.ingest.loop` — consume → process → commit, retries, ``--drain``, fault hooks
- :mod:`~consumers.ingest.service` — settings → a running ingest (``signals``: graceful stop)
- :mod:`~consumers.ingest.show` / :mod:`~consumers.ingest.verify_stored` — read one capture back
"""

from consumers.ingest.batch import BatchProcessor, BatchResult
from consumers.ingest.classify import Retention, classify, retention_class
from consumers.ingest.dlq import DeadLetter, DlqLimit, DlqLimitExceeded, KafkaDeadLetters, LocalDeadLetters
from consumers.ingest.loop import IngestLoop, LoopConfig, LoopStats
from consumers.ingest.prepare import Prepared, PreparePool, manifest_json, prepare
from consumers.ingest.segments import FrameLocation, SegmentCorrupt, SegmentWriter, read_capture, segment_key
from consumers.ingest.service import IngestService, build_service
from consumers.ingest.show import ShownCapture, StoredCaptureMismatch, load_capture
from consumers.ingest.source import Source, SourceMessage
from consumers.ingest.verify_stored import IndexRowMismatch, StoredVerification, verify_stored

__all__ = [
    "BatchProcessor",
    "BatchResult",
    "DeadLetter",
    "DlqLimit",
    "DlqLimitExceeded",
    "FrameLocation",
    "IndexRowMismatch",
    "IngestLoop",
    "IngestService",
    "KafkaDeadLetters",
    "LocalDeadLetters",
    "LoopConfig",
    "LoopStats",
    "PreparePool",
    "Prepared",
    "Retention",
    "SegmentCorrupt",
    "SegmentWriter",
    "ShownCapture",
    "Source",
    "SourceMessage",
    "StoredCaptureMismatch",
    "StoredVerification",
    "build_service",
    "classify",
    "load_capture",
    "manifest_json",
    "prepare",
    "read_capture",
    "retention_class",
    "segment_key",
    "verify_stored",
]

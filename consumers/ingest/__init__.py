"""Ingest: topic (or local spool) → decode, verify, dedup → blob segments + index rows → commit.

What ingest reads (the ``Source`` seam, the Kafka consumer group, the spool with its checkpoint) and
where dead letters go are the transport backend's: :mod:`producers.transports`. What it writes (the
segment format) and how a capture is read back are :mod:`consumers.storage`'s; the read-time verdict
of ``show``/``verify`` is :mod:`consumers.verify`'s.

Module map (one concept each):

- :mod:`~consumers.ingest.classify` — retention class and expiry
- :mod:`~consumers.ingest.dlq` — dead-letter reasons and ``DlqLimit`` (when to stop instead)
- :mod:`~consumers.ingest.prepare` — per-message CPU work (decode, verify, frame, rows), inline or in workers
- :mod:`~consumers.ingest.batch` — one batch: prepared messages → dedup → segments → rows → DLQ
- :mod:`~consumers.ingest.flags` — flag events: verify, apply early flags, upgrade indexed decisions
- :mod:`~consumers.ingest.pacts` — pact verdicts of a batch: flag violations, ``pact_violations`` rows
- :mod:`~consumers.ingest.loop` — consume → process → commit, retries, ``--drain``, fault hooks
- :mod:`~consumers.ingest.service` — settings → a running ingest (``signals``: graceful stop)
"""

from consumers.ingest.batch import BatchProcessor, BatchResult
from consumers.ingest.classify import Retention, classify, retention_class
from consumers.ingest.dlq import DlqLimit, DlqLimitExceeded
from consumers.ingest.loop import IngestLoop, LoopConfig, LoopStats
from consumers.ingest.prepare import Prepared, PreparePool, manifest_json, prepare
from consumers.ingest.service import IngestService, build_service

__all__ = [
    "BatchProcessor",
    "BatchResult",
    "DlqLimit",
    "DlqLimitExceeded",
    "IngestLoop",
    "IngestService",
    "LoopConfig",
    "LoopStats",
    "PreparePool",
    "Prepared",
    "Retention",
    "build_service",
    "classify",
    "manifest_json",
    "prepare",
    "retention_class",
]

"""Every metric blackbox exports, defined once (the ingest service and the compaction job share this).

Two registries, so each process exports only what it does: :data:`INGEST_REGISTRY` is served by
``blackbox consume --metrics-listen`` (with the standard ``process_*`` / ``python_*`` collectors),
:data:`COMPACTION_REGISTRY` is written by ``blackbox compact --metrics-textfile`` for the node-exporter
textfile collector.

Worker processes (``consume --workers N``) only decode and verify; every count below is taken in the
consumer's own process from the batch results, so one registry is exact and prometheus-client's
multiprocess mode is not needed.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    write_to_textfile,
)

from schemas.errors import BlackboxError

__all__ = [
    "BATCH_RETRIES",
    "BATCH_SECONDS",
    "COMMIT_FAILURES",
    "COMMIT_LAG",
    "COMPACTION_DELETIONS",
    "COMPACTION_DURATION",
    "COMPACTION_ERRORS",
    "COMPACTION_LAST_RUN",
    "COMPACTION_REGISTRY",
    "CONSUMED",
    "DEAD_LETTERED",
    "DEDUPLICATED",
    "INDEXED",
    "INGEST_REGISTRY",
    "LAST_POLL",
    "QUARANTINED",
    "WITNESS_COSIGNED_SIZE",
    "MetricsError",
    "count_deletions",
    "deletion_kind",
    "finish_compaction_run",
    "write_textfile",
]


class MetricsError(BlackboxError):
    """Metrics could not be exported (a textfile that cannot be written, an endpoint that cannot listen)."""


# --- the ingest service ---------------------------------------------------------------------------------
INGEST_REGISTRY = CollectorRegistry()
for _collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
    INGEST_REGISTRY.register(_collector)

CONSUMED = Counter(
    "blackbox_ingest_consumed",
    "Messages taken from the topic or spool and processed.",
    registry=INGEST_REGISTRY,
)
INDEXED = Counter(
    "blackbox_ingest_indexed",
    "Verified captures written to segments and the index.",
    registry=INGEST_REGISTRY,
)
DEDUPLICATED = Counter(
    "blackbox_ingest_deduplicated",
    "Captures skipped because the same decision with the same bytes was already indexed (redelivery).",
    registry=INGEST_REGISTRY,
)
QUARANTINED = Counter(
    "blackbox_ingest_quarantined",
    "Captures and flags quarantined (failed verification, or the same decision id with other content).",
    registry=INGEST_REGISTRY,
)
DEAD_LETTERED = Counter(
    "blackbox_ingest_dead_lettered",
    "Messages sent to the dead-letter topic or directory.",
    registry=INGEST_REGISTRY,
)
BATCH_RETRIES = Counter(
    "blackbox_ingest_batch_retries",
    "Batch attempts that failed on a sink (blob store, index, DLQ) and were retried.",
    registry=INGEST_REGISTRY,
)
COMMIT_FAILURES = Counter(
    "blackbox_ingest_commit_failures",
    "Offset commits that failed (kept and retried with the next commit).",
    registry=INGEST_REGISTRY,
)
COMMIT_LAG = Gauge(
    "blackbox_ingest_commit_lag",
    "Not yet committed, per partition: Kafka messages (high watermark - committed offset), "
    "or published spool files still pending (partition 'spool').",
    ["partition"],
    registry=INGEST_REGISTRY,
)
BATCH_SECONDS = Histogram(
    "blackbox_ingest_batch_seconds",
    "Time from a batch's arrival to its commit (decode, verify, segments, index, commit).",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0),
    registry=INGEST_REGISTRY,
)
LAST_POLL = Gauge(
    "blackbox_ingest_last_poll_timestamp_seconds",
    "Unix time of the loop's last poll of the source.",
    registry=INGEST_REGISTRY,
)
WITNESS_COSIGNED_SIZE = Gauge(
    "blackbox_tlog_witness_cosigned_size",
    "Tree size of the log's last checkpoint each witness cosigned (DESIGN 24).",
    ["witness"],
    registry=INGEST_REGISTRY,
)

# --- the compaction job ---------------------------------------------------------------------------------
COMPACTION_REGISTRY = CollectorRegistry()

COMPACTION_DELETIONS = Counter(
    "blackbox_compaction_deletions",
    "Deletions in this run, by kind: segment / claim / orphan (a blob, counted when its deletion is "
    "confirmed), compact (a decision's content), expire (a decision's record), quarantine-expire "
    "(a quarantined capture's bytes).",
    ["kind"],
    registry=COMPACTION_REGISTRY,
)
COMPACTION_ERRORS = Gauge(
    "blackbox_compaction_errors",
    "Segments the last run could not process (left alone, named in its output).",
    registry=COMPACTION_REGISTRY,
)
COMPACTION_DURATION = Gauge(
    "blackbox_compaction_duration_seconds", "Duration of the last run.", registry=COMPACTION_REGISTRY
)
COMPACTION_LAST_RUN = Gauge(
    "blackbox_compaction_last_run_timestamp_seconds",
    "Unix time the last run finished (not written by dry runs or runs that failed outright).",
    registry=COMPACTION_REGISTRY,
)

_CONTENT_DELETIONS = frozenset({"compact", "expire"})
_CONFIRMED = "-deleted"
_EXPIRED = "-expire"


def deletion_kind(action: str) -> str | None:
    """The ``kind`` label of a retention-log action that deletes something; None for the others.

    Blob deletions are counted on their confirmation (``segment-deleted``, ``claim-deleted``, ...), once
    done, not on the write-ahead ``delete-*`` entry written before the delete.
    """
    if action in _CONTENT_DELETIONS or action.endswith(_EXPIRED):
        return action
    if action.endswith(_CONFIRMED):
        return action.removesuffix(_CONFIRMED)
    return None


def count_deletions(actions: Iterable[str]) -> None:
    """Count the deletions among retention-log ``actions`` (see :func:`deletion_kind`)."""
    for action in actions:
        kind = deletion_kind(action)
        if kind is not None:
            COMPACTION_DELETIONS.labels(kind=kind).inc()


def finish_compaction_run(*, errors: int, seconds: float) -> None:
    """The gauges of a finished compaction run (its deletions were counted as they were logged)."""
    COMPACTION_ERRORS.set(errors)
    COMPACTION_DURATION.set(seconds)
    COMPACTION_LAST_RUN.set_to_current_time()


def write_textfile(path: Path, registry: CollectorRegistry = COMPACTION_REGISTRY) -> None:
    """``registry`` in the text exposition format at ``path``, atomically: written to a temporary file
    beside it, then renamed (the node-exporter textfile collector reads only ``*.prom`` files)."""
    try:
        write_to_textfile(str(path), registry)
    except OSError as exc:
        raise MetricsError(f"cannot write the metrics textfile {path}: {exc.strerror or exc}") from exc

"""Wiring: the transport's source and dead letters, a blob store, an index, a trust store → one ingest loop.

The source and the dead-letter path are the configured transport backend's
(:func:`producers.transports.open_source` / :func:`~producers.transports.open_dead_letter`):
``transport = "kafka"`` consumes the topic as group ``consumer_group`` and dead-letters to
``dlq_topic``; ``transport = "spool"`` (embedded) reads the local spool, keeps its checkpoint in
``<data_dir>/ingest/spool-checkpoint.json``, writes dead letters under ``<data_dir>/dlq`` and moves
unreadable spool files to ``<spool>/dead-letter/``. The index, the trust store and the retention policy
are the caller's (the runtime, :mod:`consumers.app.runtime`, opens them from the services' settings);
:class:`ReloadingTrust` re-reads the trust store file before a batch whenever it changed, so adding a
key needs no restart. ``fault`` (crash tests only; the setting ``BLACKBOX_FAULT``) is passed in.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from consumers.index import Index
from consumers.ingest.telemetry import IngestTelemetry
from consumers.observability.health import Health
from consumers.pacts.applied import AppliedPacts
from consumers.privacy.identifiers import IdentifierResolver
from consumers.retention.policy import RetentionPolicy, default_policy
from consumers.tlog.log import TransparencyLog
from producers.blobstore import BlobStore, open_blob_store
from producers.evidence import TrustStore
from producers.pacts.expression import Rule
from producers.settings import BlackboxSettings
from producers.transports import DeadLetterSink, Source, open_dead_letter, open_source

from .batch import BatchProcessor
from .dlq import DlqLimit
from .loop import IngestLoop, LoopConfig, LoopStats, kill_at

logger = logging.getLogger(__name__)


def parse_kafka_options(options: list[str] | tuple[str, ...]) -> dict[str, str] | None:
    """``["key=value", ...]`` (CLI ``--kafka-option``) as a librdkafka config dict."""
    config: dict[str, str] = {}
    for option in options:
        key, sep, value = option.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--kafka-option wants KEY=VALUE, got {option!r}")
        config[key.strip()] = value.strip()
    return config or None


class ReloadingTrust:
    """The trust store file, re-read when its modification time or size changes."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._stamp: tuple[int, int] | None = None
        self._store = TrustStore()
        self()

    def __call__(self) -> TrustStore:
        try:
            st = self.path.stat()
            stamp = (st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            stamp = (0, -1)
        if stamp != self._stamp:
            if stamp[1] < 0:
                logger.warning(
                    "no trust store at %s: every capture will be quarantined (KeyNotTrusted)", self.path
                )
            self._store = TrustStore.load(self.path, missing_ok=True)
            self._stamp = stamp
        return self._store


@dataclass
class IngestService:
    """A running ingest: call :meth:`run`, then :meth:`close` (also a context manager). The index is
    the caller's to close."""

    loop: IngestLoop
    source: Source
    processor: BatchProcessor
    index: Index
    store: BlobStore
    dead_letters: DeadLetterSink
    telemetry: IngestTelemetry | None = None
    """Metrics and health of the loop (served by ``blackbox consume --metrics-listen``)."""

    def run(self, *, drain: bool = False, max_batches: int | None = None) -> LoopStats:
        """Run the loop; then sign a checkpoint over what it appended to the transparency log."""
        stats = self.loop.run(drain=drain, max_batches=max_batches)
        if self.processor.tlog is not None:
            self.processor.tlog.publish()
        return stats

    def stop(self) -> None:
        self.loop.stop()

    def close(self) -> None:
        """Release everything, each step even if an earlier one failed."""
        steps = [self.source.close, self.processor.close, self.dead_letters.close]
        error: BaseException | None = None
        for step in steps:
            try:
                step()
            except Exception as exc:  # keep closing the rest; re-raise the first failure
                error = error or exc
        if error is not None:
            raise error

    def __enter__(self) -> IngestService:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def build_service(
    settings: BlackboxSettings,
    *,
    index: Index,
    trust: TrustStore | ReloadingTrust,
    batch_size: int = 500,
    max_wait: float = 1.0,
    fault: str | None = None,
    store: BlobStore | None = None,
    kafka_config: dict[str, Any] | None = None,
    dlq_limit: DlqLimit | None = None,
    policy: RetentionPolicy | None = None,
    loop_config: LoopConfig | None = None,
    workers: int = 0,
    telemetry: IngestTelemetry | None = None,
    pacts: Sequence[Rule] | Callable[[], AppliedPacts] = (),
    tlog: TransparencyLog | None = None,
    index_id_key: bytes | None = None,
    identifiers: IdentifierResolver | None = None,
) -> IngestService:
    """An :class:`IngestService` reading the transport ``settings`` name into ``index`` (the caller
    closes it), verifying against ``trust``; ``store`` defaults to the settings' blob store and
    ``policy`` to the packaged retention policy.

    ``workers`` > 0 decodes and verifies in that many worker processes (see
    :mod:`consumers.ingest.prepare`); 0 does it inline. ``telemetry`` defaults to one feeding the
    process's ingest metrics, with a health check that goes stale after ``max(30, 10 x max_wait)`` s.
    ``pacts`` are evaluated on every verified capture (:mod:`consumers.pacts`); ``tlog`` gets a leaf
    per indexed capture (:mod:`consumers.tlog`). ``index_id_key`` hashes origin ids in index rows
    (:mod:`consumers.privacy.ids`; None: raw); ``identifiers`` opens the raw ids behind commitments
    so they are hashed like any other (:mod:`consumers.privacy.identifiers`).
    """
    hook = kill_at(fault)
    store = store or open_blob_store(settings)
    dead_letters = open_dead_letter(settings)
    source = open_source(
        settings, config=kafka_config, max_dead_files=(dlq_limit or DlqLimit()).max_consecutive_invalid
    )
    processor = BatchProcessor(
        store=store,
        index=index,
        trust=trust,
        dead_letters=dead_letters,
        dlq_limit=dlq_limit,
        policy=policy if policy is not None else default_policy(),
        workers=workers,
        pacts=pacts,
        tlog=tlog,
        index_id_key=index_id_key,
        identifiers=identifiers,
    )
    config = loop_config or LoopConfig(batch_size=batch_size, max_wait=max_wait)
    if telemetry is None:
        telemetry = IngestTelemetry(
            health=Health(stale_after=max(30.0, 10 * config.max_wait)), lag=source.lag
        )
    loop = IngestLoop(source=source, processor=processor, config=config, hook=hook, observer=telemetry)
    return IngestService(loop, source, processor, index, store, dead_letters, telemetry=telemetry)

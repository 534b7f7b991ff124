"""What a platform team watches: Prometheus metrics, the ingest health check, JSON logs.

- :mod:`.metrics`: every metric blackbox exports, in two registries (the ingest service's, the
  compaction job's);
- :mod:`.health`: is the ingest loop alive (polled recently, last commit succeeded)?
- :mod:`.routes`: ``/metrics``, ``/healthz`` and ``/readyz``, the observability router of the one HTTP
  application (``blackbox serve``, ``blackbox otlp``, ``blackbox consume --metrics-listen``);
- :mod:`.logs`: ``--log-format json`` (one JSON object per line).

The ingest loop's observer that feeds these is ingest's own (:mod:`consumers.ingest.telemetry`).
"""

"""What an agent runtime imports: build a capture, hash, sign, decide its level, emit.

The public names below are re-exported lazily (on first attribute access), so importing a light
module such as :mod:`producers.settings` does not load the codec, the evidence code or Kafka.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from producers.blobstore import BlobStore, LocalBlobStore, S3BlobStore, open_blob_store
    from producers.claimcheck import ClaimChecker, claim_key, resolve_claim_check
    from producers.context import RenderedContext, render_chat_context
    from producers.decision import AgentConfig, DecisionBuilder, ReplayPolicy
    from producers.policy import CaptureLevel, CapturePolicy, strip_content
    from producers.recorder import CaptureFailure, Recorder, RecorderStats
    from producers.settings import BlackboxSettings, load_settings
    from producers.spool import (
        SpoolCheckpoint,
        SpoolPosition,
        SpoolRecord,
        SpoolWriter,
        mark_consumed,
        read_spool,
    )
    from producers.transport import (
        DeliveryFailed,
        KafkaTransport,
        SpoolTransport,
        Transport,
        open_transport,
    )

_EXPORTS: dict[str, str] = {
    "AgentConfig": "producers.decision",
    "BlackboxSettings": "producers.settings",
    "BlobStore": "producers.blobstore",
    "CaptureFailure": "producers.recorder",
    "CaptureLevel": "producers.policy",
    "CapturePolicy": "producers.policy",
    "ClaimChecker": "producers.claimcheck",
    "DecisionBuilder": "producers.decision",
    "DeliveryFailed": "producers.transport",
    "KafkaTransport": "producers.transport",
    "LocalBlobStore": "producers.blobstore",
    "Recorder": "producers.recorder",
    "RecorderStats": "producers.recorder",
    "RenderedContext": "producers.context",
    "ReplayPolicy": "producers.decision",
    "S3BlobStore": "producers.blobstore",
    "SpoolCheckpoint": "producers.spool",
    "SpoolPosition": "producers.spool",
    "SpoolRecord": "producers.spool",
    "SpoolTransport": "producers.transport",
    "SpoolWriter": "producers.spool",
    "Transport": "producers.transport",
    "claim_key": "producers.claimcheck",
    "load_settings": "producers.settings",
    "mark_consumed": "producers.spool",
    "open_blob_store": "producers.blobstore",
    "open_transport": "producers.transport",
    "read_spool": "producers.spool",
    "render_chat_context": "producers.context",
    "resolve_claim_check": "producers.claimcheck",
    "strip_content": "producers.policy",
}

__all__ = [
    "AgentConfig",
    "BlackboxSettings",
    "BlobStore",
    "CaptureFailure",
    "CaptureLevel",
    "CapturePolicy",
    "ClaimChecker",
    "DecisionBuilder",
    "DeliveryFailed",
    "KafkaTransport",
    "LocalBlobStore",
    "Recorder",
    "RecorderStats",
    "RenderedContext",
    "ReplayPolicy",
    "S3BlobStore",
    "SpoolCheckpoint",
    "SpoolPosition",
    "SpoolRecord",
    "SpoolTransport",
    "SpoolWriter",
    "Transport",
    "claim_key",
    "load_settings",
    "mark_consumed",
    "open_blob_store",
    "open_transport",
    "read_spool",
    "render_chat_context",
    "resolve_claim_check",
    "strip_content",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'producers' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

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
    from producers.flight import FlightPolicy, FlightStats
    from producers.policy import CaptureLevel, CapturePolicy, strip_content
    from producers.recorder import CaptureFailure, Recorder, RecorderStats
    from producers.settings import BlackboxSettings, load_settings
    from producers.transports import DeliveryFailed, Transport, open_sender
    from producers.transports.kafka.sender import KafkaTransport
    from producers.transports.spool.files import (
        SpoolCheckpoint,
        SpoolPosition,
        SpoolRecord,
        SpoolWriter,
        mark_consumed,
        read_spool,
    )
    from producers.transports.spool.sender import SpoolTransport

_EXPORTS: dict[str, str] = {
    "AgentConfig": "producers.decision",
    "BlackboxSettings": "producers.settings",
    "BlobStore": "producers.blobstore",
    "CaptureFailure": "producers.recorder",
    "CaptureLevel": "producers.policy",
    "CapturePolicy": "producers.policy",
    "ClaimChecker": "producers.claimcheck",
    "DecisionBuilder": "producers.decision",
    "DeliveryFailed": "producers.transports",
    "FlightPolicy": "producers.flight",
    "FlightStats": "producers.flight",
    "KafkaTransport": "producers.transports.kafka.sender",
    "LocalBlobStore": "producers.blobstore",
    "Recorder": "producers.recorder",
    "RecorderStats": "producers.recorder",
    "RenderedContext": "producers.context",
    "ReplayPolicy": "producers.decision",
    "S3BlobStore": "producers.blobstore",
    "SpoolCheckpoint": "producers.transports.spool.files",
    "SpoolPosition": "producers.transports.spool.files",
    "SpoolRecord": "producers.transports.spool.files",
    "SpoolTransport": "producers.transports.spool.sender",
    "SpoolWriter": "producers.transports.spool.files",
    "Transport": "producers.transports",
    "claim_key": "producers.claimcheck",
    "load_settings": "producers.settings",
    "mark_consumed": "producers.transports.spool.files",
    "open_blob_store": "producers.blobstore",
    "open_sender": "producers.transports",
    "read_spool": "producers.transports.spool.files",
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
    "FlightPolicy",
    "FlightStats",
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
    "open_sender",
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

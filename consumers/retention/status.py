"""What ``show`` / ``verify`` say about a decision's content, from its index row.

A compacted decision still answers with its metadata and hashes (``manifest_json``) and still verifies
(the manifest signature); it must say clearly that its content is gone, and why.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from consumers.retention.clock import as_utc

__all__ = ["ContentStatus", "content_status", "manifest_capture"]


@dataclass(frozen=True, slots=True)
class ContentStatus:
    """``state``: full | structured-only | metadata-only | expired. ``present``: content readable from a
    segment. ``verifiable``: a signed manifest is kept. ``message``: one line for people."""

    state: str
    present: bool
    verifiable: bool
    message: str


def _day(value: Any) -> str:
    return as_utc(value).strftime("%Y-%m-%d") if isinstance(value, datetime) else str(value)


def content_status(row: Mapping[str, Any]) -> ContentStatus:
    """The content status of a ``decisions`` row (current version)."""
    state = str(row.get("content_state") or "full")
    has_manifest = bool(row.get("manifest_json"))
    held = " Under legal hold" + (f" ({row['hold_reason']})" if row.get("hold_reason") else "") + "."
    hold_note = held if row.get("legal_hold") else ""
    if state == "expired":
        return ContentStatus(
            state,
            False,
            False,
            f"Expired under the retention policy (retention ended {_day(row.get('expires_at'))}): content, "
            "manifest and hashes deleted; the deletion is in the retention log.",
        )
    if state == "metadata-only":
        return ContentStatus(
            state,
            False,
            has_manifest,
            "Content gone: compacted to metadata-only by the retention policy. The signed manifest and every "
            "content hash are kept, so the record still verifies; it cannot be replayed. Metadata kept until "
            f"{_day(row.get('expires_at'))}.{hold_note}",
        )
    present = bool(row.get("segment_key"))
    if state == "structured-only":
        return ContentStatus(
            state,
            present,
            has_manifest,
            "Structured-only capture: rendered content was never captured (hashes kept)." + hold_note,
        )
    return ContentStatus(state, present, has_manifest, "Full capture: content present." + hold_note)


def manifest_capture(row: Mapping[str, Any]) -> dict[str, Any] | None:
    """The capture's JSON form without content (signature kept) from ``manifest_json``, or None.

    :func:`producers.evidence.verify_capture` accepts it: every content part reports as absent.
    """
    text = row.get("manifest_json")
    if not isinstance(text, str) or not text:
        return None
    value = json.loads(text)
    return value if isinstance(value, dict) else None

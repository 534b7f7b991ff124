"""Retention class and expiry of a capture, decided once at ingest by the retention policy.

The rules live in one place, :mod:`consumers.retention.policy` (a TOML file over the article's
defaults), so ingest and ``blackbox compact`` can never disagree. Three classes, each packed into its
own segments so a whole segment expires together: ``consequential``, ``routine`` (full or sampled
captures of routine turns) and ``structured`` (structured-only captures).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from consumers.retention.policy import RetentionPolicy

RetentionClass = Literal["consequential", "routine", "structured"]
RETENTION_CLASSES: tuple[RetentionClass, ...] = ("consequential", "routine", "structured")


@dataclass(frozen=True, slots=True)
class Retention:
    """The retention decision for one capture.

    ``content_expires_at`` is when the content may be compacted away (``None``: no content to expire);
    ``expires_at`` is when the whole record (metadata and hashes) may be deleted.
    """

    retention_class: RetentionClass
    content_expires_at: datetime | None
    expires_at: datetime
    retention_days: int


def parse_timestamp(value: object) -> datetime | None:
    """An ISO-8601 string as an aware UTC datetime, or ``None`` when it is missing or malformed."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def is_consequential(capture: Mapping[str, Any]) -> bool:
    consequential = capture.get("consequential") or {}
    return bool(consequential.get("flagged"))


def retention_class(capture: Mapping[str, Any]) -> RetentionClass:
    """Which segment family a capture belongs to: the retention policy's answer, never a second copy."""
    from consumers.retention.policy import classify as policy_class

    return policy_class(capture)


def classify(
    capture: Mapping[str, Any],
    *,
    policy: RetentionPolicy,
    force_consequential: bool = False,
) -> Retention:
    """The retention class and expiry times of ``capture`` under ``policy``.

    Windows count from ``capturedAt`` (the decision's own, signed time); a capture without a valid one
    raises ``ContractError`` and is quarantined by the caller. ``force_consequential`` applies a flag
    event that arrived before or with the capture.
    """
    decision = policy.decide(capture, promoted=force_consequential and not is_consequential(capture))
    return Retention(
        retention_class=decision.retention_class,
        content_expires_at=decision.content_expires_at,
        expires_at=decision.expires_at,
        retention_days=decision.retention_days,
    )

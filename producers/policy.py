"""The capture policy (DESIGN decision 5): what level of capture a decision gets.

- ``full`` for a decision flagged consequential;
- ``sampled`` (a full capture) for one routine decision in ``sample_one_in``, chosen
  deterministically from sha256 of the decision id, so anyone can recompute the choice;
- ``structured-only`` for the other routine decisions: the content parts are dropped *after*
  sealing, so every hash field is filled and the signature (over the manifest, which never holds
  content) still verifies. The capture says "content absent", not "tampered".

Retention (how long) is the consumers' policy, not this one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from producers.settings import BlackboxSettings

__all__ = ["CONTENT_FIELDS", "DEFAULT_SAMPLE_ONE_IN", "CaptureLevel", "CapturePolicy", "strip_content"]

CaptureLevel = Literal["full", "structured-only", "sampled"]
DEFAULT_SAMPLE_ONE_IN = 100

# (section, list field or None, content field) of every content part in the JSON form.
CONTENT_FIELDS: tuple[tuple[str, str | None, str], ...] = (
    ("input", None, "requestPayload"),
    ("agentConfiguration", None, "systemPromptText"),
    ("agentConfiguration", None, "toolSchemaJson"),
    ("renderedContext", None, "text"),
    ("memoryState", "workingSetEntries", "renderedContent"),
    ("executionTrace", None, "reasoningTokens"),
    ("executionTrace", "toolCalls", "input"),
    ("executionTrace", "toolCalls", "output"),
    ("executionTrace", "modelCalls", "requestBody"),
    ("executionTrace", "modelCalls", "responseBody"),
    ("executionTrace", None, "finalOutputText"),
    ("externalState", "observableExternals", "capturedValue"),
    ("privacy", None, "sealedOriginal"),  # capture/v3: the original of redacted parts, encrypted
)


@dataclass(frozen=True, slots=True, kw_only=True)
class CapturePolicy:
    """Decide a decision's capture level. ``sample_one_in``: 0 never samples, 1 samples every
    routine decision, N samples one in N."""

    sample_one_in: int = DEFAULT_SAMPLE_ONE_IN

    def __post_init__(self) -> None:
        if self.sample_one_in < 0:
            raise ValueError("sample_one_in must be >= 0")

    @classmethod
    def from_settings(cls, settings: BlackboxSettings) -> CapturePolicy:
        """Read ``capture_sample_one_in`` (env ``BLACKBOX_CAPTURE_SAMPLE_ONE_IN``) when settings carry it."""
        return cls(sample_one_in=int(getattr(settings, "capture_sample_one_in", DEFAULT_SAMPLE_ONE_IN)))

    def is_sampled(self, decision_id: str) -> bool:
        """Whether a routine decision is chosen for full capture: sha256(id) as an integer mod N is 0."""
        if self.sample_one_in == 0:
            return False
        digest = hashlib.sha256(decision_id.encode("utf-8")).digest()
        return int.from_bytes(digest[:8], "big") % self.sample_one_in == 0

    def level(self, *, decision_id: str, consequential: bool) -> CaptureLevel:
        if consequential:
            return "full"
        return "sampled" if self.is_sampled(decision_id) else "structured-only"

    def apply(self, sealed: dict[str, Any]) -> dict[str, Any]:
        """The capture as it is emitted: content stripped when its level is ``structured-only``."""
        return strip_content(sealed) if sealed.get("captureLevel") == "structured-only" else sealed


def _containers(capture: dict[str, Any], section: str, items: str | None) -> Iterator[dict[str, Any]]:
    part = capture.get(section)
    if not isinstance(part, dict):
        return
    if items is None:
        yield part
        return
    for entry in part.get(items) or ():
        if isinstance(entry, dict):
            yield entry


def strip_content(capture: dict[str, Any]) -> dict[str, Any]:
    """A copy of a *sealed* capture with every content part set to null; hash fields untouched.

    Only the containers that change are copied, so this is cheap on the recorder's hot path.
    """
    out = dict(capture)
    copied: dict[int, dict[str, Any]] = {}
    for section, items, field in CONTENT_FIELDS:
        original = capture.get(section)
        if not isinstance(original, dict):
            continue
        sec = copied.get(id(original))
        if sec is None:
            sec = copied[id(original)] = dict(original)
            out[section] = sec
        if items is None:
            if sec.get(field) is not None:
                sec[field] = None
            continue
        entries = sec.get(items)
        if not isinstance(entries, list):
            continue
        new_entries = []
        for entry in entries:
            if isinstance(entry, dict) and entry.get(field) is not None:
                entry = copied.get(id(entry)) or dict(entry)
                entry[field] = None
                copied[id(entry)] = entry
            new_entries.append(entry)
        sec[items] = new_entries
    return out

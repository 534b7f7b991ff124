"""The retention policy (DESIGN decision 5): how long content and records are kept, as configuration.

This module is the single source of truth for retention rules. Ingest classifies captures with
:func:`classify` / :meth:`RetentionPolicy.decide`, compaction applies the same
:meth:`RetentionPolicy.decide` to index rows, and both accept either form of a decision:

- a capture in the JSON form (``capturedAt``, ``captureLevel``, ``consequential.flagged``,
  ``replayPolicy.retentionDays``), or
- an index row of ``decisions`` (``captured_at``, ``capture_level``, ``consequential``, and
  optionally ``capture_retention_days`` — the capture's own ``replayPolicy.retentionDays`` — or
  ``manifest_json`` to read it from). The row's ``retention_days`` / ``expires_at`` columns are
  *outputs* of this policy and are never read back as inputs, so a policy change applies to old rows.

Rules (the packaged ``default_policy.toml`` has the article's values):

- ``consequential`` (flagged, or promoted by a flag before its content window ended): content and
  metadata kept ``retention_days`` (365), then expired.
- ``routine`` (a full capture of a routine turn) and ``sampled``: content kept ``content_days`` (30),
  then compacted to metadata-only; the record is kept ``retention_days`` (365), then expired.
- ``structured`` (structured-only captures): the segment copy kept ``content_days`` (30), the
  metadata record ``retention_days`` (365).

The capture's ``replayPolicy.retentionDays`` (signed, the agent's own pact) replaces the rule's
``retention_days`` when ``honor_capture_retention_days`` is true (the default); it never lengthens a
non-consequential content window (content kept ``min(content_days, retention)``).
``max_retention_days`` (0: none) bounds every retention. Windows count from ``capturedAt``.

No decision expires after :data:`MAX_EXPIRES_AT` (2106-01-01 UTC): a retention reaching past it (a
signed ``retentionDays`` of 3,000,000, say) is clamped to end there, and the whole days until then
are what :attr:`RetentionDecision.retention_days` reports. That date is "never" for every practical
purpose and is the latest the index can act on (its TTL runs on ClickHouse ``DateTime``, which ends
2106-02-07); clamping keeps a validly signed capture indexed as evidence instead of refusing it, and
keeps date arithmetic from overflowing on any input.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from consumers.retention.clock import as_utc
from schemas.errors import ContractError, RetentionError

__all__ = [
    "MAX_EXPIRES_AT",
    "RETENTION_CLASSES",
    "RULE_NAMES",
    "ClassRule",
    "CompactionTuning",
    "RetentionClass",
    "RetentionDecision",
    "RetentionFacts",
    "RetentionPolicy",
    "RetentionPolicyError",
    "RuleName",
    "classify",
    "content_expires_at",
    "default_policy",
    "expires_at",
    "load_policy",
    "policy_for_settings",
]

RetentionClass = Literal["consequential", "routine", "structured"]
RuleName = Literal["consequential", "routine", "sampled", "structured"]
RETENTION_CLASSES: tuple[RetentionClass, ...] = ("consequential", "routine", "structured")
RULE_NAMES: tuple[RuleName, ...] = ("consequential", "routine", "sampled", "structured")
DEFAULT_POLICY_RESOURCE = "default_policy.toml"
MAX_EXPIRES_AT = datetime(2106, 1, 1, tzinfo=UTC)
"""The latest expiry any decision gets (see the module docstring): later ones are clamped to it."""
_MAX_GRACE_HOURS = 24 * 3660  # ten years: beyond that a grace is a typo, and datetimes overflow
_MAX_QUARANTINE_DAYS = 36_600


class RetentionPolicyError(RetentionError):
    """A retention policy file or value is invalid; ``key`` names the first offending key (dotted)."""

    def __init__(self, message: str, *, key: str = "", source: str = "") -> None:
        self.key = key
        self.source = source
        where = f"retention policy {source}: " if source else "retention policy: "
        super().__init__(f"{where}{message}")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


class ClassRule(_Frozen):
    """How long one rule keeps content and the record. ``content_days`` None: for the whole retention."""

    retention_days: int = Field(ge=0)
    content_days: int | None = Field(default=None, ge=0)

    @field_validator("content_days")
    @classmethod
    def _content_within_retention(cls, value: int | None, info: ValidationInfo) -> int | None:
        retention = info.data.get("retention_days")
        if value is not None and isinstance(retention, int) and value > retention:
            raise ValueError(
                f"{value} exceeds retention_days ({retention}): content cannot outlive its record"
            )
        return value


class CompactionTuning(_Frozen):
    """How compaction batches its work and how long it waits before calling a blob an orphan.

    The orphan graces are safety margins, not retention: a blob no index row refers to yet may be one
    still being written (see ``default_policy.toml`` for what each must exceed).
    """

    rewrite_grace_hours: float = Field(default=24.0, ge=0)
    batch_decisions: int = Field(default=10_000, ge=1)
    orphan_grace_hours: float = Field(default=24.0, ge=1, le=_MAX_GRACE_HOURS)
    orphan_claim_grace_hours: float = Field(default=192.0, ge=1, le=_MAX_GRACE_HOURS)


@dataclass(frozen=True, slots=True)
class RetentionFacts:
    """What the policy needs to know about one decision, read from a capture or an index row."""

    captured_at: datetime
    capture_level: str
    consequential: bool
    capture_retention_days: int | None


@dataclass(frozen=True, slots=True)
class RetentionDecision:
    """The policy's answer for one decision.

    ``content_expires_at``: when its content may be compacted away (for consequential decisions, the
    same as ``expires_at``). ``expires_at``: when the whole record may be expired.
    ``retention_days``: the record's retention in days (what the index column stores).
    """

    retention_class: RetentionClass
    rule: RuleName
    retention_days: int
    content_expires_at: datetime
    expires_at: datetime


class RetentionPolicy(_Frozen):
    """The retention policy (see the module docstring). Frozen; build it with :func:`load_policy`."""

    name: str = Field(default="article-default", min_length=1)
    honor_capture_retention_days: bool = True
    max_retention_days: int = Field(default=0, ge=0)
    quarantine_days: int = Field(default=90, ge=1, le=_MAX_QUARANTINE_DAYS)
    """Quarantined bytes are kept this long after they were received; the quarantine rows stay."""
    consequential: ClassRule = ClassRule(content_days=None, retention_days=365)
    routine: ClassRule = ClassRule(content_days=30, retention_days=365)
    sampled: ClassRule = ClassRule(content_days=30, retention_days=365)
    structured: ClassRule = ClassRule(content_days=30, retention_days=365)
    compaction: CompactionTuning = CompactionTuning()

    # --- loading ------------------------------------------------------------------------------------
    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, source: str = "") -> RetentionPolicy:
        """Validate a TOML-shaped mapping; errors name the offending dotted key."""
        try:
            return cls.model_validate(dict(data))
        except ValidationError as exc:
            raise _policy_error(exc, source) from exc

    @classmethod
    def from_toml(cls, path: str | Path, *, over_defaults: bool = True) -> RetentionPolicy:
        """Load a policy file. With ``over_defaults`` (the default) the file is laid over the packaged
        defaults, so it only needs the keys it changes."""
        path = Path(path)
        data = _read_toml(path)
        if over_defaults:
            data = _deep_merge(_default_mapping(), data)
        return cls.from_mapping(data, source=str(path))

    @property
    def fingerprint(self) -> str:
        """``name@sha256:<12 hex>`` of the effective values: names the policy in every log entry."""
        canonical = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return f"{self.name}@sha256:{hashlib.sha256(canonical.encode()).hexdigest()[:12]}"

    # --- rules ----------------------------------------------------------------------------------------
    def rule(self, name: RuleName) -> ClassRule:
        rule: ClassRule = getattr(self, name)
        return rule

    @property
    def shortest_window_days(self) -> int:
        """The shortest content window of any rule (compaction's candidate cutoff)."""
        days = min(
            r.content_days if r.content_days is not None else r.retention_days
            for r in (self.rule(n) for n in RULE_NAMES)
        )
        return min(days, self.max_retention_days) if self.max_retention_days else days

    @property
    def shortest_retention_days(self) -> int:
        """The shortest record retention of any rule (compaction's expiry cutoff for content-less rows)."""
        days = min(self.rule(n).retention_days for n in RULE_NAMES)
        return min(days, self.max_retention_days) if self.max_retention_days else days

    def rule_name(self, record: Mapping[str, Any], *, promoted: bool = False) -> RuleName:
        return _rule_name(facts_of(record), promoted=promoted)

    def retention_class(self, record: Mapping[str, Any], *, promoted: bool = False) -> RetentionClass:
        return _class_of(_rule_name(facts_of(record), promoted=promoted))

    def decide(
        self, record: Mapping[str, Any] | RetentionFacts, *, promoted: bool = False
    ) -> RetentionDecision:
        """Retention class, rule, retention days, content window end and record expiry of one decision.

        ``promoted``: a flag_consequential arrived before the content window ended (see :meth:`promotes`).
        """
        facts = record if isinstance(record, RetentionFacts) else facts_of(record)
        name = _rule_name(facts, promoted=promoted)
        rule = self.rule(name)
        days = rule.retention_days
        if self.honor_capture_retention_days and facts.capture_retention_days is not None:
            days = facts.capture_retention_days
        if self.max_retention_days:
            days = min(days, self.max_retention_days)
        limit = _days_until_max(facts.captured_at)
        if days > limit:  # beyond what the index can act on: ends at the documented maximum
            days, record_end = limit, max(MAX_EXPIRES_AT, facts.captured_at)
        else:
            record_end = facts.captured_at + timedelta(days=days)
        if rule.content_days is None:
            content_end = record_end
        else:
            content_end = min(facts.captured_at + timedelta(days=min(rule.content_days, days)), record_end)
        return RetentionDecision(_class_of(name), name, days, content_end, record_end)

    def promotes(self, record: Mapping[str, Any] | RetentionFacts, flagged_at: datetime) -> bool:
        """Whether a flag_consequential at ``flagged_at`` promotes the decision: it is not consequential
        yet and the flag came before the end of its (unpromoted) content window."""
        facts = record if isinstance(record, RetentionFacts) else facts_of(record)
        if facts.consequential:
            return False
        return as_utc(flagged_at) < self.decide(facts).content_expires_at


# --- module-level helpers (ingest uses these) ------------------------------------------------------------
def classify(record: Mapping[str, Any], *, policy: RetentionPolicy | None = None) -> RetentionClass:
    """The retention class (segment family) of a capture or an index row.

    ``consequential`` if flagged, ``structured`` for a structured-only capture, else ``routine``
    (full and sampled captures share routine segments; their rules may still differ).
    """
    return (policy or default_policy()).retention_class(record)


def expires_at(
    record: Mapping[str, Any], *, policy: RetentionPolicy | None = None, promoted: bool = False
) -> datetime:
    """When the whole record (metadata and hashes) may be expired."""
    return (policy or default_policy()).decide(record, promoted=promoted).expires_at


def content_expires_at(
    record: Mapping[str, Any], *, policy: RetentionPolicy | None = None, promoted: bool = False
) -> datetime:
    """When the record's content may be compacted away."""
    return (policy or default_policy()).decide(record, promoted=promoted).content_expires_at


@cache
def default_policy() -> RetentionPolicy:
    """The packaged policy (``default_policy.toml``: the article's defaults)."""
    return RetentionPolicy.from_mapping(_default_mapping(), source=DEFAULT_POLICY_RESOURCE)


def load_policy(path: str | Path | None = None) -> RetentionPolicy:
    """The packaged default policy, with the file at ``path`` (if any) laid over it."""
    return default_policy() if path is None else RetentionPolicy.from_toml(path)


class PolicySetting(Protocol):
    """The one setting the policy reads (the services' settings, :mod:`consumers.app.settings`)."""

    @property
    def retention_policy(self) -> Path | None: ...


def policy_for_settings(settings: PolicySetting) -> RetentionPolicy:
    """The policy ``settings.retention_policy`` names, over the packaged defaults."""
    return load_policy(settings.retention_policy)


# --- facts -------------------------------------------------------------------------------------------------
def facts_of(record: Mapping[str, Any]) -> RetentionFacts:
    """Read :class:`RetentionFacts` from a capture (JSON form, camelCase) or a ``decisions`` row."""
    if "capturedAt" in record or "decisionId" in record:
        return _capture_facts(record)
    if "captured_at" in record:
        return _row_facts(record)
    raise ContractError("neither a capture (capturedAt) nor an index row (captured_at)", path="capturedAt")


def _capture_facts(capture: Mapping[str, Any]) -> RetentionFacts:
    captured_at = _timestamp(capture.get("capturedAt"), "capturedAt")
    consequential = capture.get("consequential")
    flagged = bool(consequential.get("flagged")) if isinstance(consequential, Mapping) else False
    replay_policy = capture.get("replayPolicy")
    days = replay_policy.get("retentionDays") if isinstance(replay_policy, Mapping) else None
    return RetentionFacts(
        captured_at=captured_at,
        capture_level=str(capture.get("captureLevel") or "full"),
        consequential=flagged,
        capture_retention_days=_days(days, "replayPolicy.retentionDays"),
    )


def _row_facts(row: Mapping[str, Any]) -> RetentionFacts:
    captured_at = _timestamp(row.get("captured_at"), "captured_at")
    if "capture_retention_days" in row:
        days = row["capture_retention_days"]
    else:
        days = _manifest_retention_days(row.get("manifest_json"))
    return RetentionFacts(
        captured_at=captured_at,
        capture_level=str(row.get("capture_level") or "full"),
        consequential=bool(row.get("consequential")),
        capture_retention_days=_days(days, "capture_retention_days"),
    )


def _manifest_retention_days(manifest_json: object) -> object:
    if not isinstance(manifest_json, str) or not manifest_json:
        return None
    try:
        manifest = json.loads(manifest_json)
    except ValueError:
        return None
    policy = manifest.get("replayPolicy") if isinstance(manifest, dict) else None
    return policy.get("retentionDays") if isinstance(policy, dict) else None


def _timestamp(value: object, path: str) -> datetime:
    if isinstance(value, datetime):
        return as_utc(value)
    if isinstance(value, str) and value:
        try:
            return as_utc(datetime.fromisoformat(value))
        except ValueError:
            pass
    raise ContractError(f"not an ISO-8601 timestamp: {value!r}", path=path)


def _days(value: object, path: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 or value != int(value):
        raise ContractError(f"must be a whole number of days >= 0, got {value!r}", path=path)
    return int(value)


def _days_until_max(captured_at: datetime) -> int:
    """Whole days from ``captured_at`` to :data:`MAX_EXPIRES_AT` (0 when it is already past)."""
    return max(0, (MAX_EXPIRES_AT - captured_at).days)


def _rule_name(facts: RetentionFacts, *, promoted: bool) -> RuleName:
    if facts.consequential or promoted:
        return "consequential"
    if facts.capture_level == "structured-only":
        return "structured"
    if facts.capture_level == "sampled":
        return "sampled"
    return "routine"


def _class_of(rule: RuleName) -> RetentionClass:
    return "routine" if rule == "sampled" else rule


# --- TOML ----------------------------------------------------------------------------------------------------
def _read_toml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RetentionPolicyError(f"cannot read: {exc}", source=str(path)) from exc
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RetentionPolicyError(f"not valid TOML: {exc}", source=str(path)) from exc


@cache
def _default_text() -> str:
    return (
        resources.files("consumers.retention").joinpath(DEFAULT_POLICY_RESOURCE).read_text(encoding="utf-8")
    )


def _default_mapping() -> dict[str, Any]:
    return tomllib.loads(_default_text())


def _deep_merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _policy_error(exc: ValidationError, source: str) -> RetentionPolicyError:
    messages: list[str] = []
    first_key = ""
    for error in exc.errors():
        key = ".".join(str(part) for part in error["loc"])
        if error["type"] == "extra_forbidden":
            message = "unknown key"
        elif error["type"] == "missing":
            message = "required"
        elif error["type"] == "value_error":
            message = str(error["msg"]).removeprefix("Value error, ")
        else:
            message = f"{error['msg']} (got {error.get('input')!r})"
        first_key = first_key or key
        messages.append(f"{key}: {message}" if key else message)
    return RetentionPolicyError("; ".join(messages), key=first_key, source=source)

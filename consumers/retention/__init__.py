"""Retention (DESIGN decision 5): the policy, compaction and expiry, legal hold, operator flags.

Below ingest (which classifies captures by the policy) and above :mod:`consumers.storage` (whose
segments compaction rewrites): retention never imports ingest.

- :mod:`~consumers.retention.policy` — :class:`RetentionPolicy` (TOML, the article's defaults packaged
  in ``default_policy.toml``) and the single source of truth for retention rules:
  :func:`classify`, :func:`expires_at`, :func:`content_expires_at`, :meth:`RetentionPolicy.decide`;
- :mod:`~consumers.retention.plan` — what is due at a time (pure);
- :mod:`~consumers.retention.compaction` — :class:`Compactor`: copy out, re-point, log, flip rows,
  delete segments; idempotent and resumable;
- :mod:`~consumers.retention.copyout` — frames copied verbatim out of a segment that goes, row changes;
- :mod:`~consumers.retention.sweep` — what no decision's window covers: quarantine past
  ``quarantine_days``, orphan segments and claim-check bodies past their grace;
- :mod:`~consumers.retention.store` — the SQL: candidates, new row versions, the log's bookkeeping;
- :mod:`~consumers.retention.log` — the deletions log (JSONL + ``deletions`` table);
- :mod:`~consumers.retention.status` — what show/verify should say about a decision's content;
- :mod:`~consumers.retention.hold` — :class:`LegalHolds` (set / release, audited);
- :mod:`~consumers.retention.flag` — operator ``flag_consequential`` through the transport;
- :mod:`~consumers.retention.clock` — the injectable :class:`Clock`.
"""

from consumers.retention.clock import Clock, FixedClock, SystemClock
from consumers.retention.compaction import CompactionResult, Compactor
from consumers.retention.copyout import CopyVerificationFailed
from consumers.retention.hold import HoldResult, LegalHolds
from consumers.retention.log import DeletionEntry, DeletionLog, read_jsonl
from consumers.retention.plan import Candidate, CompactionPlan, SegmentPlan, Step, plan_compaction
from consumers.retention.policy import (
    RetentionClass,
    RetentionDecision,
    RetentionPolicy,
    RetentionPolicyError,
    classify,
    content_expires_at,
    default_policy,
    expires_at,
    load_policy,
    policy_for_settings,
)

__all__ = [
    "Candidate",
    "Clock",
    "CompactionPlan",
    "CompactionResult",
    "Compactor",
    "CopyVerificationFailed",
    "DeletionEntry",
    "DeletionLog",
    "FixedClock",
    "HoldResult",
    "LegalHolds",
    "RetentionClass",
    "RetentionDecision",
    "RetentionPolicy",
    "RetentionPolicyError",
    "SegmentPlan",
    "Step",
    "SystemClock",
    "classify",
    "content_expires_at",
    "default_policy",
    "expires_at",
    "load_policy",
    "plan_compaction",
    "policy_for_settings",
    "read_jsonl",
]

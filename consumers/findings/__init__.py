"""Findings: what an investigation concluded, as a CEL rule plus the pinned decisions that showed it.

Stored in the index (``findings``, ``finding_decisions``): beside ``replay_runs`` and the decisions
they pin, shared by every operator of a ClickHouse server, readable with ``blackbox query``, and the
suite ``regress --suite NAME`` replays. The rule language and the ``decision`` view are the pacts'
(:mod:`consumers.pacts`); a finding's rule is true on a decision that *shows* the problem.

Module map (one concept each):

- :mod:`~consumers.findings.record` — ``finding add``: check the rule, evaluate it, pin the matches
- :mod:`~consumers.findings.incidence` — ``trends finding:NAME``: matches per day (and ``--by`` group)
- :mod:`~consumers.findings.captures` — gated reads of stored captures, the rule run on each
- :mod:`~consumers.findings.store` — the SQL
"""

from consumers.findings.incidence import FINDING_TREND_PREFIX, finding_incidence
from consumers.findings.record import FindingError, FindingRecord, add_finding
from consumers.findings.store import get_finding, list_findings, pinned_decisions

__all__ = [
    "FINDING_TREND_PREFIX",
    "FindingError",
    "FindingRecord",
    "add_finding",
    "finding_incidence",
    "get_finding",
    "list_findings",
    "pinned_decisions",
]

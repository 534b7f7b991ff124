"""An agent's behavioural record over a window, from the index alone (DESIGN decision 26).

Figures, for the agent's verified decisions captured at or after ``since``:

- ``decisions``, ``consequential`` (flagged at capture or upgraded later), ``failures`` (``failed_any``:
  its own outcome or any failure flag);
- ``violations`` per rule: decisions with a ``pact_violations`` row of kind ``violation``, with the
  count per 1,000 decisions and the pact versions that judged them;
- ``findings``: per finding, the agent's decisions in the window it pinned, per 1,000 decisions;
- ``gates``: ``regress`` runs that replayed the agent's decisions, passed or failed (failed when a
  decision regressed, could not be replayed, or still fails a check, as ``regress`` exits 1);
- ``pact_versions``: the applied versions binding the agent, in force during the window;
- ``score``: the Wilson lower bound (z = 1.96, 95 %) of the share of *clean* decisions, clean = not
  failed and no pact violated::

      p = clean / n;  score = (p + z²/2n - z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n);  n = 0 → 0

  so ten clean decisions score 0.72, a thousand score 0.996: a short record cannot look perfect.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from producers.evidence.trust import as_utc

if TYPE_CHECKING:
    from consumers.index import Index

__all__ = ["AgentRecord", "Z", "agent_record", "wilson_lower"]

Z = 1.96


def wilson_lower(successes: int, n: int, *, z: float = Z) -> float:
    """The lower bound of the Wilson score interval of ``successes / n`` (0 when ``n`` is 0)."""
    if n <= 0:
        return 0.0
    p = successes / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - spread) / (1 + z * z / n)


@dataclass(frozen=True, slots=True)
class AgentRecord:
    agent: str
    since: datetime
    decisions: int
    consequential: int
    failures: int
    clean: int
    violations: tuple[dict[str, Any], ...]
    findings: tuple[dict[str, Any], ...]
    gates: dict[str, int]
    pact_versions: tuple[dict[str, Any], ...]
    until: datetime | None = None

    @property
    def score(self) -> float:
        return wilson_lower(self.clean, self.decisions)

    def to_json(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "since": self.since.isoformat(),
            **({"until": self.until.isoformat()} if self.until is not None else {}),
            "decisions": self.decisions,
            "consequential": self.consequential,
            "failures": self.failures,
            "clean": self.clean,
            "violations": list(self.violations),
            "findings": list(self.findings),
            "gates": self.gates,
            "pact_versions": list(self.pact_versions),
            "score": round(self.score, 4),
            "score_formula": "Wilson lower bound (z=1.96) of clean/decisions; clean = not failed, no pact violated",
        }


def _per_1000(count: int, n: int) -> float:
    return round(1000 * count / n, 1) if n else 0.0


def agent_record(index: Index, agent: str, *, since: datetime, until: datetime | None = None) -> AgentRecord:
    """The record of ``agent`` over ``[since, until)`` (no end when ``until`` is None; module docstring)."""
    from consumers.pacts.store import record_rows

    rows = record_rows(index, agent, since=since, until=until)
    (head,) = rows["head"]
    violations, findings, runs = rows["violations"], rows["findings"], rows["runs"]
    n = int(head["n"])
    return AgentRecord(
        agent=agent,
        since=since,
        decisions=n,
        consequential=int(head["consequential"]),
        failures=int(head["failures"]),
        clean=int(head["clean"]),
        violations=tuple(
            {
                "rule": str(r["rule"]),
                "decisions": int(r["decisions"]),
                "per_1000": _per_1000(int(r["decisions"]), n),
                "pact_versions": sorted(str(v) for v in r["versions"]),
            }
            for r in violations
        ),
        findings=tuple(
            {
                "finding": str(r["name"]),
                "decisions": int(r["decisions"]),
                "per_1000": _per_1000(int(r["decisions"]), n),
            }
            for r in findings
        ),
        gates={"passed": sum(1 for r in runs if not r["bad"]), "failed": sum(1 for r in runs if r["bad"])},
        pact_versions=tuple(_versions_in_force(rows["applications"], agent, since, until)),
        until=until,
    )


def _versions_in_force(
    rows: list[dict[str, Any]], agent: str, since: datetime, until: datetime | None
) -> list[dict[str, Any]]:
    """Applied versions binding ``agent``: the one in force at ``since`` and every later apply before ``until``."""
    out: list[dict[str, Any]] = []
    end = until.replace(microsecond=until.microsecond // 1000 * 1000) if until is not None else None
    for row in rows:
        at = as_utc(row["applied_at"])  # stored to the millisecond
        if end is not None and at >= end:
            break
        globs = str(row["agents"] or "*").split(",")
        entry = {
            "version": str(row["version"]),
            "applied_at": at.isoformat(),
            "forced": bool(row["forced"]),
            "binds": any(fnmatchcase(agent, g) for g in globs),
        }
        if at < since:
            out = [entry]  # the latest apply before the window is in force at its start
        else:
            out.append(entry)
    return [{k: v for k, v in e.items() if k != "binds"} for e in out if e["binds"]]

"""Record a finding: a CEL rule that describes the problem, and the decisions that showed it, pinned.

The rule is true on a decision that shows the problem (the opposite of a pact, which is true when the
commitment holds). The candidates are the decisions named with ``--decision`` and those a replay run
replayed (``--from-replay RUN``); the ones the rule matches are pinned as the finding's suite
(``regress --suite NAME`` replays them), the others are reported with the reason. A finding whose rule
matches none of its candidates is refused: it would pin nothing and describe nothing seen.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from consumers.access import AccessGate, Caller
from consumers.findings.captures import evaluate_stored
from consumers.findings.store import decision_rows_by_id, get_finding, insert_finding, replay_run_decisions
from consumers.index import Index
from consumers.privacy.ids import IndexIds
from producers.blobstore import BlobStore
from producers.pacts.book import NAME
from producers.pacts.expression import Rule, check_rule
from schemas.errors import BlackboxError

__all__ = ["FindingError", "FindingRecord", "add_finding"]


class FindingError(BlackboxError):
    """A finding cannot be recorded or found; the message says what was wrong."""


@dataclass(frozen=True, slots=True)
class FindingRecord:
    """What ``finding add`` did: ``pinned`` decision ids, and ``skipped`` ``(decision id, why)``."""

    name: str
    rule: str
    pinned: tuple[str, ...]
    skipped: tuple[tuple[str, str], ...]


def add_finding(
    index: Index,
    *,
    name: str,
    rule: str,
    description: str = "",
    decisions: Sequence[str] = (),
    from_replay: str | None = None,
    blobs: BlobStore,
    gate: AccessGate,
    caller: Caller,
    now: datetime,
    ids: IndexIds | None = None,
) -> FindingRecord:
    """Check the rule, evaluate it on the candidates, pin the matches and store the finding."""
    if not NAME.match(name):
        raise FindingError(f"finding name {name!r}: use 1-100 letters, digits, '_', '.', ':' or '-'")
    compiled = Rule(name=name, source=rule.strip(), description=description)
    check_rule(compiled, what="finding")
    if get_finding(index, name) is not None:
        raise FindingError(f"finding {name!r} already exists (see `blackbox finding show {name}`)")
    sources: dict[str, str] = {did: "decision" for did in decisions}
    if from_replay is not None:
        replayed = replay_run_decisions(index, from_replay)
        if not replayed:
            raise FindingError(f"no replay run {from_replay!r} in replay_runs")
        for did in replayed:
            sources.setdefault(did, "replay")
    if not sources:
        raise FindingError("a finding needs the decisions that showed it: --decision ID or --from-replay RUN")
    rows = decision_rows_by_id(index, list(sources))
    unknown = [did for did in sources if did not in rows]
    if unknown:
        raise FindingError(f"not in the index: {', '.join(unknown)}")
    skipped: list[tuple[str, str]] = []
    trusted = []
    for did in sources:
        if rows[did].get("trust") != "verified":
            skipped.append((did, "quarantined: not trusted evidence"))
        else:
            trusted.append(rows[did])
    pinned: list[dict[str, Any]] = []
    for outcome in evaluate_stored(compiled, trusted, blobs=blobs, gate=gate, caller=caller, ids=ids):
        did = str(outcome.row["decision_id"])
        if outcome.matched:
            pinned.append(
                {
                    "name": name,
                    "decision_id": did,
                    "agent_id": outcome.row["agent_id"],
                    "captured_at": outcome.row["captured_at"],
                    "source": sources[did],
                }
            )
        else:
            skipped.append((did, outcome.error or "the rule is false on it"))
    if not pinned:
        why = "; ".join(f"{did}: {reason}" for did, reason in skipped[:5])
        raise FindingError(
            f"the rule of {name!r} matches none of the {len(sources)} decision(s) given ({why})"
        )
    insert_finding(
        index,
        {
            "name": name,
            "rule": compiled.source,
            "description": description,
            "created_at": now,
            "created_by": caller.identity,
            "from_replay": from_replay or "",
        },
        pinned,
    )
    return FindingRecord(
        name=name,
        rule=compiled.source,
        pinned=tuple(p["decision_id"] for p in pinned),
        skipped=tuple(skipped),
    )

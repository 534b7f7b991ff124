"""``--runs N``: replay the same inputs N times and count the distinct outcomes.

At temperature 0 a faithful model gives one outcome; sampling (or a model that is not
deterministic even at temperature 0) spreads runs over several. The distribution itself is
evidence: a failure that appears in 3 of 20 runs is a different finding from one in 20 of 20.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from consumers.replay.outcome import Outcome

if TYPE_CHECKING:
    from consumers.replay.replayer import PreparedCapture, Replayer, ReplayResult
    from consumers.replay.variation import Variation


@dataclass(frozen=True, slots=True)
class VarianceBucket:
    """Runs that ended with the same tool-call sequence and the same final output."""

    outcome: Outcome
    count: int
    tool_names: tuple[str, ...]
    matches_original: bool
    example: ReplayResult

    def to_json(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "toolCalls": list(self.tool_names),
            "finalOutput": self.outcome.final_output,
            "stopReason": self.outcome.stop_reason,
            "matchesOriginal": self.matches_original,
        }


@dataclass(frozen=True, slots=True)
class Variance:
    runs: int
    buckets: tuple[VarianceBucket, ...]

    @property
    def distinct(self) -> int:
        return len(self.buckets)

    @property
    def modal(self) -> VarianceBucket:
        return self.buckets[0]

    @property
    def reproducing_runs(self) -> int:
        return sum(b.count for b in self.buckets if b.matches_original)

    def to_json(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "distinctOutcomes": self.distinct,
            "reproducingRuns": self.reproducing_runs,
            "outcomes": [b.to_json() for b in self.buckets],
        }


def distribution(results: Sequence[ReplayResult]) -> Variance:
    """Group ``results`` by outcome, most frequent first (ties: first seen first)."""
    groups: dict[tuple[Any, ...], list[ReplayResult]] = {}
    for result in results:
        key = (result.outcome.tool_calls, result.outcome.final_output)
        groups.setdefault(key, []).append(result)
    buckets = [
        VarianceBucket(
            outcome=members[0].outcome,
            count=len(members),
            tool_names=tuple(c.tool_name for c in members[0].tool_calls),
            matches_original=_matches_original(members[0]),
            example=members[0],
        )
        for members in groups.values()
    ]
    buckets.sort(key=lambda b: -b.count)  # stable: ties keep first-seen order
    return Variance(runs=len(results), buckets=tuple(buckets))


def characterize(
    replayer: Replayer, prepared: PreparedCapture, *, runs: int, variation: Variation | None = None
) -> tuple[Variance, list[ReplayResult]]:
    """Replay ``prepared`` ``runs`` times (optionally under ``variation``) and summarize."""
    if runs < 1:
        raise ValueError("runs must be at least 1")
    results = [replayer.run(prepared, variation=variation) for _ in range(runs)]
    return distribution(results), results


def _matches_original(result: ReplayResult) -> bool:
    comparison = result.compared_to_original()
    return comparison is not None and not comparison.changed

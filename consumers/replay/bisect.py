"""Bisect: which change flipped the outcome?

Two forms:

- :func:`bisect_candidates` walks an ordered list of candidate configurations (prompt versions
  v4.1 … v4.7, model versions, ...) and names the *first* one under which the replay reproduces
  the captured outcome (``target="reproduces"``: when did this failure appear?) or changes it
  (``target="changes"``: when did this decision stop behaving as captured?). It assumes the
  outcome flips once along the list (monotone) and needs ⌈log2(n + 1)⌉ replays at most.
- :func:`explain_change` compares two configurations (``--from A.toml --to B.toml``): it replays
  A and B, then each changed variable alone on top of A; only if no single variable flips the
  outcome does it try combinations, smallest first.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from consumers.replay.outcome import Outcome, compare
from consumers.replay.replayer import PreparedCapture, Replayer, ReplayResult
from consumers.replay.variation import Variation
from schemas.errors import ModelClientError

Target = Literal["reproduces", "changes"]
Configuration = tuple[Variation, ...]


@dataclass(frozen=True, slots=True)
class BisectStep:
    index: int
    label: str
    hit: bool
    result: ReplayResult


@dataclass(frozen=True, slots=True)
class BisectResult:
    decision_id: str
    target: Target
    labels: tuple[str, ...]
    first: int | None
    steps: tuple[BisectStep, ...]

    @property
    def first_label(self) -> str | None:
        return None if self.first is None else self.labels[self.first]

    @property
    def replays(self) -> int:
        return len(self.steps)

    @property
    def verdict(self) -> str:
        """The answer with its evidence: which candidates were replayed, once each."""
        tried = ", ".join(s.label for s in sorted(self.steps, key=lambda s: s.index))
        evidence = f"{self.replays} of {len(self.labels)} candidates replayed, 1 run each: {tried}"
        if self.first_label is None:
            return f"none of the candidates {self.target} the captured outcome ({evidence})"
        return f"first candidate that {self.target} the captured outcome: {self.first_label} ({evidence})"

    def to_json(self) -> dict[str, Any]:
        return {
            "decisionId": self.decision_id,
            "target": self.target,
            "candidates": list(self.labels),
            "first": self.first_label,
            "verdict": self.verdict,
            "replays": self.replays,
            "steps": [
                {
                    "candidate": s.label,
                    "hit": s.hit,
                    "toolCalls": [c.tool_name for c in s.result.tool_calls],
                    "finalOutput": s.result.final_output,
                }
                for s in self.steps
            ],
        }


def bisect_candidates(
    replayer: Replayer,
    prepared: PreparedCapture,
    candidates: Sequence[Variation | Configuration],
    *,
    target: Target = "reproduces",
) -> BisectResult:
    """The first candidate (in the given order) whose replay hits ``target``, by binary search."""
    configs = [(c,) if isinstance(c, Variation) else tuple(c) for c in candidates]
    labels = tuple(" + ".join(v.describe() for v in config) for config in configs)
    steps: list[BisectStep] = []

    def hit(i: int) -> bool:
        result = replayer.run(prepared, configuration=configs[i])
        _raise_if_unrun(result)
        changed = compare(prepared.original, result.outcome).changed
        is_hit = changed if target == "changes" else not changed
        steps.append(BisectStep(index=i, label=labels[i], hit=is_hit, result=result))
        return is_hit

    lo, hi = 0, len(configs)
    while lo < hi:
        mid = (lo + hi) // 2
        if hit(mid):
            hi = mid
        else:
            lo = mid + 1
    return BisectResult(
        decision_id=prepared.decision_id,
        target=target,
        labels=labels,
        first=lo if lo < len(configs) else None,
        steps=tuple(steps),
    )


@dataclass(frozen=True, slots=True)
class ExplainStep:
    variables: tuple[str, ...]
    flips: bool
    result: ReplayResult


@dataclass(frozen=True, slots=True)
class ExplainResult:
    decision_id: str
    changed_variables: tuple[str, ...]
    from_result: ReplayResult
    to_result: ReplayResult
    outcome_differs: bool
    culprits: tuple[tuple[str, ...], ...]
    steps: tuple[ExplainStep, ...]

    @property
    def replays(self) -> int:
        return 2 + len(self.steps)

    def to_json(self) -> dict[str, Any]:
        return {
            "decisionId": self.decision_id,
            "changedVariables": list(self.changed_variables),
            "outcomeDiffers": self.outcome_differs,
            "culprits": [list(c) for c in self.culprits],
            "replays": self.replays,
            "steps": [
                {
                    "variables": list(s.variables),
                    "flips": s.flips,
                    "verdict": f"{'flips the outcome' if s.flips else 'no change'} (1 run)",
                }
                for s in self.steps
            ],
        }


def explain_change(
    replayer: Replayer,
    prepared: PreparedCapture,
    *,
    before: Mapping[str, Variation],
    after: Mapping[str, Variation],
) -> ExplainResult:
    """Which changed variable(s) between two configurations flip this decision's outcome."""
    changed = tuple(
        name
        for name in dict.fromkeys([*before, *after])
        if (before.get(name) is None) != (after.get(name) is None)
        or (before.get(name) is not None and before[name].value != after[name].value)
    )

    def run(config: Mapping[str, Variation]) -> ReplayResult:
        result = replayer.run(prepared, configuration=tuple(config.values()))
        _raise_if_unrun(result)
        return result

    from_result, to_result = run(before), run(after)
    baseline = from_result.outcome
    differs = compare(baseline, to_result.outcome).changed
    steps: list[ExplainStep] = []
    culprits: list[tuple[str, ...]] = []
    if differs:
        for size in range(1, len(changed) + 1):
            for names in itertools.combinations(changed, size):
                result = run(_with(before, after, names))
                flips = _flips(baseline, result.outcome)
                steps.append(ExplainStep(variables=names, flips=flips, result=result))
                if flips:
                    culprits.append(names)
            if culprits:
                break
    return ExplainResult(
        decision_id=prepared.decision_id,
        changed_variables=changed,
        from_result=from_result,
        to_result=to_result,
        outcome_differs=differs,
        culprits=tuple(culprits),
        steps=tuple(steps),
    )


def _with(
    before: Mapping[str, Variation], after: Mapping[str, Variation], names: Sequence[str]
) -> dict[str, Variation]:
    config = dict(before)
    for name in names:
        if name in after:
            config[name] = after[name]
        else:
            config.pop(name, None)  # "after" leaves this variable as captured
    return config


def _flips(baseline: Outcome, outcome: Outcome) -> bool:
    return compare(baseline, outcome).changed


def _raise_if_unrun(result: ReplayResult) -> None:
    if isinstance(result.replay_failure, ModelClientError):
        raise result.replay_failure

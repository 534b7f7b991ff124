"""What a decision *did*, and whether two runs of it did the same thing.

An outcome is the action sequence — each tool call as (tool name, input hash), then the final
output — plus the stop reason. Steps are numbered along that sequence: step *n* is the *n*-th tool
call, and the step after the last call is the final answer. "Outcome changed" means the tool-call
sequence or the final output differs; the stop reason is reported beside it, not folded in
(runtimes name stop reasons differently).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from consumers.replay.digest import json_hash


@dataclass(frozen=True, slots=True)
class Outcome:
    tool_calls: tuple[tuple[str, str], ...]
    final_output: str | None
    stop_reason: str | None

    @classmethod
    def from_capture(cls, capture: Mapping[str, Any]) -> Outcome:
        trace = capture.get("executionTrace") or {}
        calls = sorted(trace.get("toolCalls") or (), key=lambda c: int(c.get("sequence", 0)))
        return cls(
            tool_calls=tuple(
                (str(c.get("toolName")), str(c.get("inputHash") or json_hash(c.get("input")))) for c in calls
            ),
            final_output=trace.get("finalOutputText"),
            stop_reason=trace.get("stopReason"),
        )

    def tool_names(self) -> list[str]:
        return [name for name, _ in self.tool_calls]


@dataclass(frozen=True, slots=True)
class Comparison:
    final_output_equal: bool
    tool_calls_equal: bool
    first_divergent_step: int | None
    stop_reason_equal: bool

    @property
    def changed(self) -> bool:
        return not (self.final_output_equal and self.tool_calls_equal)


def compare(reference: Outcome, other: Outcome) -> Comparison:
    """How ``other`` differs from ``reference``, step by step."""
    first: int | None = None
    for i, (a, b) in enumerate(zip(reference.tool_calls, other.tool_calls, strict=False)):
        if a != b:
            first = i + 1
            break
    tools_equal = reference.tool_calls == other.tool_calls
    if first is None and not tools_equal:
        first = min(len(reference.tool_calls), len(other.tool_calls)) + 1
    final_equal = reference.final_output == other.final_output
    if first is None and not final_equal:
        first = len(reference.tool_calls) + 1
    return Comparison(
        final_output_equal=final_equal,
        tool_calls_equal=tools_equal,
        first_divergent_step=first,
        stop_reason_equal=reference.stop_reason == other.stop_reason,
    )

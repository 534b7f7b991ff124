"""Judge a replayed output by the rules that say what correct is: the pacts, and a finding's rule.

A *check* is a CEL rule (:mod:`consumers.pacts`) with the verdict it must give: a pact holds when its
rule is true; a finding's rule is true on a decision that *shows* the problem, so its check holds
when the rule is false. Checks run on the ``decision`` view of the capture and on the view of the
replay (:func:`replayed_capture`): the capture as the replay ran it — the varied configuration
(prompt text and version, model, sampling, working set, external values, request message) and the
replay's own tool calls, final output and stop reason; its outcome is ``unknown``.

A replay that left the recording (an unrecorded tool call) stops there: the call it wanted to make
is in the view with its input and no output, and nothing after it exists. A rule that reads what is
not there errors (``error``), never a silent pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from consumers.replay.replayer import PreparedCapture, ReplayResult, vary_inputs
from consumers.replay.variation import ReplayInputs
from producers.pacts.expression import Rule, RuleError, run_rule
from producers.pacts.view import decision_view

__all__ = ["Check", "CheckResult", "checks_of", "replayed_capture", "run_checks"]

Verdict = Literal["holds", "fails", "error"]


@dataclass(frozen=True, slots=True)
class Check:
    """A named rule and the value it must have on a correct decision."""

    name: str
    rule: Rule
    holds_when: bool = True


@dataclass(frozen=True, slots=True)
class CheckResult:
    check: str
    verdict: Verdict
    detail: str = ""


def checks_of(pacts: Iterable[Rule], *, finding: Rule | None = None) -> tuple[Check, ...]:
    """Every pact (holds when true), then the finding's rule (holds when false) named ``finding:NAME``."""
    checks = [Check(name=rule.name, rule=rule) for rule in pacts]
    if finding is not None:
        checks.append(Check(name=f"finding:{finding.name}", rule=finding, holds_when=False))
    return tuple(checks)


def run_checks(checks: Sequence[Check], capture: Mapping[str, Any]) -> tuple[CheckResult, ...]:
    """Each check on one capture (or replayed capture); never raises for the decision's sake."""
    try:
        view = decision_view(capture)
    except Exception as exc:  # a view that cannot be built errors every check, it stops nothing
        return tuple(CheckResult(c.name, "error", f"no decision view: {exc}") for c in checks)
    results: list[CheckResult] = []
    for check in checks:
        try:
            value = run_rule(check.rule, view)
        except RuleError as exc:
            results.append(CheckResult(check.name, "error", str(exc)))
            continue
        if value == check.holds_when:
            results.append(CheckResult(check.name, "holds"))
        elif check.holds_when:
            results.append(
                CheckResult(check.name, "fails", check.rule.description or "the pact's rule is false")
            )
        else:
            what = check.rule.description or "the problem the finding describes"
            results.append(CheckResult(check.name, "fails", f"the finding's rule still matches: {what}"))
    return tuple(results)


def replayed_capture(prepared: PreparedCapture, result: ReplayResult) -> dict[str, Any]:
    """The capture as ``result``'s replay ran it (module docstring); the original is not changed."""
    capture = prepared.capture
    config = dict(capture.get("agentConfiguration") or {})
    inp = dict(capture.get("input") or {})
    memory = dict(capture.get("memoryState") or {})
    sampling = dict(config.get("samplingParameters") or {})
    inputs = vary_inputs(prepared, result.variations) if result.variations else prepared.inputs
    for variation in result.variations:
        name, value = variation.name, variation.value
        if name == "system_prompt":
            config["systemPromptText"] = value
            config["systemPromptVersion"] = variation.version or ""
        elif name == "tool_schema":
            config["toolSchemaJson"] = value
            config["toolSchemaVersion"] = variation.version or ""
        elif name == "sampling":
            sampling = dict(value)
        elif variation.variable == "sampling" and variation.field:
            if value is None:
                sampling.pop(variation.field, None)
            else:
                sampling[variation.field] = value
        elif name == "request":
            payload = inp.get("requestPayload")
            if isinstance(payload, dict) and "message" in payload:
                inp["requestPayload"] = {**payload, "message": value}
        elif variation.variable == "memory" and isinstance(inputs, ReplayInputs):
            memory["workingSetEntries"] = _entries(capture, inputs)
    config["samplingParameters"] = sampling
    if result.model:
        config["modelIdentifier"] = result.model
    externals = inputs.externals
    state = dict(capture.get("externalState") or {})
    state["observableExternals"] = [
        {**e, "capturedValue": externals.get(str(e.get("key")), e.get("capturedValue"))}
        for e in state.get("observableExternals") or ()
    ]
    return {
        **capture,
        "captureLevel": "full",
        "input": inp,
        "agentConfiguration": config,
        "memoryState": memory,
        "externalState": state,
        "executionTrace": _trace(capture, result),
        "outcome": {"status": "unknown", "reason": "replayed"},
    }


def _entries(capture: Mapping[str, Any], inputs: ReplayInputs) -> list[dict[str, Any]]:
    captured = {
        str(e.get("entryId")): e for e in (capture.get("memoryState") or {}).get("workingSetEntries") or ()
    }
    out: list[dict[str, Any]] = []
    for position, item in enumerate(inputs.memory):
        base = captured.get(item.entry_id, {"entryId": item.entry_id, "tier": item.tier})
        out.append({**base, "renderedContent": item.content, "contextPosition": position})
    return out


def _trace(capture: Mapping[str, Any], result: ReplayResult) -> dict[str, Any]:
    trace = capture.get("executionTrace") or {}
    recorded = {int(c.get("sequence") or 0): c for c in trace.get("toolCalls") or ()}
    calls: list[dict[str, Any]] = []
    for call in result.tool_calls:
        item: dict[str, Any] = {
            "sequence": call.sequence,
            "toolName": call.tool_name,
            "input": call.input,
            "inputHash": call.input_hash,
        }
        if call.source == "recorded":  # answered from the recording: its output is what the agent saw
            source = recorded.get(call.sequence) or {}
            item["output"] = source.get("output")
            item["errorRef"] = source.get("errorRef")
        calls.append(item)
    return {
        "toolCalls": calls,
        "finalOutputText": result.final_output,
        "stopReason": result.stop_reason,
        "totalLatencyMs": trace.get("totalLatencyMs"),
    }

"""The replay report: original vs replay-as-captured vs each variation, with a one-line verdict.

For each run: final output equal?, tool-call sequence equal?, first divergent step, stop reason.
The as-captured replay is compared with the original capture (does the failure reproduce?); each
variation is compared with the as-captured replay, its control, so model drift since capture
time is not mistaken for the variable's effect. Verdicts:
``outcome changed → <variable> is implicated`` or ``no change → <variable> cleared for 1 value
tried (<value>; <n> runs)``: one value that does not flip the outcome clears the variable for that
value only, and the verdict says so (a sweep over many values is ``blackbox probe``). A variation
equal to the captured value is refused before anything runs (:class:`NoVariation`).

Rendered as a rich table (default) or JSON; :func:`run_rows` turns it into ``replay_runs`` rows.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from consumers.replay.fidelity import fidelity_note, fidelity_of
from consumers.replay.outcome import Comparison, Outcome, compare
from consumers.replay.replayer import PreparedCapture, Replayer, ReplayResult, require_variation
from consumers.replay.runlog import ReplayRunRow
from consumers.replay.variance import Variance, distribution
from consumers.replay.variation import Variation
from consumers.terminal import clean, text
from schemas.errors import ModelClientError

OUTPUT_WIDTH = 48


@dataclass(frozen=True, slots=True)
class ReportRow:
    """One replayed configuration: its (representative) result, comparison and verdict."""

    label: str
    variation: Variation | None
    result: ReplayResult
    comparison: Comparison | None
    verdict: str
    variance: Variance | None = None
    attempts: tuple[ReplayResult, ...] = ()

    @property
    def outcome_changed(self) -> bool:
        return self.comparison is not None and self.comparison.changed


@dataclass(frozen=True, slots=True)
class ReplayReport:
    decision_id: str
    agent_id: str
    original: Outcome
    verified: bool
    verification_note: str | None
    caveats: tuple[str, ...]
    rows: tuple[ReportRow, ...]
    captured_endpoint: str | None = None
    model_endpoint: str | None = None
    fidelity: str = "sdk"
    fidelity_note: str = ""
    """What the capture's fidelity lets this replay prove (:mod:`consumers.replay.fidelity`)."""
    view: str = "original"
    """Which view of the content was replayed: ``redacted`` or ``original`` (:data:`~consumers.replay.replayer.View`)."""

    @property
    def as_captured(self) -> ReportRow:
        return self.rows[0]

    @property
    def variations(self) -> tuple[ReportRow, ...]:
        return self.rows[1:]

    def row(self, variable: str) -> ReportRow:
        for row in self.variations:
            if row.variation is not None and row.variation.name == variable:
                return row
        raise KeyError(variable)


def build_report(
    prepared: PreparedCapture,
    as_captured: Sequence[ReplayResult],
    variations: Sequence[tuple[Variation, Sequence[ReplayResult]]] = (),
    *,
    variance: bool = False,
) -> ReplayReport:
    """Assemble the report from the as-captured attempts and each variation's attempts."""
    original = prepared.original
    control_var = distribution(as_captured) if variance else None
    control = control_var.modal.example if control_var else as_captured[0]
    control_cmp = compare(original, control.outcome) if control.reached_model else None
    rows = [
        ReportRow(
            label="as captured",
            variation=None,
            result=control,
            comparison=control_cmp,
            verdict=_control_verdict(control, control_cmp),
            variance=control_var,
            attempts=tuple(as_captured),
        )
    ]
    caveats = _caveats(prepared, control, control_cmp)
    reference = control.outcome if control.reached_model else original
    for variation, attempts in variations:
        dist = distribution(attempts) if variance else None
        result = dist.modal.example if dist else attempts[0]
        comparison = compare(reference, result.outcome) if result.reached_model else None
        rows.append(
            ReportRow(
                label=variation.describe(),
                variation=variation,
                result=result,
                comparison=comparison,
                verdict=_variation_verdict(variation, result, comparison, runs=len(attempts)),
                variance=dist,
                attempts=tuple(attempts),
            )
        )
        if result.substitute_caveat and result.substitute_caveat not in caveats:
            caveats.append(result.substitute_caveat)
    return ReplayReport(
        decision_id=prepared.decision_id,
        agent_id=prepared.agent_id,
        original=original,
        verified=prepared.verified,
        verification_note=prepared.verification_note,
        caveats=tuple(caveats),
        rows=tuple(rows),
        captured_endpoint=prepared.captured_endpoint,
        model_endpoint=prepared.model_endpoint,
        fidelity=fidelity_of(prepared.capture),
        fidelity_note=fidelity_note(prepared.capture),
        view=prepared.view,
    )


def _control_verdict(result: ReplayResult, comparison: Comparison | None) -> str:
    divergence = result.divergence
    if divergence is not None:
        return f"diverges from the recording at step {divergence.step}: {divergence}"
    if comparison is None:
        return f"replay failed: {result.replay_failure}"
    if not comparison.changed:
        return "reproduces the capture"
    return f"does not reproduce the capture (first divergent step {comparison.first_divergent_step})"


def _variation_verdict(
    variation: Variation, result: ReplayResult, comparison: Comparison | None, *, runs: int
) -> str:
    if comparison is None:
        return f"replay failed: {result.replay_failure}"
    if comparison.changed:
        return f"outcome changed → {variation.name} is implicated"
    verdict = (
        f"no change → {variation.name} cleared for 1 value tried "
        f"({variation.describe()}; {runs} run{'' if runs == 1 else 's'})"
    )
    if variation.variable == "external_state" and variation.field not in result.external_reads:
        verdict += " (the replay never read it)"
    return verdict


def _caveats(prepared: PreparedCapture, control: ReplayResult, comparison: Comparison | None) -> list[str]:
    caveats: list[str] = []
    if not prepared.verified:
        caveats.append(f"{prepared.verification_note or 'UNVERIFIED'}: this replay is not evidence")
    if control.substitute_caveat:
        caveats.append(control.substitute_caveat)
    if control.live:
        caveats.append("LIVE replay: tool calls went to real systems (authorized and logged)")
    if comparison is None or comparison.changed:
        caveats.append(
            "the as-captured replay does not reproduce the original; variation verdicts are relative "
            "to the as-captured replay, not to the capture"
        )
    return caveats


# -- rendering ---------------------------------------------------------------------------------
def report_json(report: ReplayReport) -> dict[str, Any]:
    return {
        "decisionId": report.decision_id,
        "agentId": report.agent_id,
        "verified": report.verified,
        "verificationNote": report.verification_note,
        "fidelity": report.fidelity,
        "fidelityNote": report.fidelity_note,
        "view": report.view,
        "capturedEndpoint": report.captured_endpoint,
        "modelEndpoint": report.model_endpoint,
        "requestChecks": [
            {"part": c.part, "expected": c.expected, "actual": c.actual, "ok": c.ok}
            for c in report.as_captured.result.request_checks
        ],
        "caveats": list(report.caveats),
        "original": _outcome_json(report.original),
        "runs": [_row_json(row) for row in report.rows],
    }


def _outcome_json(outcome: Outcome) -> dict[str, Any]:
    return {
        "toolCalls": outcome.tool_names(),
        "finalOutput": outcome.final_output,
        "stopReason": outcome.stop_reason,
    }


def _row_json(row: ReportRow) -> dict[str, Any]:
    result, comparison = row.result, row.comparison
    divergence = result.divergence
    return {
        "label": row.label,
        "variable": row.variation.name if row.variation else None,
        "model": result.model,
        "live": result.live,
        "toolCalls": [c.to_json() for c in result.tool_calls],
        "finalOutput": result.final_output,
        "stopReason": result.stop_reason,
        "finalOutputEqual": comparison.final_output_equal if comparison else None,
        "toolCallsEqual": comparison.tool_calls_equal if comparison else None,
        "firstDivergentStep": comparison.first_divergent_step if comparison else None,
        "outcomeChanged": row.outcome_changed,
        "divergence": None
        if divergence is None
        else {"step": divergence.step, "call": divergence.call, "message": str(divergence)},
        "error": None
        if result.replay_failure is None or divergence is not None
        else f"{type(result.replay_failure).__name__}: {result.replay_failure}",
        "externalReads": list(result.external_reads),
        "substituteCaveat": result.substitute_caveat,
        "verdict": row.verdict,
        "variance": row.variance.to_json() if row.variance else None,
    }


_VIEW_NOTES = {
    "redacted": "redacted (personal data replayed as placeholders; --reveal with a personal_data grant "
    "replays the original)",
    "original": "original",
}


def render_table(report: ReplayReport, console: Console) -> None:
    """The report for a terminal. Everything that came from the capture or the model is data: given to
    Rich as :class:`~rich.text.Text` through :mod:`consumers.terminal` (escaped, never markup)."""
    status = (
        Text("verified", style="green") if report.verified else text(report.verification_note, "bold red")
    )
    head = Text.assemble(
        ("replay ", "bold"),
        text(report.decision_id, "bold"),
        " (agent ",
        text(report.agent_id),
        ") — ",
        status,
    )
    console.print(head)
    console.print(
        text(
            f"model endpoint: {report.model_endpoint or 'unknown'} — captured: {report.captured_endpoint or 'none'}"
        )
    )
    console.print(text(f"fidelity: {report.fidelity_note or report.fidelity}"))
    console.print(text(f"view: {_VIEW_NOTES.get(report.view, report.view)}"))
    table = Table(show_lines=False)
    for column in (
        "run",
        "model",
        "tool calls",
        "final output",
        "stop",
        "= output",
        "= tools",
        "1st div.",
        "verdict",
    ):
        table.add_column(column, overflow="fold")
    original = report.original
    table.add_row(
        "original",
        "",
        text(" → ".join(original.tool_names())),
        _short(original.final_output),
        text(original.stop_reason),
        "",
        "",
        "",
        "",
    )
    for row in report.rows:
        result, comparison = row.result, row.comparison
        table.add_row(
            text(row.label),
            text(result.model),
            text(
                " → ".join(c.tool_name + ("!" if c.source == "unrecorded" else "") for c in result.tool_calls)
            ),
            _short(result.final_output),
            text(result.stop_reason),
            _mark(comparison.final_output_equal if comparison else None),
            _mark(comparison.tool_calls_equal if comparison else None),
            str(comparison.first_divergent_step or "") if comparison else "",
            text(row.verdict),
        )
    console.print(table)
    for row in report.rows:
        if row.variance is not None:
            console.print(_variance_table(row.label, row.variance))
    for caveat in report.caveats:
        console.print(Text.assemble(("caveat:", "yellow"), " ", text(caveat)))


def _variance_table(label: str, variance: Variance) -> Table:
    table = Table(title=text(f"{label}: {variance.runs} runs, {variance.distinct} distinct outcome(s)"))
    for column in ("count", "tool calls", "final output", "matches original"):
        table.add_column(column, overflow="fold")
    for bucket in variance.buckets:
        table.add_row(
            str(bucket.count),
            text(" → ".join(bucket.tool_names)),
            _short(bucket.outcome.final_output),
            _mark(bucket.matches_original),
        )
    return table


def _short(value: str | None) -> Text:
    if value is None:
        return Text("—")
    shown = clean(value)
    return Text(shown if len(shown) <= OUTPUT_WIDTH else shown[: OUTPUT_WIDTH - 1] + "…")


def _mark(value: bool | None) -> Text:
    return Text(
        "" if value is None else ("yes" if value else "no"), style="" if value is not False else "red"
    )


# -- replay_runs -------------------------------------------------------------------------------
def run_rows(report: ReplayReport, *, at: datetime, run_id: str | None = None) -> list[ReplayRunRow]:
    """One ``replay_runs`` row per attempt of every configuration in ``report``."""
    run_id = run_id or uuid.uuid4().hex
    rows: list[ReplayRunRow] = []
    for row in report.rows:
        for attempt, result in enumerate(row.attempts or (row.result,)):
            reference = report.original if row.variation is None else report.as_captured.result.outcome
            comparison = compare(reference, result.outcome) if result.reached_model else None
            rows.append(
                result_row(
                    result,
                    comparison,
                    run_id=run_id,
                    at=at,
                    kind="replay" if row.variation is None else "variation",
                    verdict=row.verdict,
                    attempt=attempt,
                )
            )
    return rows


def result_row(
    result: ReplayResult,
    comparison: Comparison | None,
    *,
    run_id: str,
    at: datetime,
    kind: str,
    verdict: str,
    attempt: int = 0,
) -> ReplayRunRow:
    variation = result.variations[0] if len(result.variations) == 1 else None
    variable = variation.name if variation else "+".join(v.name for v in result.variations)
    value = variation.describe() if variation else "; ".join(v.describe() for v in result.variations)
    failure = result.replay_failure
    return ReplayRunRow(
        run_id=run_id,
        at=at,
        decision_id=result.decision_id,
        agent_id=result.agent_id,
        kind=kind,
        variable=variable,
        variation_value=value,
        attempt=attempt,
        model_used=result.model,
        substitute_model=result.model if result.substitute_caveat else "",
        final_output_equal=bool(comparison and comparison.final_output_equal),
        tool_sequence_equal=bool(comparison and comparison.tool_calls_equal),
        first_divergent_step=comparison.first_divergent_step if comparison else None,
        stop_reason=result.stop_reason,
        verdict=verdict,
        outcome_changed=bool(comparison and comparison.changed),
        detail="" if failure is None else f"{type(failure).__name__}: {failure}",
    )


def replay_with_report(
    replayer: Replayer, prepared: PreparedCapture, *, variations: Sequence[Variation] = (), runs: int = 1
) -> ReplayReport:
    """Replay as captured and under each variation (``runs`` times each) and build the report.

    An as-captured replay that cannot reach the model at all (model unavailable and no substitute,
    endpoint down) raises: there is nothing to compare against. A variation equal to the captured
    value raises :class:`~consumers.replay.replayer.NoVariation` before anything runs.
    """
    if runs < 1:
        raise ValueError("runs must be at least 1")
    for variation in variations:
        require_variation(prepared, variation)
    as_captured = [replayer.run(prepared) for _ in range(runs)]
    failure = as_captured[0].replay_failure
    if isinstance(failure, ModelClientError):
        raise failure
    attempts = [(v, [replayer.run(prepared, variation=v) for _ in range(runs)]) for v in variations]
    return build_report(prepared, as_captured, attempts, variance=runs > 1)

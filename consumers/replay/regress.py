"""Regression replay: past full captures replayed under a new configuration, judged and gated.

Captures are loaded, passed through the gate (one access-log write per batch), verified and
rebuilt on the calling thread; the replays run on a thread pool (model calls are I/O). Every result
is appended to ``replay_runs`` (with the suite's name when a finding's suite was replayed).

Each decision gets one status:

- ``not_replayed`` — refused (access, verification) or the run could not finish; the reason is named;
- with checks (the pacts, and a finding's rule for ``--suite``: :mod:`consumers.replay.checks`),
  run on the capture and on the replay:
  ``regressed`` (a check that held on the capture fails on the replay), ``fixed`` (a check that
  failed holds, and nothing fails any more), ``diverged`` (the replay left the recording and a check
  could not be decided on what it did), ``unchanged`` (every check gives what it gave);
- without checks nothing says what correct is: ``diverged``, ``changed`` or ``unchanged`` outcome.

Every check that fails or cannot be decided on a replay is a *failure*, named by decision and rule.
The run passes (:attr:`RegressionResult.passed`, exit code 0 of ``blackbox regress``) only when
nothing regressed, nothing failed and every decision was replayed.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from consumers.replay.checks import Check, CheckResult, replayed_capture, run_checks
from consumers.replay.outcome import compare
from consumers.replay.replayer import PreparedCapture, Replayer, ReplayResult
from consumers.replay.report import result_row
from consumers.replay.runlog import ReplayRunLog, ReplayRunRow
from consumers.replay.variation import Variation

ROW_BATCH = 200


Status = Literal["fixed", "regressed", "unchanged", "changed", "diverged", "not_replayed"]
STATUSES: tuple[Status, ...] = ("fixed", "regressed", "unchanged", "changed", "diverged", "not_replayed")


@dataclass(frozen=True, slots=True)
class DecisionVerdict:
    """What the change did to one decision: its status, and every check before and after."""

    decision_id: str
    status: Status
    before: tuple[CheckResult, ...] = ()
    after: tuple[CheckResult, ...] = ()
    outcome_changed: bool | None = None
    first_divergent_step: int | None = None
    diverged_at: int | None = None
    reason: str = ""  # why it was not replayed

    @property
    def failures(self) -> tuple[CheckResult, ...]:
        """Checks that fail or cannot be decided on the replay."""
        return tuple(c for c in self.after if c.verdict != "holds")

    @property
    def regressed_checks(self) -> tuple[str, ...]:
        held = {c.check for c in self.before if c.verdict == "holds"}
        return tuple(c.check for c in self.after if c.verdict == "fails" and c.check in held)

    @property
    def fixed_checks(self) -> tuple[str, ...]:
        failed = {c.check for c in self.before if c.verdict == "fails"}
        return tuple(c.check for c in self.after if c.verdict == "holds" and c.check in failed)

    def summary(self) -> str:
        """One line for ``replay_runs.verdict`` and the terminal: the status and the rules behind it,
        e.g. ``regressed: refund_at_most_balance; failing finding:wrong-refund``."""
        if self.status == "not_replayed":
            return f"not replayed: {self.reason}"
        if self.status == "regressed":
            parts = [f"regressed: {', '.join(self.regressed_checks)}"]
        elif self.status == "fixed":
            parts = [f"fixed: {', '.join(self.fixed_checks)}"]
        elif self.status == "diverged" and self.diverged_at is not None:
            parts = [f"diverged at step {self.diverged_at}"]
        else:
            parts = [self.status]
        if self.fixed_checks and self.status != "fixed":
            parts.append("fixed " + ", ".join(self.fixed_checks))
        failing = [c.check for c in self.failures if c.check not in self.regressed_checks]
        if failing:
            parts.append("failing " + ", ".join(failing))
        if self.diverged_at is not None and self.status != "diverged":
            parts.append(f"left the recording at step {self.diverged_at}")
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "decisionId": self.decision_id,
            "status": self.status,
            "summary": self.summary(),
            "outcomeChanged": self.outcome_changed,
            "firstDivergentStep": self.first_divergent_step,
            "divergedAt": self.diverged_at,
            "fixed": list(self.fixed_checks),
            "regressed": list(self.regressed_checks),
            "failures": [{"rule": c.check, "verdict": c.verdict, "detail": c.detail} for c in self.failures],
            "reason": self.reason or None,
        }


@dataclass(frozen=True, slots=True)
class RegressionResult:
    run_id: str
    configuration: tuple[Variation, ...]
    results: dict[str, ReplayResult] = field(default_factory=dict)
    verdicts: dict[str, DecisionVerdict] = field(default_factory=dict)
    checks: tuple[str, ...] = ()
    suite: str | None = None
    seconds: float = 0.0

    @property
    def status(self) -> dict[str, str]:
        return {d: v.status for d, v in self.verdicts.items()}

    @property
    def changed(self) -> list[str]:
        """Decisions whose outcome differs from the capture (or whose replay left the recording)."""
        return [d for d, v in self.verdicts.items() if v.outcome_changed or v.diverged_at is not None]

    @property
    def counts(self) -> dict[str, int]:
        counter = Counter(self.status.values())
        shown = STATUSES if self.checks else ("unchanged", "changed", "diverged", "not_replayed")
        return {k: counter.get(k, 0) for k in shown}

    @property
    def failures(self) -> list[tuple[str, CheckResult]]:
        """Every (decision, check) that fails or cannot be decided after the change."""
        return [(d, c) for d, v in self.verdicts.items() for c in v.failures]

    @property
    def passed(self) -> bool:
        """The gate: nothing regressed, nothing failed, everything replayed."""
        counts = self.counts
        return not counts.get("regressed") and not counts.get("not_replayed") and not self.failures

    @property
    def replays_per_second(self) -> float:
        return len(self.results) / self.seconds if self.seconds else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "runId": self.run_id,
            "suite": self.suite,
            "configuration": [v.describe() for v in self.configuration],
            "checks": list(self.checks),
            "replayed": len(self.results),
            "counts": self.counts,
            "passed": self.passed,
            "decisions": [
                v.to_json() for v in self.verdicts.values() if v.status != "unchanged" or v.failures
            ],
            "failures": [
                {"decisionId": d, "rule": c.check, "verdict": c.verdict, "detail": c.detail}
                for d, c in self.failures
            ],
            "seconds": round(self.seconds, 3),
        }


def judge(
    prepared: PreparedCapture | None, result: ReplayResult, checks: Sequence[Check] = ()
) -> DecisionVerdict:
    """The status of one replayed decision (module docstring); ``prepared`` None: it was refused."""
    divergence = result.divergence
    if (
        prepared is None
        or not result.reached_model
        or (result.replay_failure is not None and divergence is None)
    ):
        failure = result.replay_failure
        reason = "no result" if failure is None else f"{type(failure).__name__}: {failure}"
        return DecisionVerdict(result.decision_id, "not_replayed", reason=reason)
    comparison = result.compared_to_original()
    base = DecisionVerdict(
        result.decision_id,
        "unchanged",
        outcome_changed=None if comparison is None else comparison.changed,
        first_divergent_step=None if comparison is None else comparison.first_divergent_step,
        diverged_at=None if divergence is None else divergence.step,
    )
    status: Status
    if not checks:
        status = "diverged" if divergence else ("changed" if base.outcome_changed else "unchanged")
        return replace(base, status=status)
    verdict = replace(
        base,
        before=run_checks(checks, prepared.capture),
        after=run_checks(checks, replayed_capture(prepared, result)),
    )
    if verdict.regressed_checks:
        status = "regressed"
    elif divergence is not None and any(c.verdict == "error" for c in verdict.after):
        status = "diverged"
    elif verdict.fixed_checks and not verdict.failures:
        status = "fixed"
    else:
        status = "unchanged"
    return replace(verdict, status=status)


def regress(
    replayer: Replayer,
    decision_ids: Iterable[str],
    *,
    configuration: Sequence[Variation] = (),
    checks: Sequence[Check] = (),
    suite: str | None = None,
    workers: int = 4,
    run_log: ReplayRunLog | None = None,
    progress: bool = True,
    console: Console | None = None,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> RegressionResult:
    """Replay each decision under ``configuration``, judge it by ``checks`` and record every run."""
    ids = list(decision_ids)
    run_id = uuid.uuid4().hex
    config = tuple(configuration)
    results: dict[str, ReplayResult] = {}
    verdicts: dict[str, DecisionVerdict] = {}
    pending_rows: list[ReplayRunRow] = []
    started = time.perf_counter()

    def finish(prepared: PreparedCapture | None, result: ReplayResult) -> None:
        results[result.decision_id] = result
        verdict = verdicts[result.decision_id] = judge(prepared, result, checks)
        row = result_row(
            result, _comparison(result), run_id=run_id, at=clock(), kind="regress", verdict=verdict.summary()
        )
        pending_rows.append(replace(row, suite=suite or ""))
        if run_log is not None and len(pending_rows) >= ROW_BATCH:
            run_log.append(pending_rows)
            pending_rows.clear()

    bar = Progress(
        TextColumn("regress"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=not progress,
        transient=False,
    )
    with bar, ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="replay") as pool:
        task = bar.add_task("replaying", total=len(ids))
        futures: list[tuple[PreparedCapture, Future[ReplayResult]]] = []
        for prepared in replayer.prepare_many(ids):
            if isinstance(prepared, ReplayResult):  # refused before it could run
                finish(None, replace(prepared, variations=config))
                bar.advance(task)
                continue
            future = pool.submit(replayer.run, prepared, configuration=config)
            future.add_done_callback(lambda _f: bar.advance(task))
            futures.append((prepared, future))
        for prepared, future in futures:
            finish(prepared, future.result())
    if run_log is not None and pending_rows:
        run_log.append(pending_rows)
    ordered = {d: results[d] for d in ids if d in results}
    return RegressionResult(
        run_id=run_id,
        configuration=config,
        results=ordered,
        verdicts={d: verdicts[d] for d in ordered},
        checks=tuple(c.name for c in checks),
        suite=suite,
        seconds=time.perf_counter() - started,
    )


def _comparison(result: ReplayResult) -> Any:
    return (
        None
        if result.original is None or not result.reached_model
        else compare(result.original, result.outcome)
    )


def _first_step(result: ReplayResult) -> int | None:
    comparison = _comparison(result)
    return None if comparison is None else comparison.first_divergent_step

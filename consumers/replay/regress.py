"""Regression replay: a sample of past full captures, replayed under a new configuration.

Captures are loaded, passed through the gate (one access-log write per batch), verified and
rebuilt on the calling thread; the replays run on a thread pool (model calls are I/O). Each
decision whose outcome differs from its capture is a regression candidate; every result is
appended to ``replay_runs``.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from consumers.replay.outcome import compare
from consumers.replay.replayer import Replayer, ReplayResult
from consumers.replay.report import result_row
from consumers.replay.runlog import ReplayRunLog, ReplayRunRow
from consumers.replay.variation import Variation

ROW_BATCH = 200


@dataclass(frozen=True, slots=True)
class RegressionResult:
    run_id: str
    configuration: tuple[Variation, ...]
    results: dict[str, ReplayResult] = field(default_factory=dict)
    status: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def changed(self) -> list[str]:
        return [d for d, s in self.status.items() if s in ("changed", "diverged")]

    @property
    def counts(self) -> dict[str, int]:
        counter = Counter(self.status.values())
        return {k: counter.get(k, 0) for k in ("unchanged", "changed", "diverged", "failed")}

    @property
    def replays_per_second(self) -> float:
        return len(self.results) / self.seconds if self.seconds else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "runId": self.run_id,
            "configuration": [v.describe() for v in self.configuration],
            "replayed": len(self.results),
            "counts": self.counts,
            "changed": [
                {
                    "decisionId": d,
                    "status": self.status[d],
                    "firstDivergentStep": _first_step(self.results[d]),
                }
                for d in self.changed
            ],
            "failed": {
                d: f"{type(r.replay_failure).__name__}: {r.replay_failure}"
                for d, r in self.results.items()
                if self.status[d] == "failed"
            },
            "seconds": round(self.seconds, 3),
        }


def classify(result: ReplayResult) -> str:
    """``unchanged`` / ``changed`` / ``diverged`` (an unrecorded call) / ``failed`` (did not run)."""
    if result.divergence is not None:
        return "diverged"
    comparison = result.compared_to_original()
    if not result.reached_model or comparison is None or result.replay_failure is not None:
        return "failed"
    return "changed" if comparison.changed else "unchanged"


def regress(
    replayer: Replayer,
    decision_ids: Iterable[str],
    *,
    configuration: Sequence[Variation] = (),
    workers: int = 4,
    run_log: ReplayRunLog | None = None,
    progress: bool = True,
    console: Console | None = None,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> RegressionResult:
    """Replay each decision under ``configuration`` and report those whose outcome changed."""
    ids = list(decision_ids)
    run_id = uuid.uuid4().hex
    config = tuple(configuration)
    results: dict[str, ReplayResult] = {}
    status: dict[str, str] = {}
    pending_rows: list[ReplayRunRow] = []
    started = time.perf_counter()

    def finish(result: ReplayResult) -> None:
        results[result.decision_id] = result
        verdict = status[result.decision_id] = classify(result)
        pending_rows.append(
            result_row(
                result, _comparison(result), run_id=run_id, at=clock(), kind="regress", verdict=verdict
            )
        )
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
        futures: list[Future[ReplayResult]] = []
        for prepared in replayer.prepare_many(ids):
            if isinstance(prepared, ReplayResult):  # refused before it could run
                finish(replace(prepared, variations=config))
                bar.advance(task)
                continue
            future = pool.submit(replayer.run, prepared, configuration=config)
            future.add_done_callback(lambda _f: bar.advance(task))
            futures.append(future)
        for future in futures:
            finish(future.result())
    if run_log is not None and pending_rows:
        run_log.append(pending_rows)
    ordered = {d: results[d] for d in ids if d in results}
    return RegressionResult(
        run_id=run_id,
        configuration=config,
        results=ordered,
        status={d: status[d] for d in ordered},
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

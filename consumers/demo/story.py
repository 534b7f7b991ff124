"""The demo, step by step: record → ingest → trends → replay → vary → bisect → pact → conclusion.

Every step uses the real pipeline (Recorder, spool or Kafka, ingest, segments, ClickHouse index,
the replay sandbox); only the model and the agent's world are simulated, exactly what replay
substitutes anyway. The data stays in ``data_dir`` so the person can keep exploring.
"""

from __future__ import annotations

import shutil
import uuid
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from consumers.access import Caller
from consumers.app.runtime import Runtime, open_runtime
from consumers.app.settings import ServiceSettings, load_service_settings
from consumers.demo.agent import (
    MODEL_VERSIONS,
    PROMPT_VERSIONS,
    SimClock,
    run_agent,
    simulation_start,
    system_prompt,
)
from consumers.demo.loop import close_the_loop
from consumers.demo.model import ScriptedSupportModel
from consumers.demo.store import first_failed_capture
from consumers.demo.world import World
from consumers.index import run_trend
from consumers.replay import (
    CallableModelClient,
    IndexReplayRunLog,
    Replayer,
    Variation,
    bisect_candidates,
    replay_with_report,
)
from consumers.replay.report import render_table, result_row, run_rows
from producers.evidence import TrustStore, generate_keypair, load_signer
from producers.policy import CapturePolicy
from producers.recorder import Recorder
from schemas.errors import BlackboxError

MARKER = ".blackbox-demo"
AGENT_ID = "agt_support"


@dataclass(frozen=True, slots=True)
class DemoResult:
    """What the demo found; ``implicated`` and ``cleared`` name variables, ``bisect_first`` a prompt."""

    data_dir: Path
    decisions: int
    failures: int
    worst_prompt: str
    failing_working_sets: str  # the smallest working-set bucket with failures (trend working_set_vs_failure)
    failed_decision: str
    reproduced: bool
    implicated: tuple[str, ...]
    cleared: tuple[str, ...]
    bisect_first: str | None
    bisect_replays: int
    pact_version: str | None = None  # the version the finding became, applied (None: its gate failed)
    incidence_before: float = 0.0  # the agent's failed decisions per 1,000 before it was applied ...
    incidence_after: float = 0.0  # ... and after

    def conclusion(self) -> str:
        cause = f"system prompt {self.bisect_first}"
        if "memory" in self.implicated:
            cause += f" together with large working sets (failures only from {self.failing_working_sets} up)"
        outcome = "reproduced the wrong refund" if self.reproduced else "did NOT reproduce the failure"
        return (
            f"Root cause: {cause}. "
            f"Replaying {self.failed_decision} {outcome}; varying "
            f"{' and '.join(self.implicated)} alone clears it, while {', '.join(self.cleared)} "
            f"change nothing (one value each, one run). Bisect over {', '.join(PROMPT_VERSIONS)} names {self.bisect_first} "
            f"in {self.bisect_replays} replays."
            + (
                f" Pact version {self.pact_version} now binds the agent: failures went from "
                f"{self.incidence_before:.1f} per 1,000 decisions before it to {self.incidence_after:.1f} after."
                if self.pact_version
                else " The pact change did not pass its gate and was not applied."
            )
        )


def prepare_data_dir(data_dir: Path) -> None:
    """A fresh directory; an earlier demo's directory (it carries a marker) is replaced."""
    if data_dir.exists() and any(data_dir.iterdir()):
        if not (data_dir / MARKER).exists():
            raise BlackboxError(
                f"{data_dir} exists and is not a blackbox demo directory; choose another --dir"
            )
        shutil.rmtree(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / MARKER).write_text("created by blackbox demo; safe to delete\n", encoding="utf-8")


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description:<28}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    )


def run_demo(
    *, data_dir: Path, decisions: int = 3000, days: int = 14, console: Console | None = None
) -> DemoResult:
    console = console or Console()
    prepare_data_dir(data_dir)
    settings = load_service_settings(data_dir=data_dir)
    _trust_new_key(settings)
    start = simulation_start(days)

    console.rule("[bold]1. An agent at work")
    console.print(
        f"A support agent answers {decisions:,} requests over {days} simulated days "
        f"(prompts {', '.join(PROMPT_VERSIONS)}; model versions {', '.join(MODEL_VERSIONS)}).\n"
        f"Transport: {settings.transport}; blobs: {settings.blob}; index: {settings.index_engine}."
    )
    runs = _record(settings, decisions=decisions, days=days, start=start, console=console)
    wrong = sum(r.wrong_refund for r in runs)

    with open_runtime(settings) as rt:
        console.rule("[bold]2. Ingest")
        _ingest(rt, expected=decisions + wrong, console=console)

        index = rt.index
        console.rule("[bold]3. What the SREs see")
        worst, failing_sets = _trends(
            index, since=start, until=start + timedelta(days=days + 1), console=console
        )

        console.rule("[bold]4. Replay one failed decision")
        failed_id = _pick_failed(index, worst)
        console.print(f"Picked [bold]{failed_id}[/bold], flagged by the refund auditor.")
        replayer = _replayer(rt)
        prepared = replayer.prepare(failed_id)
        variations = _variations(prepared.capture)
        report = replay_with_report(replayer, prepared, variations=variations)
        log = IndexReplayRunLog(index)
        log.append(run_rows(report, at=datetime.now(UTC)))
        render_table(report, console)
        reproduced = bool(report.as_captured.comparison and not report.as_captured.comparison.changed)
        implicated = tuple(r.variation.variable for r in report.rows if r.variation and _changed(r))
        cleared = tuple(r.variation.variable for r in report.rows if r.variation and not _changed(r))

        console.rule("[bold]5. Bisect the prompt versions")
        candidates = [
            Variation("system_prompt", system_prompt(v), label=f"system_prompt={v}") for v in PROMPT_VERSIONS
        ]
        bisect = bisect_candidates(replayer, prepared, candidates)
        run_id = uuid.uuid4().hex
        log.append(
            [
                result_row(
                    s.result,
                    s.result.compared_to_original(),
                    run_id=run_id,
                    at=datetime.now(UTC),
                    kind="bisect",
                    verdict="hit" if s.hit else "miss",
                )
                for s in bisect.steps
            ]
        )
        first = PROMPT_VERSIONS[bisect.first] if bisect.first is not None else None
        console.print(
            f"First prompt version that reproduces the failure: [bold red]{first}[/bold red] "
            f"({bisect.replays} replays for {len(candidates)} candidates)."
        )

        console.rule("[bold]6. Close the loop: the finding becomes a pact")
        after_n = max(100, decisions // days)

        def run_after(applied_at: datetime) -> None:
            console.print(f"The fix ships (prompt v4.6): the agent's next {after_n} decisions.")
            more = _record(
                settings,
                decisions=after_n,
                days=1,
                start=applied_at + timedelta(seconds=1),
                console=console,
                prompt_version="v4.6",
                day_length=timedelta(minutes=10),
            )
            _ingest(rt, expected=after_n + sum(r.wrong_refund for r in more), console=console)

        loop = close_the_loop(
            rt,
            agent_id=AGENT_ID,
            worst_prompt=worst,
            since=start,
            replayer=replayer,
            run_after=run_after,
            console=console,
        )

    result = DemoResult(
        data_dir=data_dir,
        decisions=decisions,
        failures=wrong,
        worst_prompt=worst,
        failing_working_sets=failing_sets,
        failed_decision=failed_id,
        reproduced=reproduced,
        implicated=implicated,
        cleared=cleared,
        bisect_first=first,
        bisect_replays=bisect.replays,
        pact_version=loop.version if loop.apply.applied else None,
        incidence_before=_per_1000(loop.before.failures, loop.before.decisions),
        incidence_after=_per_1000(loop.after.failures, loop.after.decisions),
    )
    console.rule("[bold]Conclusion")
    console.print(result.conclusion(), soft_wrap=True)
    console.print(
        f"\nThe data is in [bold]{data_dir}[/bold]. Keep exploring:\n"
        f"  export BLACKBOX_DATA_DIR={data_dir}\n"
        f"  blackbox trends failure_rate --since {start.date()}\n"
        f"  blackbox show {failed_id}\n"
        f"  blackbox verify {failed_id}\n"
        f"  blackbox replay {failed_id} --model-callable consumers.demo.model:ScriptedSupportModel "
        f"--vary system_prompt=v4.6\n"
        f"  blackbox probe {failed_id} --model-callable consumers.demo.model:ScriptedSupportModel "
        f"--sweep memory.truncate=0..16KB/1KB --sweep system_prompt=versions\n"
        f"  blackbox report --out report.html\n"
        f"  blackbox record {AGENT_ID} --since {start.date()}\n"
        + (
            f"  blackbox pact bundle {result.pact_version} -o pact-bundle.json\n"
            if result.pact_version
            else ""
        )
    )
    (data_dir / "prompt-v4.6.txt").write_text(system_prompt("v4.6"), encoding="utf-8")
    link, expires = console_link(data_dir)
    console.print(
        f"\nRead the evidence in a browser: run [bold]blackbox serve[/bold] (with BLACKBOX_DATA_DIR as above), "
        f"then open\n  {link}\n(signs in once as the local operator; valid until {expires:%H:%M} UTC)",
        soft_wrap=True,
    )
    return result


CONSOLE_ADDRESS = "http://127.0.0.1:8700/console"


def console_link(data_dir: Path, *, address: str = CONSOLE_ADDRESS) -> tuple[str, datetime]:
    """A one-time sign-in link to the console for the local operator (``blackbox serve``'s default address)."""
    from consumers.console.sessions import ConsoleSessions, console_file

    code, expires = ConsoleSessions(console_file(data_dir)).issue_link(
        Caller(identity="local-operator", scope="operator"), now=datetime.now(UTC)
    )
    return f"{address}/signin/link?code={code}", expires


def _per_1000(count: int, n: int) -> float:
    return 1000 * count / n if n else 0.0


def _changed(row: Any) -> bool:
    return (
        bool(row.comparison is not None and row.comparison.changed) or row.result.replay_failure is not None
    )


def _trust_new_key(settings: ServiceSettings) -> None:
    private_path, _ = generate_keypair(settings.data_dir / "keys")
    signer = load_signer(path=private_path)
    store = TrustStore.load(settings.resolved_trust_store, missing_ok=True)
    store.add(
        signer.public_raw, not_before=datetime(2000, 1, 1, tzinfo=UTC), note="blackbox demo runtime key"
    )
    store.save(settings.resolved_trust_store)
    (settings.data_dir / "signing-key.path").write_text(str(private_path), encoding="utf-8")


def _record(
    settings: ServiceSettings,
    *,
    decisions: int,
    days: int,
    start: datetime,
    console: Console,
    prompt_version: str | None = None,
    day_length: timedelta = timedelta(days=1),
) -> list:
    clock = SimClock(start)
    key_path = Path((settings.data_dir / "signing-key.path").read_text(encoding="utf-8"))
    recorder = Recorder.from_settings(
        settings,
        agent_id=AGENT_ID,
        runtime_id="rt_demo_1",
        signer=load_signer(path=key_path),
        policy=CapturePolicy(sample_one_in=20),
        clock=clock,
    )
    with _progress(console) as progress:
        task = progress.add_task("recording decisions", total=decisions)
        runs = list(
            run_agent(
                recorder=recorder,
                clock=clock,
                world=World(),
                decisions=decisions,
                days=days,
                start=start,
                progress=lambda n: progress.advance(task, n),
                prompt_version=prompt_version,
                day_length=day_length,
            )
        )
        if not recorder.close(timeout=120):
            raise BlackboxError(f"the recorder could not deliver every capture: {recorder.stats}")
    stats = recorder.stats
    console.print(
        f"{stats.delivered:,} captures and flags delivered, {stats.failed} failed, "
        f"{stats.dropped_queue_full} dropped."
    )
    return runs


def _ingest(rt: Runtime, *, expected: int, console: Console) -> None:
    with rt.ingest(batch_size=500, max_wait=0.2) as service, _progress(console) as progress:
        task = progress.add_task("ingesting into segments", total=expected)
        batches = -1
        while True:
            stats = service.run(drain=True, max_batches=max(0, batches) + 1)
            progress.update(task, completed=min(expected, stats.messages))
            if stats.batches == batches:
                break
            batches = stats.batches
    console.print(
        f"{stats.indexed:,} decisions indexed, {stats.flags} failure flags applied, "
        f"{stats.quarantined} quarantined, {stats.dead_lettered} dead-lettered."
    )


def _trends(index: Any, *, since: datetime, until: datetime, console: Console) -> tuple[str, str]:
    rows = run_trend(index, "failure_rate", since=since, until=until)
    by_cell: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    by_day: dict[str, dict[str, float]] = defaultdict(dict)
    for row in rows:
        cell = by_cell[(row["prompt_version"], row["model_version"])]
        cell[0] += int(row["decisions"])
        cell[1] += int(row["failures"])
        by_day[str(row["day"])][row["prompt_version"]] = float(row["failure_rate"])
    table = Table(title="failure rate by prompt version × model version (trend: failure_rate)")
    table.add_column("prompt")
    for model in MODEL_VERSIONS:
        table.add_column(f"model {model}", justify="right")
    rate = {}
    for prompt in PROMPT_VERSIONS:
        cells = []
        for model in MODEL_VERSIONS:
            n, f = by_cell.get((prompt, model), [0, 0])
            cells.append(f"{f}/{n} = {f / n:.1%}" if n else "—")
        total_n = sum(by_cell.get((prompt, m), [0, 0])[0] for m in MODEL_VERSIONS)
        total_f = sum(by_cell.get((prompt, m), [0, 0])[1] for m in MODEL_VERSIONS)
        rate[prompt] = total_f / total_n if total_n else 0.0
        table.add_row(prompt, *cells)
    console.print(table)
    days = Table(title="failure rate by day")
    days.add_column("day")
    days.add_column("prompt")
    days.add_column("failure rate", justify="right")
    for day in sorted(by_day):
        for prompt, value in sorted(by_day[day].items()):
            days.add_row(day, prompt, f"{value:.1%}" + (" ◀" if value > 0.05 else ""))
    console.print(days)
    worst = max(rate, key=lambda p: rate[p])
    failing_models = [m for m in MODEL_VERSIONS if by_cell.get((worst, m), [0, 0])[1] > 0]
    spread = (
        "on every model version, so the model is not the suspect"
        if len(failing_models) == len(MODEL_VERSIONS)
        else f"only on model {', '.join(failing_models)}"
    )
    console.print(f"The failures cluster on prompt [bold red]{worst}[/bold red], {spread}.")
    sizes = run_trend(index, "working_set_vs_failure", since=since, until=until)
    by_bytes: dict[str, list[int]] = {}
    for row in sizes:  # rows come ordered by bytes bucket
        cell = by_bytes.setdefault(row["bytes_bucket"], [0, 0])
        cell[0] += int(row["decisions"])
        cell[1] += int(row["failures"])
    failing = [bucket for bucket, (_, f) in by_bytes.items() if f > 0]
    console.print(
        "Failures by working-set size (trend: working_set_vs_failure): "
        + ", ".join(f"{b} {f}/{n}" for b, (n, f) in by_bytes.items())
    )
    return worst, failing[0] if failing else "none"


def _pick_failed(index: Any, prompt_version: str) -> str:
    decision_id = first_failed_capture(index, prompt_version)
    if decision_id is None:
        raise BlackboxError(f"no failed full capture on prompt {prompt_version}")
    return decision_id


def _replayer(rt: Runtime) -> Replayer:
    return rt.replayer(
        client=CallableModelClient(ScriptedSupportModel()),
        caller=Caller(identity="demo-incident-responder", scope="operator", reason="demo: refund incident"),
    )


def _variations(capture: Mapping[str, Any]) -> list[Variation]:
    """One variation per variable: the prompt and the working set are suspects, the rest controls."""
    entries = capture["memoryState"]["workingSetEntries"]
    trimmed = [e["renderedContent"] for e in entries[:2]]
    balance = (
        capture["externalState"]["observableExternals"][0]["capturedValue"]
        if capture["externalState"]["observableExternals"]
        else {"balance": 0}
    )
    other_model = (
        MODEL_VERSIONS[0]
        if capture["agentConfiguration"]["modelVersion"] != MODEL_VERSIONS[0]
        else (MODEL_VERSIONS[1])
    )
    return [
        Variation("system_prompt", system_prompt("v4.6"), label="system_prompt=v4.6"),
        Variation("memory", trimmed, label="memory=first 2 entries (<8 KB)"),
        Variation("model", f"acme-support@{other_model}", label=f"model=acme-support@{other_model}"),
        Variation("sampling.top_p", 0.9, label="sampling.top_p=0.9"),
        Variation(
            "external_state.customer.balance",
            {**balance, "balance": 1.0},
            label="external_state.customer.balance=1.0",
        ),
    ]

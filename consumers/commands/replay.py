"""``blackbox replay``, ``bisect``, ``regress``, ``probe``: replay captured decisions in the sandbox.

Every command reads captures through the access gate (caller, scope and reason from flags or
``BLACKBOX_CALLER`` / ``BLACKBOX_SCOPE``), verifies them against the trust store, and records
each result in ``replay_runs``. A bare ``--vary system_prompt=v4.6`` resolves through the index's
version catalog (:mod:`consumers.replay.versions`); the text is read from a full capture through
the same gate. ``regress`` exits 1 when a decision regressed, a check failed or a decision could
not be replayed (:mod:`consumers.replay.regress`), so a change can be gated in CI. The model is reached at ``--model-endpoint`` /
``BLACKBOX_MODEL_ENDPOINT``, else at the captured endpoint only if ``BLACKBOX_MODEL_ENDPOINTS``
allow-lists it (``consumers/replay/endpoints.py``); a capture never chooses where replay connects.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, cast

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from consumers import terminal
from consumers.app.runtime import Runtime, open_runtime
from consumers.app.settings import ServiceSettings, load_service_settings
from consumers.replay.bisect import BisectResult, ExplainResult, Target, bisect_candidates, explain_change
from consumers.replay.checks import Check, checks_of
from consumers.replay.clients import CallableModelClient, ModelClient, OpenAICompatibleClient
from consumers.replay.memory_variation import format_size
from consumers.replay.probe import Judge, ProbeResult, parse_sweep, probe, short_label
from consumers.replay.regress import RegressionResult, regress
from consumers.replay.replayer import Replayer
from consumers.replay.report import render_table, replay_with_report, report_json, result_row, run_rows
from consumers.replay.runlog import IndexReplayRunLog, ReplayRunLog
from consumers.replay.sandbox import HttpToolBackend
from consumers.replay.source import CaptureSource, FileCaptureSource
from consumers.replay.store import decision_failed
from consumers.replay.variation import Variation, load_configuration, parse_variation
from consumers.replay.versions import IndexVersionCatalog, VersionCatalog
from consumers.terminal import clean, text
from schemas.errors import ContractError

FileOpt = Annotated[
    Path | None, typer.Option("--file", help="Read the capture from this JSON file instead of the store.")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
AllowUnverifiedOpt = Annotated[
    bool,
    typer.Option("--allow-unverified", help="Replay a capture that fails verification; marked UNVERIFIED."),
]
EndpointOpt = Annotated[
    str | None,
    typer.Option(
        "--model-endpoint",
        help="Model endpoint base URL: OpenAI-compatible, or for a wire capture the API of its format (else BLACKBOX_MODEL_ENDPOINT, else the allow-list; never the captured one alone).",
    ),
]
ApiKeyOpt = Annotated[
    str | None,
    typer.Option("--model-api-key", help="Bearer key for --model-endpoint (else BLACKBOX_MODEL_API_KEY)."),
]
InsecureHttpOpt = Annotated[
    bool,
    typer.Option(
        "--allow-insecure-http",
        help="Allow sending the key over plain http:// to a host that is not loopback.",
    ),
]
SubstituteOpt = Annotated[
    str | None,
    typer.Option(
        "--substitute-model", help="Model to use if the captured one is unavailable (report says so)."
    ),
]
CallerOpt = Annotated[str | None, typer.Option("--caller", help="Who is reading (else BLACKBOX_CALLER).")]
ScopeOpt = Annotated[
    str | None, typer.Option("--scope", help="operator | regulator | counterparty (else BLACKBOX_SCOPE).")
]
CallableOpt = Annotated[
    str | None,
    typer.Option(
        "--model-callable",
        help="In-process model instead of HTTP: MODULE:NAME (a function, or a class built with no arguments).",
    ),
]
ReasonOpt = Annotated[str, typer.Option("--reason", help="Why you are reading; recorded in the access log.")]
GrantsOpt = Annotated[
    Path | None, typer.Option("--grants", help="Grants TOML (default <data_dir>/grants.toml if present).")
]
VaryOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--vary",
        help="NAME=VALUE: a version (system_prompt=v4.6), @file or text:LITERAL; one variable per flag; repeatable.",
    ),
]
WorkersOpt = Annotated[int, typer.Option("--workers", min=1, help="Replays in flight.")]


@dataclass(frozen=True, slots=True)
class _Access:
    caller: str | None
    scope: str | None
    reason: str
    grants: Path | None


@dataclass(frozen=True, slots=True)
class _Session:
    replayer: Replayer
    source: CaptureSource
    run_log: ReplayRunLog
    settings: ServiceSettings
    runtime: Runtime

    @property
    def versions(self) -> VersionCatalog:
        """Prompt and tool-schema versions seen in the index, read through this session's gate."""
        return IndexVersionCatalog(self.runtime.index, read=self.replayer.read)


@contextmanager
def _replayer(
    *,
    access: _Access,
    file: Path | None,
    allow_unverified: bool,
    endpoint: str | None,
    api_key: str | None,
    substitute: str | None,
    allow_insecure_http: bool = False,
    model_callable: str | None = None,
    live_tools: str | None = None,
    live_reason: str | None = None,
    directory: Path | None = None,
    reveal: bool = False,
) -> Iterator[_Session]:
    settings = load_service_settings(caller=access.caller, scope=access.scope)
    with open_runtime(settings, grants=access.grants, existing_index=True) as rt, ExitStack() as stack:
        index = rt.index  # replay runs and the access log are written there, whatever the source
        source: CaptureSource
        if file is not None:
            source = FileCaptureSource(file)
        elif directory is not None:
            source = FileCaptureSource(directory)
        else:
            source = rt.capture_source
        client: ModelClient
        if model_callable is not None:
            client = CallableModelClient(load_callable(model_callable), name=model_callable)
        else:
            http = OpenAICompatibleClient.from_settings(
                settings, endpoint=endpoint, api_key=api_key, allow_insecure_http=allow_insecure_http
            )
            stack.callback(http.close)
            client = http
        backend = None
        if live_tools is not None:
            backend = HttpToolBackend(live_tools)
            stack.callback(backend.close)
        replayer = rt.replayer(
            client=client,
            reason=access.reason,
            source=source,
            allow_unverified=allow_unverified,
            substitute_model=substitute,
            live_tools=backend,
            live_reason=live_reason,
            reveal=reveal,
        )
        yield _Session(replayer, source, IndexReplayRunLog(index), settings, rt)


def load_callable(spec: str) -> Callable[[dict[str, Any]], Any]:
    """``module:name`` → the callable; a class is instantiated with no arguments."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ContractError("expected MODULE:NAME", path="--model-callable")
    try:
        target = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ContractError(f"cannot load {spec!r}: {exc}", path="--model-callable") from exc
    fn = target() if isinstance(target, type) else target
    if not callable(fn):
        raise ContractError(f"{spec!r} is not callable", path="--model-callable")
    return cast(Callable[[dict[str, Any]], Any], fn)


def _decision_id(decision_id: str | None, file: Path | None) -> str:
    if decision_id:
        return decision_id
    if file is None:
        raise ContractError("give a DECISION_ID or --file capture.json", path="DECISION_ID")
    value = json.loads(file.read_text(encoding="utf-8"))
    return str(value.get("decisionId"))


def _variations(specs: list[str] | None, versions: VersionCatalog | None = None) -> list[Variation]:
    return [parse_variation(spec, versions=versions) for spec in specs or ()]


def _now() -> datetime:
    return datetime.now(UTC)


def replay_command(
    decision_id: Annotated[
        str | None, typer.Argument(help="Decision to replay (optional with --file).")
    ] = None,
    vary: VaryOpt = None,
    runs: Annotated[int, typer.Option("--runs", min=1, help="Replay each configuration N times.")] = 1,
    as_json: JsonOpt = False,
    allow_unverified: AllowUnverifiedOpt = False,
    live: Annotated[bool, typer.Option("--live", help="Call real tools (needs --authorize).")] = False,
    authorize: Annotated[
        str | None, typer.Option("--authorize", help="Reason for a live replay; logged.")
    ] = None,
    tool_endpoint: Annotated[
        str | None, typer.Option("--tool-endpoint", help="Base URL of the live tools (live mode only).")
    ] = None,
    model_endpoint: EndpointOpt = None,
    model_api_key: ApiKeyOpt = None,
    allow_insecure_http: InsecureHttpOpt = False,
    model_callable: CallableOpt = None,
    substitute_model: SubstituteOpt = None,
    file: FileOpt = None,
    caller: CallerOpt = None,
    scope: ScopeOpt = None,
    reason: ReasonOpt = "",
    grants: GrantsOpt = None,
    reveal: Annotated[
        bool,
        typer.Option(
            "--reveal",
            help="Replay the original of redacted personal data (a personal_data grant; logged as reveal).",
        ),
    ] = False,
) -> None:
    """Replay one decision as captured and under each --vary, and compare with the capture; a redacted
    capture replays on its redacted view unless --reveal (the report says which view)."""
    if live and not (authorize and authorize.strip() and tool_endpoint):
        raise ContractError("--live needs --authorize REASON and --tool-endpoint URL", path="--live")
    did = _decision_id(decision_id, file)
    with _replayer(
        access=_Access(caller, scope, reason, grants),
        file=file,
        allow_unverified=allow_unverified,
        endpoint=model_endpoint,
        api_key=model_api_key,
        allow_insecure_http=allow_insecure_http,
        model_callable=model_callable,
        substitute=substitute_model,
        live_tools=tool_endpoint if live else None,
        live_reason=authorize if live else None,
        reveal=reveal,
    ) as session:
        variations = _variations(vary, session.versions)
        prepared = session.replayer.prepare(did)
        report = replay_with_report(session.replayer, prepared, variations=variations, runs=runs)
        session.run_log.append(run_rows(report, at=_now()))
    if as_json:
        terminal.echo_json(report_json(report))
    else:
        render_table(report, terminal.console())


def bisect_command(
    decision_id: Annotated[
        str | None, typer.Argument(help="Decision to bisect (optional with --file).")
    ] = None,
    candidate: Annotated[
        list[str] | None,
        typer.Option("--candidate", help="NAME=VALUE|@file, in order (e.g. prompt v4.1 ... v4.7)."),
    ] = None,
    find: Annotated[
        str,
        typer.Option("--find", help="reproduces (first candidate showing the captured outcome) | changes."),
    ] = "reproduces",
    from_config: Annotated[Path | None, typer.Option("--from", help="Configuration A (TOML).")] = None,
    to_config: Annotated[Path | None, typer.Option("--to", help="Configuration B (TOML).")] = None,
    as_json: JsonOpt = False,
    allow_unverified: AllowUnverifiedOpt = False,
    model_endpoint: EndpointOpt = None,
    model_api_key: ApiKeyOpt = None,
    allow_insecure_http: InsecureHttpOpt = False,
    model_callable: CallableOpt = None,
    substitute_model: SubstituteOpt = None,
    file: FileOpt = None,
    caller: CallerOpt = None,
    scope: ScopeOpt = None,
    reason: ReasonOpt = "",
    grants: GrantsOpt = None,
) -> None:
    """Name the first candidate that flips the outcome, or the changed variable(s) between two configs."""
    if (from_config is None) != (to_config is None):
        raise ContractError("--from and --to go together", path="--from")
    if from_config is None and not candidate:
        raise ContractError(
            "give --candidate NAME=VALUE ... or --from A.toml --to B.toml", path="--candidate"
        )
    if find not in ("reproduces", "changes"):
        raise ContractError("--find is reproduces or changes", path="--find")
    target: Target = "reproduces" if find == "reproduces" else "changes"
    did = _decision_id(decision_id, file)
    with _replayer(
        access=_Access(caller, scope, reason, grants),
        file=file,
        allow_unverified=allow_unverified,
        endpoint=model_endpoint,
        api_key=model_api_key,
        allow_insecure_http=allow_insecure_http,
        model_callable=model_callable,
        substitute=substitute_model,
    ) as session:
        replayer, run_log, versions = session.replayer, session.run_log, session.versions
        prepared = replayer.prepare(did)
        run_id, at = _run_id(), _now()
        outcome: BisectResult | ExplainResult
        if from_config is not None and to_config is not None:
            outcome = explain_change(
                replayer,
                prepared,
                before=load_configuration(from_config, versions=versions),
                after=load_configuration(to_config, versions=versions),
            )
            results = [outcome.from_result, outcome.to_result, *(s.result for s in outcome.steps)]
            verdicts = ["from", "to", *("flips" if s.flips else "no flip" for s in outcome.steps)]
        else:
            outcome = bisect_candidates(replayer, prepared, _variations(candidate, versions), target=target)
            results = [s.result for s in outcome.steps]
            verdicts = ["hit" if s.hit else "miss" for s in outcome.steps]
        run_log.append(
            [
                result_row(r, r.compared_to_original(), run_id=run_id, at=at, kind="bisect", verdict=v)
                for r, v in zip(results, verdicts, strict=True)
            ]
        )
    if as_json:
        terminal.echo_json(outcome.to_json())
    else:
        _print_bisect(outcome, terminal.console())


def regress_command(
    since: Annotated[
        str | None, typer.Option("--since", help="Only captures at or after (ISO-8601).")
    ] = None,
    agent: Annotated[str | None, typer.Option("--agent", help="Only this agent's captures.")] = None,
    sample: Annotated[int, typer.Option("-n", "--sample", min=1, help="How many past captures.")] = 100,
    suite: Annotated[
        str | None,
        typer.Option(
            "--suite", help="Replay the decisions a finding pinned (blackbox finding) instead of a sample."
        ),
    ] = None,
    vary: VaryOpt = None,
    config: Annotated[Path | None, typer.Option("--config", help="New configuration (TOML).")] = None,
    workers: WorkersOpt = 4,
    directory: Annotated[
        Path | None, typer.Option("--dir", help="Sample from a directory of capture JSON files.")
    ] = None,
    as_json: JsonOpt = False,
    allow_unverified: AllowUnverifiedOpt = False,
    model_endpoint: EndpointOpt = None,
    model_api_key: ApiKeyOpt = None,
    allow_insecure_http: InsecureHttpOpt = False,
    model_callable: CallableOpt = None,
    substitute_model: SubstituteOpt = None,
    caller: CallerOpt = None,
    scope: ScopeOpt = None,
    reason: ReasonOpt = "",
    grants: GrantsOpt = None,
) -> None:
    """Replay past captures (a sample, or a finding's --suite) under a new configuration; judge each by
    the pacts (and the finding's rule); exit 1 if anything regressed, failed or could not be replayed."""
    if suite is not None and (directory is not None or since is not None or agent is not None):
        raise ContractError(
            "--suite replays the finding's pinned decisions: drop --dir/--since/--agent", path="--suite"
        )
    since_at = datetime.fromisoformat(since.replace("Z", "+00:00")) if since else None
    console = terminal.console(err=True)
    with _replayer(
        access=_Access(caller, scope, reason or (f"regress --suite {suite}" if suite else ""), grants),
        file=None,
        directory=directory,
        allow_unverified=allow_unverified,
        endpoint=model_endpoint,
        api_key=model_api_key,
        allow_insecure_http=allow_insecure_http,
        model_callable=model_callable,
        substitute=substitute_model,
    ) as session:
        versions = session.versions
        configuration = (
            list(load_configuration(config, versions=versions).values())
            if config
            else _variations(vary, versions)
        )
        if suite is not None:
            ids, checks = _suite(session.runtime, suite)
        else:
            ids = session.source.sample(since=since_at, agent=agent, n=sample)
            checks = checks_of(session.runtime.pacts)
        result = regress(
            session.replayer,
            ids,
            configuration=configuration,
            checks=checks,
            suite=suite,
            workers=workers,
            run_log=session.run_log,
            progress=not as_json,
            console=console,
        )
    if as_json:
        terminal.echo_json(result.to_json())
    else:
        _print_regression(result, terminal.console())
    if not result.passed:
        raise typer.Exit(1)


def _suite(rt: Runtime, name: str) -> tuple[list[str], tuple[Check, ...]]:
    """The pinned decisions of finding ``name`` and the checks to judge them by (pacts + its rule)."""
    from consumers.findings import FindingError, get_finding, pinned_decisions
    from consumers.pacts import Rule

    finding = get_finding(rt.index, name)
    if finding is None:
        raise FindingError(f"no finding {name!r} (see `blackbox finding list`)")
    ids = [str(row["decision_id"]) for row in pinned_decisions(rt.index, name)]
    if not ids:
        raise FindingError(f"finding {name!r} pins no decision")
    rule = Rule(name=name, source=str(finding["rule"]), description=str(finding.get("description") or ""))
    return ids, checks_of(rt.pacts, finding=rule)


def probe_command(
    decision_id: Annotated[
        str | None, typer.Argument(help="Decision to probe (optional with --file).")
    ] = None,
    sweep: Annotated[
        list[str] | None,
        typer.Option(
            "--sweep",
            help="VARIABLE=SPEC: memory.truncate=0..16KB/1KB, memory.drop=each, system_prompt=versions, "
            "external_state.KEY=0..1000/50, request=@lines.txt; a second --sweep makes a grid.",
        ),
    ] = None,
    runs: Annotated[int, typer.Option("--runs", min=1, help="Replay each point N times.")] = 1,
    as_json: JsonOpt = False,
    allow_unverified: AllowUnverifiedOpt = False,
    model_endpoint: EndpointOpt = None,
    model_api_key: ApiKeyOpt = None,
    allow_insecure_http: InsecureHttpOpt = False,
    model_callable: CallableOpt = None,
    substitute_model: SubstituteOpt = None,
    file: FileOpt = None,
    caller: CallerOpt = None,
    scope: ScopeOpt = None,
    reason: ReasonOpt = "",
    grants: GrantsOpt = None,
) -> None:
    """Sweep one variable (two for a grid) over generated values and state the failure boundary."""
    if not sweep:
        raise ContractError("give --sweep VARIABLE=SPEC (one, or two for a grid)", path="--sweep")
    did = _decision_id(decision_id, file)
    with _replayer(
        access=_Access(caller, scope, reason, grants),
        file=file,
        allow_unverified=allow_unverified,
        endpoint=model_endpoint,
        api_key=model_api_key,
        allow_insecure_http=allow_insecure_http,
        model_callable=model_callable,
        substitute=substitute_model,
    ) as session:
        prepared = session.replayer.prepare(did)
        versions = session.versions
        axes = [
            parse_sweep(spec, prepared=prepared, versions=versions, base_dir=Path.cwd()) for spec in sweep
        ]
        failed = decision_failed(session.runtime.index, did)
        if failed is None:  # not indexed (--file): the capture's own outcome
            failed = (prepared.capture.get("outcome") or {}).get("status") == "failure"
        result = probe(
            session.replayer,
            prepared,
            axes,
            judge=Judge(checks=checks_of(session.runtime.pacts), failed=failed),
            runs=runs,
            on_rows=session.run_log.append,
            clock=_now,
        )
    if as_json:
        terminal.echo_json(result.to_json())
    else:
        _print_probe(result, terminal.console())


def _run_id() -> str:
    import uuid

    return uuid.uuid4().hex


def _print_bisect(outcome: BisectResult | ExplainResult, console: Console) -> None:
    if isinstance(outcome, BisectResult):
        table = Table(title=text(f"bisect {outcome.decision_id}: first candidate that {outcome.target}"))
        for column in ("candidate", "replayed", "hit"):
            table.add_column(column)
        replayed = {s.index: s for s in outcome.steps}
        for i, label in enumerate(outcome.labels):
            step = replayed.get(i)
            table.add_row(text(label), "yes" if step else "", ("yes" if step.hit else "no") if step else "")
        console.print(table)
        console.print(text(outcome.verdict))
        return
    console.print(text(f"changed variables: {', '.join(outcome.changed_variables) or 'none'}"))
    if not outcome.outcome_differs:
        console.print("the two configurations give the same outcome: nothing to explain")
        return
    for tried in outcome.steps:
        console.print(
            text(
                f"  {' + '.join(tried.variables)}: {'flips the outcome' if tried.flips else 'no change'} (1 run)"
            )
        )
    culprits = ["+".join(c) for c in outcome.culprits]
    console.print(
        Text.assemble("implicated: ", text(", ".join(culprits) or "no combination explains it", "bold"))
    )


def _print_regression(result: RegressionResult, console: Console) -> None:
    counts = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in result.counts.items())
    what = f"the suite of finding {result.suite}" if result.suite else f"{len(result.results)} decisions"
    config = "; ".join(v.describe() for v in result.configuration) or "as captured"
    console.print(text(f"replayed {what} under {config} in {result.seconds:.1f}s: {counts}"))
    if result.checks:
        console.print(text(f"judged by: {', '.join(result.checks)}"))
    else:
        console.print(
            text("no pacts loaded (BLACKBOX_PACTS): changed decisions are not judged fixed or regressed")
        )
    shown = [v for v in result.verdicts.values() if v.status != "unchanged" or v.failures]
    if shown:
        table = Table(title="decisions")
        for column in ("decision", "status", "outcome changed", "first divergent step", "detail"):
            table.add_column(column, overflow="fold")
        for v in shown:
            changed = "" if v.outcome_changed is None else ("yes" if v.outcome_changed else "no")
            table.add_row(
                text(v.decision_id),
                text(v.status),
                changed,
                str(v.first_divergent_step or ""),
                text(v.summary()),
            )
        console.print(table)
    for decision, check in result.failures:
        if check.verdict == "error":
            what = "could not be evaluated"
        else:
            what = "still shows the problem" if check.check.startswith("finding:") else "violated"
        console.print(text(f"FAILED {decision}: {check.check} {what}: {check.detail}"))
    if result.passed:
        console.print(text("PASS: nothing regressed, nothing failed"))
    else:
        regressed = result.counts.get("regressed", 0)
        missing = result.counts.get("not_replayed", 0)
        console.print(
            text(
                f"FAIL: {regressed} regressed, {len(result.failures)} failing check(s), {missing} not replayed"
            )
        )


def _print_probe(result: ProbeResult, console: Console) -> None:
    axes = " × ".join(f"{a.name}={a.spec}" for a in result.axes)
    console.print(text(f"probe {result.decision_id}: {axes} ({result.replays} replays)"))
    console.print(text(f"judge: {result.judge.describe()}"))
    memory = result.axes[0].name.startswith("memory.")
    table = Table()
    for column in (
        *(clean(a.name) for a in result.axes),
        "working set sent" if memory else "value",
        "runs",
        "verdict",
    ):
        table.add_column(column, overflow="fold")
    for point in result.points:
        if point.measure is None:
            measure = ""
        else:
            measure = format_size(point.measure) if memory else f"{point.measure:g}"
        verdict = {"hit": result.judge.verb, "miss": "no", "mixed": f"{point.hits}/{point.runs}"}.get(
            point.state, "undecided"
        )
        series = [short_label(point.series)] if point.series else []
        table.add_row(*(text(cell) for cell in (short_label(point.x), *series, measure, point.runs, verdict)))
    console.print(table)
    console.print(text(f"boundary: {result.summary}"))
    for caveat in result.caveats:
        console.print(text(f"caveat: {caveat}"))


def register(app: typer.Typer) -> None:
    app.command("replay")(replay_command)
    app.command("bisect")(bisect_command)
    app.command("regress")(regress_command)
    app.command("probe")(probe_command)


__all__: list[Any] = ["register"]

"""``blackbox compact`` / ``hold`` / ``release`` / ``flag``: the retention policy at work.

- ``blackbox compact [--as-of TIME] [--dry-run] [--json]``: compact and expire what the policy says is
  due (progress bar on stderr, summary table on stdout). Exit 0, or 1 when a segment could not be
  processed (each named in the output; the rest went ahead). ``--metrics-textfile PATH`` writes the
  run's metrics for the node-exporter textfile collector at the end (not on dry runs);
  ``--log-format json`` logs JSON lines on stderr instead of the progress bar.
- ``blackbox hold DECISION_ID --reason ...`` / ``blackbox release DECISION_ID --reason ...``: legal hold.
- ``blackbox flag DECISION_ID --reason ... [--failure] [--agent ID]``: a signed flag_consequential sent
  through the configured transport (ingest applies it; compaction promotes the capture if in time).
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from consumers import terminal
from consumers.app.runtime import Runtime, open_runtime
from consumers.app.settings import load_service_settings
from consumers.observability.logs import LogFormat, configure_logging
from consumers.retention.clock import SystemClock
from consumers.retention.compaction import CompactionResult
from consumers.retention.lease import RetentionLease, retention_lease
from consumers.retention.plan import CompactionPlan
from schemas.errors import ContractError, RetentionError

__all__ = ["compact_command", "flag_command", "hold_command", "register", "release_command"]

logger = logging.getLogger(__name__)

_POLICY_OPTION = typer.Option(
    "--policy", help="Retention policy TOML laid over the defaults (default: settings)."
)


def _parse_time(value: str, option: str) -> datetime:
    text = value.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise ContractError(f"not an ISO-8601 time: {value!r}", path=option) from exc
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def compact_command(
    as_of: Annotated[
        str | None, typer.Option("--as-of", help="Evaluate the policy at this ISO-8601 time (default: now).")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Plan only: show what would happen, change nothing.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    policy: Annotated[Path | None, _POLICY_OPTION] = None,
    metrics_textfile: Annotated[
        Path | None,
        typer.Option(
            "--metrics-textfile",
            metavar="PATH",
            help="Write the run's Prometheus metrics here at the end, atomically (node-exporter textfile "
            "collector: name it *.prom).",
        ),
    ] = None,
    log_format: Annotated[
        LogFormat, typer.Option("--log-format", help="Logs on stderr: text, or JSON lines.")
    ] = "text",
) -> None:
    """Compact routine captures past their content window, promote flagged ones, expire old records."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    configure_logging(log_format)
    settings = load_service_settings(retention_policy=policy)
    moment = _parse_time(as_of, "--as-of") if as_of else None
    err = terminal.console(err=True)
    with open_runtime(settings, existing_index=True) as rt, _lease(rt, "compaction", dry_run) as lease:
        compactor = rt.compactor(clock=SystemClock())
        if lease is not None:  # checked before every step: a holder stalled past its lease stops there
            compactor._hook = lease.guard(compactor._hook)
        with Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
            transient=as_json,
            disable=dry_run or log_format == "json",  # stderr carries only JSON lines then
        ) as bar:
            task = bar.add_task("compacting", total=None)

            def on_plan(plan: CompactionPlan) -> None:
                bar.update(task, total=plan.decisions + len(plan.pending_deletes))

            def progress(done: int, total: int) -> None:
                if lease is not None:
                    lease.check("the next batch")
                bar.update(task, completed=done, total=total)

            result = compactor.run(as_of=moment, dry_run=dry_run, progress=progress, on_plan=on_plan)
    logger.info("compaction finished", extra={"summary": result.summary()})
    if metrics_textfile is not None and not result.dry_run:
        from consumers.observability.metrics import finish_compaction_run, write_textfile

        finish_compaction_run(errors=len(result.errors), seconds=result.elapsed_seconds)
        write_textfile(metrics_textfile)
    if as_json:
        terminal.echo_json(result.summary())
    else:
        _print_summary(result)
    if result.errors:
        raise typer.Exit(1)


def _lease(rt: Runtime, what: str, dry_run: bool = False) -> AbstractContextManager[RetentionLease | None]:
    """The retention lease across hosts (:mod:`consumers.retention.lease`); none for a dry run."""
    return nullcontext() if dry_run else _held_lease(rt, what)


def _held_lease(rt: Runtime, what: str) -> AbstractContextManager[RetentionLease]:
    _ = rt.index  # opened first: on a mistyped data dir the command stops before a lease file is written
    s = rt.settings
    return retention_lease(rt.blob_store, what=what, ttl=s.retention_lease, wait=s.retention_lease_wait)


def _print_summary(result: CompactionResult) -> None:
    from rich.table import Table
    from rich.text import Text

    title = "compaction plan (dry run: nothing changed)" if result.dry_run else "compaction"
    table = Table(title=f"{title} at {result.as_of:%Y-%m-%d %H:%M:%S}Z", show_header=True)
    table.add_column("what")
    table.add_column("decisions / segments", justify="right")
    verb = "would be " if result.dry_run else ""
    rows: list[tuple[str, int]] = [
        (f"{verb}compacted to metadata-only", result.compacted),
        (f"{verb}promoted to a consequential segment", result.promoted),
        (f"{verb}expired", result.expired),
        (f"{verb}copied out under legal hold", result.hold_copied),
        (f"{verb}moved (content window still open)", result.moved),
        ("blocked by legal hold", result.held),
        (f"segments {verb}deleted", result.segments_deleted),
        ("segments not due yet", result.segments_not_due),
        (f"quarantine segments {verb}deleted (rows kept)", result.quarantine_segments_deleted),
        (f"orphan segments {verb}deleted", result.orphan_segments_deleted),
        (f"orphan claim-check blobs {verb}deleted", result.orphan_claims_deleted),
        ("unreferenced blobs inside their grace", result.orphans_in_grace),
        (f"claim-check blobs {verb}deleted", result.claims_deleted),
        (f"consumed spool files {verb}deleted", result.spool_files_deleted),
    ]
    if not result.dry_run:
        rows.append(("retention log entries written", result.log_entries))
    for what, n in rows:
        table.add_row(what, str(n))
    console = terminal.console()
    console.print(table)
    console.print(terminal.text(f"policy {result.policy}; {result.elapsed_seconds:.2f} s"))
    for error in result.errors:  # a reason may name a decision or a key: data
        console.print(Text.assemble(("not processed:", "red"), " ", terminal.text(error)))
    for reason in result.locked:
        console.print(Text.assemble(("locked (S3 Object Lock):", "yellow"), " ", terminal.text(reason)))


def hold_command(
    decision_id: Annotated[str, typer.Argument(help="The decision to put under legal hold.")],
    reason: Annotated[
        str, typer.Option("--reason", help="Why (recorded with the hold and in the audit log).")
    ],
) -> None:
    """Put a decision under legal hold: compaction and expiry leave it alone until released."""
    with open_runtime(existing_index=True) as rt, _held_lease(rt, "legal-hold") as lease:
        holds = rt.legal_holds(clock=SystemClock())
        lease.check("the hold")
        result = holds.hold(decision_id, reason=reason)
    state = "held" if result.changed else "already held"
    terminal.echo(
        terminal.clean(f"{state}: {decision_id} ({result.content_state}) reason: {result.hold_reason}")
    )


def release_command(
    decision_id: Annotated[str, typer.Argument(help="The decision to release.")],
    reason: Annotated[str, typer.Option("--reason", help="Why (recorded in the audit log).")],
) -> None:
    """Release a legal hold; the retention policy applies again from the next compaction."""
    with open_runtime(existing_index=True) as rt, _held_lease(rt, "legal-release") as lease:
        holds = rt.legal_holds(clock=SystemClock())
        lease.check("the release")
        result = holds.release(decision_id, reason=reason)
    state = "released" if result.changed else "was not held"
    terminal.echo(terminal.clean(f"{state}: {decision_id} ({result.content_state})"))


def flag_command(
    decision_id: Annotated[str, typer.Argument(help="The decision to flag consequential.")],
    reason: Annotated[str, typer.Option("--reason", help="Why it is consequential.")],
    failure: Annotated[bool, typer.Option("--failure", help="The flag reports a failure.")] = False,
    agent: Annotated[
        str | None, typer.Option("--agent", help="Agent id (default: looked up in the index).")
    ] = None,
    unsigned: Annotated[
        bool,
        typer.Option(
            "--unsigned", help="Send without a signature (ingest quarantines unsigned flags by default)."
        ),
    ] = False,
) -> None:
    """Send flag_consequential for a decision through the configured transport."""
    from consumers.retention.flag import agent_of, send_flag, signer_for

    with open_runtime() as rt:
        if not reason.strip():
            raise RetentionError("flag needs a reason (--reason)")
        if agent is None:
            agent = agent_of(rt.index, decision_id)
        signer = None if unsigned else signer_for(rt.settings)
        if signer is None and not unsigned:
            raise ContractError(
                "no signing key configured (BLACKBOX_SIGNING_KEY or BLACKBOX_SIGNING_KEY_B64); "
                "ingest only accepts signed flags. Pass --unsigned to send anyway.",
                path="signing_key",
            )
        sent = send_flag(
            rt.sender, decision_id, agent_id=agent, reason=reason, failure=failure, signer=signer
        )
    signed = "signed" if sent.signed else "unsigned"
    terminal.echo(
        f"flag sent ({signed}, {rt.settings.transport}): {decision_id} agent={agent} at {sent.value['flaggedAt']}"
    )


def register(app: typer.Typer) -> None:
    app.command("compact")(compact_command)
    app.command("hold")(hold_command)
    app.command("release")(release_command)
    app.command("flag")(flag_command)

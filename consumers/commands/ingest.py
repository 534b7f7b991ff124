"""``blackbox consume`` (run the ingest consumer) and ``blackbox show`` (read one capture back).

- ``blackbox consume [--drain] [--batch-size N] [--max-wait S] [--workers N]``: consume the topic (or the local spool
  in embedded mode) into blob segments and the index; offsets are committed only after both are
  durable. ``--drain`` stops once caught up. SIGTERM/SIGINT finish the current batch, then stop.
  ``--metrics-listen HOST:PORT`` serves ``/metrics``, ``/healthz`` and ``/readyz`` (the one HTTP
  application with its observability surface, :mod:`consumers.app.http`);
  ``--log-format json`` logs JSON lines.
- ``blackbox show DECISION_ID [--json] [--reveal]``: the stored capture, through the access gate (the
  read is logged). ``--json`` prints the capture in the JSON form with a ``stored`` block; without it, a
  summary. Compacted decisions show metadata and hashes; quarantined ones are flagged. Redacted
  personal data shows as placeholders, with a ``privacy`` block (what was redacted, and whether the
  original is sealed or was erased on DATE); ``--reveal`` prints the original for a caller whose grant
  has ``personal_data = true`` (logged as ``reveal``; :mod:`consumers.privacy`).

``show`` verifies what it prints, at read time, with the same checks as ``blackbox verify`` over the
bytes it read, against the trust store as it is now: the ``trust`` line (``verification`` in
``--json``) is that verdict, never the ingest-time ``trust`` column. Content that fails is still
printed - the investigator needs to see it - led by ``NOT VERIFIED: ... part=<part>``, and the command
exits 1; a segment that is missing or does not decompress has nothing to print but the verdict.
Exit codes are ``verify``'s (:mod:`consumers.verify.verdict`): 0 verified, 1 not verified, 2 error,
3 expired.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from consumers import terminal
from consumers.app.runtime import open_runtime
from consumers.app.settings import load_service_settings
from consumers.observability.logs import LogFormat
from consumers.verify.verdict import EXIT_CODES_HELP
from producers.settings import BlackboxSettings

if TYPE_CHECKING:
    from consumers.app.runtime import Runtime
    from consumers.ingest.service import IngestService
    from consumers.verify.verdict import Verdict
    from consumers.web.server import Listen

__all__ = ["consume_command", "register", "show_command"]

logger = logging.getLogger(__name__)


def consume_command(
    drain: Annotated[
        bool, typer.Option("--drain", help="Stop once every assigned partition is caught up.")
    ] = False,
    batch_size: Annotated[
        int, typer.Option("--batch-size", min=1, help="Messages per batch (one segment per class).")
    ] = 500,
    max_wait: Annotated[
        float, typer.Option("--max-wait", min=0.0, help="Seconds a batch waits to fill.")
    ] = 1.0,
    workers: Annotated[
        int, typer.Option("--workers", min=0, help="Worker processes that decode and verify (0: inline).")
    ] = 0,
    kafka_option: Annotated[
        list[str] | None,
        typer.Option("--kafka-option", help="Extra librdkafka consumer property KEY=VALUE (repeatable)."),
    ] = None,
    metrics_listen: Annotated[
        str | None,
        typer.Option(
            "--metrics-listen",
            metavar="HOST:PORT",
            help="Serve Prometheus /metrics, /healthz and /readyz here (a bare PORT binds 127.0.0.1). Default: off.",
        ),
    ] = None,
    log_format: Annotated[
        LogFormat, typer.Option("--log-format", help="Logs on stderr: text, or JSON lines.")
    ] = "text",
) -> None:
    """Ingest captures: decode, verify, dedup, write segments and index rows, then commit."""
    from consumers.ingest.service import parse_kafka_options
    from consumers.ingest.signals import stop_on_signals
    from consumers.observability.logs import configure_logging

    configure_logging(log_format)
    address = _listen_address(metrics_listen)
    with (
        open_runtime() as rt,
        rt.ingest(
            batch_size=batch_size,
            max_wait=max_wait,
            kafka_config=parse_kafka_options(kafka_option or []),
            workers=workers,
        ) as service,
        _metrics_endpoint(address, rt, service),
        stop_on_signals(service.stop),
    ):
        stats = service.run(drain=drain)
    summary = asdict(stats)
    logger.info("ingest stopped", extra={"stats": {k: v for k, v in summary.items() if k != "conflict_ids"}})
    conflicts = summary.pop("conflict_ids")
    dead_files = getattr(service.source, "dead_files", None)  # the spool's unreadable files
    if dead_files is not None:
        summary["dead_lettered_files"] = dead_files
    terminal.echo(" ".join(f"{k}={terminal.clean(v)}" for k, v in summary.items()))
    for line in _where_they_went(rt.settings, summary):
        terminal.echo(line)
    if conflicts:
        quarantined = ", ".join(terminal.clean(d) for d in conflicts[:20])
        terminal.echo(f"conflicting duplicates quarantined: {quarantined}", err=True)


def _where_they_went(settings: BlackboxSettings, summary: dict[str, Any]) -> list[str]:
    """Where this run's dead letters and quarantined captures are, for the operator."""
    from producers.transports import dead_letter_location
    from producers.transports.spool.dead_letter import DEAD_LETTER_DIR

    lines: list[str] = []
    if summary.get("dead_lettered"):
        where = dead_letter_location(settings)
        lines.append(f"dead letters: {summary['dead_lettered']} messages in {where}")
    if summary.get("dead_lettered_files"):
        lines.append(
            f"dead-lettered spool files: {summary['dead_lettered_files']} moved to "
            f"{settings.resolved_spool_dir / DEAD_LETTER_DIR} (<name>.reason.json says why)"
        )
    if summary.get("quarantined"):
        lines.append(
            f"quarantined: {summary['quarantined']} (kept, never trusted): "
            "blackbox query 'SELECT decision_id, reason, part, source FROM quarantine', then blackbox show ID"
        )
    return lines


def _listen_address(text: str | None) -> Listen | None:
    from consumers.web.server import parse_listen

    if text is None:
        return None
    return parse_listen(text, option="--metrics-listen", default_host="127.0.0.1")


@contextmanager
def _metrics_endpoint(address: Listen | None, rt: Runtime, service: IngestService) -> Iterator[None]:
    """``/metrics``, ``/healthz`` and ``/readyz`` while the service runs: the one HTTP application with
    its observability surface only (nothing when ``--metrics-listen`` is absent)."""
    if address is None or service.telemetry is None:
        yield
        return
    from consumers.app.http import Surfaces, http_app
    from consumers.web.server import WebServer

    health = service.telemetry.health
    with WebServer(http_app(rt, Surfaces(observability=True), health=lambda: health), address) as server:
        logger.info(
            "metrics on %s/metrics, health on /healthz and /readyz",
            server.url,
            extra={"listen": server.url},
        )
        yield


def show_command(
    decision_id: Annotated[str, typer.Argument(help="The decision to show.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the capture in the JSON form.")] = False,
    reason: Annotated[
        str, typer.Option("--reason", help="Why you are reading (recorded in the access log).")
    ] = "",
    trust_store: Annotated[
        Path | None, typer.Option("--trust-store", help="Trust store TOML (default from settings).")
    ] = None,
    reveal: Annotated[
        bool,
        typer.Option(
            "--reveal", help="Show the original of redacted personal data (a personal_data grant; logged)."
        ),
    ] = False,
) -> None:
    """Show one stored capture (logged in the access log), verified at read time."""
    from consumers.privacy.ids import index_ids
    from consumers.privacy.view import privacy_view
    from consumers.storage.reader import load_capture
    from consumers.verify.stored import judge_shown
    from consumers.verify.verdict import Verdict
    from producers.evidence import TrustStore
    from producers.privacy.protect import vault_from_settings
    from schemas.errors import VerificationError

    with open_runtime(load_service_settings(trust_store=trust_store), existing_index=True) as rt:
        index = rt.index
        trust = TrustStore.load(rt.settings.resolved_trust_store)  # a missing trust store is an error here
        ids = index_ids(rt.settings)
        try:
            shown = load_capture(
                decision_id, index=index, store=rt.blob_store, gate=rt.gate, caller=rt.caller(reason), ids=ids
            )
        except VerificationError as exc:  # the stored bytes are gone or not the recorded ones
            unreadable = Verdict.failed(decision_id, exc, checked_at=datetime.now(UTC))
            if as_json:
                view = {"decisionId": decision_id, "verification": unreadable.to_json(), "capture": None}
                terminal.echo_json(view)
            else:
                terminal.echo(terminal.clean(unreadable.line()))
            raise typer.Exit(unreadable.exit_code) from exc
        verdict = judge_shown(shown, index=index, trust=trust, ids=ids)
        privacy = privacy_view(
            shown.capture,
            vault=vault_from_settings(rt.settings, rt.blob_store),
            reveal_original=reveal,
            verified=verdict.verified,
            gate=rt.gate,
            caller=rt.caller(reason),
        )
    view = shown.to_json(verification=verdict.to_json())
    if privacy.state is not None:  # redacted personal data: which view this is, where the original is
        view["privacy"] = privacy.state
    if privacy.revealed is not None:
        view["capture"] = privacy.revealed
    if as_json:
        terminal.echo_json(view)
    else:
        _print_summary(view, verdict)
    if verdict.exit_code:
        raise typer.Exit(verdict.exit_code)


def _print_summary(view: dict[str, Any], verdict: Verdict) -> None:
    """The summary of ``show``. Every value in it is data (escaped by :func:`terminal.clean`); when the
    capture is not verified, the verdict is the first line and the last, so nothing the content prints
    can be the last word."""
    c = terminal.clean
    capture = view["capture"]
    stored = view["stored"]
    lines = []
    if not verdict.verified:  # first, so nobody reads the content before the warning
        lines.append(c(verdict.line()))
    lines += [
        f"decision   {c(view['decisionId'])}  ({c(view['kind'])})",
        f"state      {c(view['contentState'])}: {c(view['note'])}",
        f"trust      {c(_trust_line(verdict))}",
    ]
    if stored:
        lines.append(
            f"stored     {c(stored.get('segment_key', ''))} @{c(stored.get('segment_offset', ''))}"
            f"+{c(stored.get('segment_length', ''))}  class={c(stored.get('retention_class', ''))}"
            f" expires={c(stored.get('expires_at', ''))} ingested as {c(stored.get('trust', ''))}"
        )
    lines += list(verdict.tampering)  # an object over the sealed version (versioned store)
    privacy = view.get("privacy")
    if privacy:
        kinds = ", ".join(c(k) for k in privacy["kinds"])
        lines.append(
            f"privacy    {c(privacy['redactions'])} redactions ({kinds}); {c(privacy['view'])} view; "
            f"{c(privacy['note'])}"
        )
    for q in view["quarantine"]:
        lines.append(
            f"QUARANTINE {c(q.get('reason'))} part={c(q.get('part'))} from {c(q.get('source'))} "
            f"({c(q.get('content_sha256'))})"
        )
    if view["kind"] == "capture":
        config = capture.get("agentConfiguration") or {}
        trace = capture.get("executionTrace") or {}
        outcome = capture.get("outcome") or {}
        lines += [
            f"agent      {c(capture.get('agentId'))}  at {c(capture.get('capturedAt'))}"
            f"  level={c(capture.get('captureLevel'))}  fidelity={c(capture.get('fidelity') or 'sdk')}",
            f"model      {c(config.get('modelIdentifier'))} {c(config.get('modelVersion'))}"
            f"  prompt {c(config.get('systemPromptVersion'))}",
            f"outcome    {c(outcome.get('status'))}  stop={c(trace.get('stopReason'))}"
            f"  tool calls={len(trace.get('toolCalls') or [])}",
            f"output     {_clip(trace.get('finalOutputText'))}",
        ]
    else:
        lines.append(f"value      {c(terminal.json_text(capture, indent=None)[:300])}")
    if not verdict.verified:
        lines.append(c(verdict.line()))
    terminal.echo("\n".join(lines))


def _trust_line(verdict: Verdict) -> str:
    """The read-time verdict in the summary (never the ingest-time ``trust`` column)."""
    checked = f"checked {verdict.checked_at.isoformat(timespec='seconds').replace('+00:00', 'Z')}"
    if verdict.status == "verified":
        absent = f"; {verdict.absent()}" if verdict.absent() else ""
        return f"verified key={verdict.key_id} ({verdict.checked_parts} parts{absent}; {checked})"
    if verdict.status == "expired":
        return f"EXPIRED: nothing left to verify ({checked})"
    return f"NOT VERIFIED part={verdict.part} ({verdict.error}): {verdict.reason} ({checked}); content below is untrusted"


def _clip(text: Any, n: int = 160) -> str:
    if text is None:
        return "(content absent)"
    s = terminal.clean(str(text).replace("\n", " "))
    return s if len(s) <= n else s[: n - 1] + "…"


def register(app: typer.Typer) -> None:
    app.command("consume")(consume_command)
    app.command("show", epilog=EXIT_CODES_HELP)(show_command)

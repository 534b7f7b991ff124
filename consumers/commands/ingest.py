"""``blackbox consume`` (run the ingest consumer) and ``blackbox show`` (read one capture back).

- ``blackbox consume [--drain] [--batch-size N] [--max-wait S] [--workers N]``: consume the topic (or the local spool
  in embedded mode) into blob segments and the index; offsets are committed only after both are
  durable. ``--drain`` stops once caught up. SIGTERM/SIGINT finish the current batch, then stop.
- ``blackbox show DECISION_ID [--json]``: the stored capture, through the access gate (the read is
  logged). ``--json`` prints the capture in the JSON form with a ``stored`` block; without it, a
  summary. Compacted decisions show metadata and hashes; quarantined ones are flagged.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Annotated, Any

import typer

from producers.settings import load_settings

__all__ = ["consume_command", "register", "show_command"]


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
) -> None:
    """Ingest captures: decode, verify, dedup, write segments and index rows, then commit."""
    from consumers.ingest.service import build_service, parse_kafka_options
    from consumers.ingest.signals import stop_on_signals

    settings = load_settings()
    with (
        build_service(
            settings,
            batch_size=batch_size,
            max_wait=max_wait,
            kafka_config=parse_kafka_options(kafka_option or []),
            workers=workers,
        ) as service,
        stop_on_signals(service.stop),
    ):
        stats = service.run(drain=drain)
    summary = asdict(stats)
    conflicts = summary.pop("conflict_ids")
    typer.echo(" ".join(f"{k}={v}" for k, v in summary.items()))
    if conflicts:
        typer.echo(f"conflicting duplicates quarantined: {', '.join(conflicts[:20])}", err=True)


def show_command(
    decision_id: Annotated[str, typer.Argument(help="The decision to show.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the capture in the JSON form.")] = False,
    reason: Annotated[
        str, typer.Option("--reason", help="Why you are reading (recorded in the access log).")
    ] = "",
) -> None:
    """Show one stored capture (logged in the access log)."""
    from consumers.access import caller_for, gate_for
    from consumers.index import open_index
    from consumers.ingest.show import load_capture
    from producers.blobstore import open_blob_store

    settings = load_settings()
    index = open_index(settings)
    try:
        gate = gate_for(settings, index)
        caller = caller_for(settings, reason=reason)
        shown = load_capture(
            decision_id, index=index, store=open_blob_store(settings), gate=gate, caller=caller
        )
    finally:
        index.close()
    view = shown.to_json()
    if as_json:
        typer.echo(json.dumps(view, ensure_ascii=False, indent=2))
        return
    _print_summary(view)


def _print_summary(view: dict[str, Any]) -> None:
    capture = view["capture"]
    stored = view["stored"]
    lines = [
        f"decision   {view['decisionId']}  ({view['kind']})",
        f"state      {view['contentState']}: {view['note']}",
    ]
    if stored:
        lines.append(
            f"stored     {stored.get('segment_key', '')} @{stored.get('segment_offset', '')}+{stored.get('segment_length', '')}"
            f"  class={stored.get('retention_class', '')} expires={stored.get('expires_at', '')}"
            f" trust={stored.get('trust', '')} key={stored.get('key_id', '')}"
        )
    for q in view["quarantine"]:
        lines.append(
            f"QUARANTINE {q.get('reason')} part={q.get('part')} from {q.get('source')} ({q.get('content_sha256')})"
        )
    if view["kind"] == "capture":
        config = capture.get("agentConfiguration") or {}
        trace = capture.get("executionTrace") or {}
        outcome = capture.get("outcome") or {}
        lines += [
            f"agent      {capture.get('agentId')}  at {capture.get('capturedAt')}  level={capture.get('captureLevel')}",
            f"model      {config.get('modelIdentifier')} {config.get('modelVersion')}  prompt {config.get('systemPromptVersion')}",
            f"outcome    {outcome.get('status')}  stop={trace.get('stopReason')}  tool calls={len(trace.get('toolCalls') or [])}",
            f"output     {_clip(trace.get('finalOutputText'))}",
        ]
    else:
        lines.append(f"value      {json.dumps(capture, ensure_ascii=False)[:300]}")
    typer.echo("\n".join(lines))


def _clip(text: Any, n: int = 160) -> str:
    if text is None:
        return "(content absent)"
    s = str(text).replace("\n", " ")
    return s if len(s) <= n else s[: n - 1] + "…"


def register(app: typer.Typer) -> None:
    app.command("consume")(consume_command)
    app.command("show")(show_command)

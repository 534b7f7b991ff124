"""``blackbox verify``: is a capture evidence? Prints the verdict and exits by it.

- ``blackbox verify --file FILE.json`` verifies a capture in the JSON form.
- ``blackbox verify DECISION_ID`` checks the stored capture (one range GET) and its index rows,
  after the access gate has logged the read; a compacted decision verifies from its manifest.

Output: ``verified: <decisionId> key=<key_id> (N parts)`` (plus the absent parts of a
structured-only or compacted capture), ``NOT VERIFIED: <decisionId> part=<part> (<Error>): <reason>``
or ``EXPIRED: <decisionId>: <reason>``. Exit codes (:mod:`consumers.verify.verdict`, shared with
``show``): 0 verified; 1 not verified - tampered, a segment missing, truncated or not decompressing,
key unknown or revoked, unsigned, quarantined; 3 expired under retention. Problems that are not a
verdict (unreadable file, no trust store, index or blob store unreachable) are errors: exit 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from consumers.app.runtime import open_runtime
from consumers.app.settings import ServiceSettings, load_service_settings
from consumers.verify.verdict import EXIT_CODES_HELP, EXIT_NOT_VERIFIED
from producers.evidence import TrustStore, verify_capture
from schemas.errors import ContractError, VerificationError

__all__ = ["register", "verify_command"]


def _load_capture_file(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ContractError(f"cannot read: {exc}", path=str(path)) from exc
    except json.JSONDecodeError as exc:
        raise ContractError(
            f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", path=str(path)
        ) from exc
    if not isinstance(value, dict):
        raise ContractError("a capture is a JSON object", path=str(path))
    return value


def _verify_by_id(decision_id: str, settings: ServiceSettings, trust: TrustStore, reason: str) -> None:
    """Verify the stored capture and its index rows, after the access gate logged the read."""
    from consumers.storage.store import current_row
    from consumers.verify.stored import stored_verdict

    with open_runtime(settings, existing_index=True) as rt:
        index = rt.index
        row = current_row(index, decision_id)
        subject = (
            json.loads(row["manifest_json"])
            if row and row.get("manifest_json")
            else {"decisionId": decision_id, "agentId": (row or {}).get("agent_id", "")}
        )
        rt.gate.authorize(rt.caller(reason), subject, action="verify")
        verdict = stored_verdict(decision_id, index=index, store=rt.blob_store, trust=trust)
    for line in (verdict.line(), *verdict.notes()):
        typer.echo(line)
    if verdict.exit_code:
        raise typer.Exit(verdict.exit_code)


def verify_command(
    decision_id: Annotated[
        str | None, typer.Argument(help="Decision id: verify the stored capture and its index rows.")
    ] = None,
    file: Annotated[Path | None, typer.Option("--file", "-f", help="A capture in the JSON form.")] = None,
    trust_store: Annotated[
        Path | None, typer.Option("--trust-store", help="Trust store TOML (default from settings).")
    ] = None,
    reason: Annotated[
        str, typer.Option("--reason", help="Why you are reading; recorded in the access log.")
    ] = "verify",
) -> None:
    """Verify a capture's signature, key, content hashes and working-set root."""
    if (decision_id is None) == (file is None):
        raise ContractError("give either a DECISION_ID or --file FILE.json", path="verify")
    settings = load_service_settings(trust_store=trust_store)
    trust = TrustStore.load(settings.resolved_trust_store)  # strict: a missing trust store is an error
    if file is None:
        _verify_by_id(str(decision_id), settings, trust, reason)
        return
    capture = _load_capture_file(file)
    name = capture.get("decisionId") or decision_id or (str(file) if file else "?")
    try:
        report = verify_capture(capture, trust)
    except VerificationError as exc:
        reason = str(exc).removeprefix(f"{exc.part}: ")
        typer.echo(f"NOT VERIFIED: {name} part={exc.part} ({type(exc).__name__}): {reason}")
        raise typer.Exit(EXIT_NOT_VERIFIED) from exc
    typer.echo(f"verified: {name} key={report.key_id} ({report.checked_parts} parts)")
    if report.absent_parts:
        typer.echo(f"absent content (hash kept, not checked): {', '.join(report.absent_parts)}")


def register(app: typer.Typer) -> None:
    app.command("verify", epilog=EXIT_CODES_HELP)(verify_command)

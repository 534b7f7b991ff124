"""``blackbox verify``: is a capture evidence? Prints the verdict and exits 0 (verified) or 1 (not).

- ``blackbox verify --file FILE.json`` verifies a capture in the JSON form.
- ``blackbox verify DECISION_ID`` will load the capture from the store: the lookup is
  :func:`_load_capture_by_id`, filled in by the ingest/index area (it must pass the access gate).

Output: ``verified: <decisionId> key=<key_id> (N parts)`` (plus the absent parts of a
structured-only or compacted capture), or ``NOT VERIFIED: <decisionId> part=<part>: <reason>``.
Problems that are not a verdict (unreadable file, no trust store) are errors: exit 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from producers.evidence import TrustStore, verify_capture
from producers.settings import BlackboxSettings, load_settings
from schemas.errors import BlackboxError, ContractError, VerificationError

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


def _load_capture_by_id(decision_id: str, settings: BlackboxSettings) -> dict[str, Any]:
    """The capture for ``decision_id`` from the index and blob store (not wired yet)."""
    raise BlackboxError(
        f"verify by decision id ({decision_id}) is not available yet: the index lookup is not wired; "
        "use `blackbox verify --file FILE.json`"
    )


def verify_command(
    decision_id: Annotated[
        str | None, typer.Argument(help="Decision id to load from the store (not available yet).")
    ] = None,
    file: Annotated[Path | None, typer.Option("--file", "-f", help="A capture in the JSON form.")] = None,
    trust_store: Annotated[
        Path | None, typer.Option("--trust-store", help="Trust store TOML (default from settings).")
    ] = None,
) -> None:
    """Verify a capture's signature, key, content hashes and working-set root."""
    if (decision_id is None) == (file is None):
        raise ContractError("give either a DECISION_ID or --file FILE.json", path="verify")
    settings = load_settings(trust_store=trust_store)
    capture = (
        _load_capture_file(file) if file is not None else _load_capture_by_id(str(decision_id), settings)
    )
    trust = TrustStore.load(settings.resolved_trust_store)
    name = capture.get("decisionId") or decision_id or (str(file) if file else "?")
    try:
        report = verify_capture(capture, trust)
    except VerificationError as exc:
        reason = str(exc).removeprefix(f"{exc.part}: ")
        typer.echo(f"NOT VERIFIED: {name} part={exc.part} ({type(exc).__name__}): {reason}")
        raise typer.Exit(1) from exc
    typer.echo(f"verified: {name} key={report.key_id} ({report.checked_parts} parts)")
    if report.absent_parts:
        typer.echo(f"absent content (hash kept, not checked): {', '.join(report.absent_parts)}")


def register(app: typer.Typer) -> None:
    app.command("verify")(verify_command)

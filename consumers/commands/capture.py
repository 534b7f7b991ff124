"""``blackbox capture FILE.json``: validate, seal and emit one capture written in the JSON form.

Everything is checked before anything is sent: the JSON parses (else line and column), the
capture satisfies the contract (else the field path), every supplied hash agrees with its content
(else the hash field's path), a signing key is configured, and the sealed capture encodes. Then it
goes through the configured transport (claim check if large), is flushed, and its decision id is
printed. Any failure prints ``error: <path>: <reason>`` and exits 2.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from schemas.errors import BlackboxError, ContractError, TransportError

__all__ = ["capture_command", "register"]


def _read_json(file: str) -> Any:
    try:
        text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ContractError(f"cannot read: {exc}", path=file) from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ContractError(
            f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", path=file
        ) from exc


def _signer(settings: Any) -> Any:
    from producers.evidence import load_signer

    if settings.signing_key is None and settings.signing_key_b64 is None:
        raise ContractError(
            "no signing key configured; create one with `blackbox keys generate` and set "
            "BLACKBOX_SIGNING_KEY=<private key file> (or BLACKBOX_SIGNING_KEY_B64)",
            path="signing_key",
        )
    return load_signer(settings.signing_key, settings.signing_key_b64)


def emit_capture_file(file: str, *, settings: Any, timeout: float) -> str:
    """Validate, seal and deliver the capture in ``file``; return its decision id."""
    from producers.policy import CapturePolicy
    from producers.recorder import CaptureFailure, Recorder
    from schemas.codec import encode_capture
    from schemas.models import Capture

    raw = _read_json(file)
    capture = Capture.from_json(raw).to_json()
    signer = _signer(settings)
    from producers.evidence import seal

    sealed = CapturePolicy().apply(seal(capture, signer))
    encode_capture(sealed)  # refuse what cannot be stored before anything is sent

    failures: list[CaptureFailure] = []
    options: dict[str, Any] = {}
    if settings.transport == "kafka":
        options["message_timeout_ms"] = max(1000, int(timeout * 1000))
    recorder = Recorder.from_settings(
        settings,
        agent_id=sealed["agentId"],
        runtime_id=sealed.get("runtimeId"),
        signer=signer,
        on_error=failures.append,
        consequential_wait=timeout,
        transport_options=options,
    )
    recorder.record(sealed)
    delivered = recorder.close(timeout)
    if failures:
        raise failures[0].error
    if not delivered:
        raise TransportError(f"not delivered within {timeout}s")
    return str(sealed["decisionId"])


def capture_command(
    file: Annotated[
        str, typer.Argument(help="Capture in the JSON form (replay/v1 + blackbox fields); '-' reads stdin.")
    ],
    timeout: Annotated[float, typer.Option(help="Seconds to wait for delivery.")] = 30.0,
) -> None:
    """Seal (hash, Merkle root, sign) and emit one capture; print its decision id."""
    from producers.settings import load_settings

    try:
        decision_id = emit_capture_file(file, settings=load_settings(), timeout=timeout)
    except BlackboxError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    typer.echo(decision_id)


def register(app: typer.Typer) -> None:
    app.command("capture")(capture_command)

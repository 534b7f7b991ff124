"""``blackbox export DECISION_ID --out FILE``: the evidence bundle of one decision, for a third party.

The read passes the access gate (action ``export``, logged). The bundle (format:
:mod:`producers.evidence.bundle`, README "Evidence bundles") verifies offline with the SDK alone:
``blackbox verify --bundle FILE --trust KEYFILE`` or ``python -m producers.evidence.bundle``.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from consumers import terminal
from consumers.app.runtime import open_runtime
from schemas.errors import ContractError

__all__ = ["export_command", "register"]


def export_command(
    decision_id: Annotated[str, typer.Argument(help="The decision to export.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Where to write the bundle (JSON).")],
    reason: Annotated[str, typer.Option("--reason", help="Why you are exporting (access log).")] = "export",
) -> None:
    """Write the evidence bundle of a decision: capture, signed envelope, key and trust record, log proof."""
    from consumers.privacy.ids import index_ids
    from consumers.verify.bundle import export_bundle

    with open_runtime(existing_index=True) as rt:
        bundle = export_bundle(
            decision_id,
            index=rt.index,
            store=rt.blob_store,
            trust=rt.trust_store,
            gate=rt.gate,
            caller=rt.caller(reason),
            prover=rt.bundle_prover(),
            now=datetime.now(UTC),
            ids=index_ids(rt.settings),
        )
    data = json.dumps(bundle, ensure_ascii=False, indent=2).encode("utf-8") + b"\n"
    temporary = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        temporary.write_bytes(data)
        os.replace(temporary, out)
    except OSError as exc:
        raise ContractError(f"cannot write: {exc}", path=str(out)) from exc
    proof = (
        "with an inclusion proof"
        if bundle.get("transparency")
        else f"WITHOUT an inclusion proof: {bundle.get('transparencyNote')}"
    )
    terminal.echo(f"exported {decision_id} to {out} ({len(data)} bytes, {proof})")


def register(app: typer.Typer) -> None:
    app.command("export")(export_command)

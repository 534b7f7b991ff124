"""``blackbox erase`` (crypto-shredding, :mod:`consumers.retention.erasure`).

- ``blackbox erase --subject ORIGIN_USER_ID --reason TEXT`` / ``--decision ID`` (repeatable): destroy
  the data keys of those decisions; the originals are unreadable everywhere, the redacted captures
  still verify. Each decision prints one line (``erased``, ``already erased``, ``no original``,
  ``held``). A decision under legal hold is not erased: the command names it and exits 2.

Revealing an original is ``blackbox show ID --reveal`` (a grant with ``personal_data = true``).
"""

from __future__ import annotations

from typing import Annotated

import typer

from consumers import terminal
from consumers.app.runtime import open_runtime
from schemas.errors import ContractError, RetentionError

__all__ = ["erase_command", "register"]


class ErasureBlocked(RetentionError):
    """A legal hold blocks the erasure of some decisions (the others were erased)."""


def erase_command(
    reason: Annotated[str, typer.Option("--reason", help="Why (recorded in the retention log).")],
    subject: Annotated[
        str | None, typer.Option("--subject", help="Erase every decision whose originUserId is this.")
    ] = None,
    decision: Annotated[
        list[str] | None, typer.Option("--decision", help="Erase this decision (repeatable).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the outcome as JSON.")] = False,
) -> None:
    """Erase the original of personal data (destroy its data keys); the evidence keeps verifying."""
    from consumers.privacy.ids import index_ids
    from consumers.retention.compaction import retention_dir
    from consumers.retention.erasure import Eraser
    from consumers.retention.lease import retention_lease
    from consumers.retention.log import DeletionLog
    from producers.privacy.keys import DataKeyStore

    if (subject is None) == (not decision):
        raise ContractError("erase: give either --subject ORIGIN_USER_ID or --decision ID (repeatable)")
    with (
        open_runtime(existing_index=True) as rt,
        retention_lease(
            rt.blob_store,
            what="erasure",
            ttl=rt.settings.retention_lease,
            wait=rt.settings.retention_lease_wait,
        ) as lease,
    ):
        eraser = Eraser(
            index=rt.index,
            keys=DataKeyStore(rt.blob_store),
            log=DeletionLog(rt.index, retention_dir(rt.settings.data_dir) / "deletions.jsonl"),
            ids=index_ids(rt.settings),
        )
        ids = eraser.decisions_of(subject) if subject is not None else list(decision or ())
        lease.check("the erasure")
        results = eraser.erase(ids, reason=reason)
    if as_json:
        terminal.echo_json(
            [{"decisionId": r.decision_id, "outcome": r.outcome, "detail": r.detail} for r in results],
            indent=None,
        )
    else:
        if not results:
            terminal.echo(f"no decisions of subject {terminal.clean(repr(subject))} in the index")
        for result in results:
            terminal.echo(terminal.clean(result.line()))
    held = [r.decision_id for r in results if r.outcome == "held"]
    if held:
        raise ErasureBlocked(f"not erased, under legal hold: {', '.join(held)} (release the hold first)")


def register(app: typer.Typer) -> None:
    app.command("erase")(erase_command)

"""``blackbox log``: the transparency log (:mod:`consumers.tlog`).

- ``log checkpoint`` prints the latest signed checkpoint (a C2SP signed note): keep one, it is what
  ``log verify --since`` proves the log still extends.
- ``log key`` prints the log's verifier key (``<origin>+<key id>+<base64>``).
- ``log prove ID`` prints the inclusion proof of a decision's leaf as JSON.
- ``log verify [--since CHECKPOINT_FILE] [--witness VKEY ... --witness-quorum K]`` checks the whole log
  (:mod:`consumers.tlog.audit`) and prints one line per finding; with ``--witness``, the latest cosigned
  checkpoint must carry K of those witnesses' cosignatures (DESIGN 24).
- ``log status`` prints the log's size and each configured witness's last cosigned size.
- ``log witness-config --url URL`` prints this log in transparency-dev/witness's configuration format. Exit codes: 0 nothing found; 1 findings; 2 errors (no log, a
  ``--since`` file that is not this log's checkpoint, services unreachable).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

import typer

from consumers import terminal
from consumers.app.runtime import open_runtime
from schemas.errors import ContractError, ProofInvalid, TransparencyLogError

__all__ = ["register"]

EXIT_FINDINGS = 1


def checkpoint() -> None:
    """Print the latest signed checkpoint of the transparency log."""
    from consumers.tlog.checkpoints import latest

    with open_runtime() as rt:
        current = latest(rt.blob_store, rt.settings.resolved_tlog_prefix)
    if current is None:
        raise TransparencyLogError(
            f"no checkpoint at {rt.settings.resolved_tlog_prefix}/checkpoint: nothing has been logged yet"
        )
    typer.echo(current[0], nl=False)  # the signed note, byte for byte (our own text)


def key() -> None:
    """Print the log's verifier key: what a third party trusts to check checkpoints and proofs."""
    from consumers.tlog import log_vkey

    with open_runtime() as rt:
        typer.echo(log_vkey(rt))  # our own key line


def prove(decision_id: Annotated[str, typer.Argument(help="The decision whose leaf to prove.")]) -> None:
    """Print the inclusion proof of a decision's leaf under the latest checkpoint (JSON)."""
    from consumers.tlog import prove as prove_leaf

    with open_runtime(existing_index=True) as rt:
        proof = prove_leaf(rt, decision_id)
    terminal.echo_json(proof)


def verify(
    since: Annotated[
        Path | None,
        typer.Option(
            "--since", help="An earlier checkpoint (from `log checkpoint`) the log must still extend."
        ),
    ] = None,
    shared: Annotated[
        bool,
        typer.Option(
            "--shared",
            help="Several ingest hosts, each with its own index, write this log: leaves of decisions this "
            "index does not hold are the others' (a note, not a finding).",
        ),
    ] = False,
    witness: Annotated[
        list[str] | None,
        typer.Option("--witness", help="A witness's cosignature verifier key (text or file); repeatable."),
    ] = None,
    witness_quorum: Annotated[
        int | None,
        typer.Option("--witness-quorum", help="How many --witness keys must have cosigned (default all)."),
    ] = None,
) -> None:
    """Check the log: consistency with --since, every tile, the index, timestamps and capture times."""
    from consumers.privacy.ids import index_ids
    from consumers.tlog.audit import audit
    from consumers.tlog.checkpoints import load_log_signer
    from consumers.tlog.timestamp import load_roots

    old = None
    if since is not None:
        try:
            old = since.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ContractError(f"cannot read: {exc}", path=str(since)) from exc
    with open_runtime(existing_index=True) as rt:
        s = rt.settings
        signer = load_log_signer(s.resolved_tlog_key, s.tlog_origin, create=False)
        report = audit(
            store=rt.blob_store,
            index=rt.index,
            prefix=s.resolved_tlog_prefix,
            key=signer.key,
            since=old,
            skew=timedelta(seconds=s.tlog_time_skew),
            tsa_roots=load_roots(s.tlog_tsa_roots) if s.tlog_tsa_roots else (),
            ids=index_ids(s),
            shared=shared,
        )
        witnessed = _witnessed(rt.blob_store, s.resolved_tlog_prefix, signer.key, witness, witness_quorum)
    head = report.checkpoint
    terminal.echo(f"log {head.origin}: checkpoint of {head.size} leaves")
    if report.since is not None:
        terminal.echo(f"since: checkpoint of {report.since.size} leaves")
    terminal.echo(
        f"checked: {report.leaves} leaves, {report.tiles} tiles, {report.checkpoints} checkpoints, "
        f"{report.timestamps} timestamps ({report.timestamps_signed} TSA signatures)"
    )
    for note in report.notes:
        terminal.echo(f"note: {terminal.clean(note)}")
    for finding in report.findings:
        terminal.echo(f"FINDING {terminal.clean(finding.kind)}: {terminal.clean(finding.detail)}")
    if witnessed:
        terminal.echo(terminal.clean(witnessed))
    failed = len(report.findings) + witnessed.startswith("FINDING")
    if not report.ok or failed:
        terminal.echo(f"NOT VERIFIED: {failed} findings")
        raise typer.Exit(EXIT_FINDINGS)
    terminal.echo("verified: the log extends every checkpoint and accounts for every capture")


def _witnessed(store: Any, prefix: str, key: Any, witness: list[str] | None, quorum: int | None) -> str:
    """The line about the latest cosigned checkpoint ("" without --witness)."""
    from consumers.tlog.witness import check_cosigned

    vkeys = [_read_key(w) for w in witness or []]
    if not vkeys and not quorum:
        return ""
    try:
        checkpoint, report = check_cosigned(
            store, prefix, log_key=key, witnesses=vkeys, quorum=len(vkeys) if quorum is None else quorum
        )
    except (ProofInvalid, TransparencyLogError) as exc:
        return f"FINDING witness: {exc}"
    return f"checkpoint of {checkpoint.size} leaves {report.line()}"


def _read_key(value: str) -> str:
    path = Path(value)
    if "+" not in value and path.is_file():
        return path.read_text(encoding="utf-8").strip()
    return value.strip()


def status() -> None:
    """Print the log's latest checkpoint size and each configured witness's last cosigned size."""
    from consumers.tlog.checkpoints import latest
    from consumers.tlog.witness import read_states

    with open_runtime() as rt:
        s = rt.settings
        current = latest(rt.blob_store, s.resolved_tlog_prefix)
        states = read_states(rt.blob_store, s.resolved_tlog_prefix, [w.name for w in s.tlog_witnesses])
    typer.echo(f"log {s.tlog_origin}: checkpoint of {current[1].size if current else 0} leaves")
    for w, state in zip(s.tlog_witnesses, states, strict=True):
        seen = f"cosigned {state.size} leaves at {state.cosigned_at}" if state else "has not cosigned yet"
        typer.echo(f"witness {w.name} ({w.url}): {seen}")


def witness_config(
    url: Annotated[
        str | None,
        typer.Option("--url", help="Where outsiders read this log (default BLACKBOX_TLOG_PUBLIC_URL)."),
    ] = None,
) -> None:
    """Print this log as transparency-dev/witness's omniwitness --additional_logs YAML expects it."""
    from consumers.tlog import log_vkey
    from consumers.tlog.witness import witness_config_yaml

    with open_runtime() as rt:
        vkey = log_vkey(rt)
        origin = rt.settings.tlog_origin
        public = url or rt.settings.tlog_public_url
    if not public:
        raise ContractError(
            "give --url (or set BLACKBOX_TLOG_PUBLIC_URL): where witnesses read this log", path="--url"
        )
    typer.echo(witness_config_yaml(origin=origin, vkey=vkey, url=public), nl=False)


def register(app: typer.Typer) -> None:
    log_app = typer.Typer(
        help="The transparency log: checkpoints, proofs, verification.", no_args_is_help=True
    )
    log_app.command("checkpoint")(checkpoint)
    log_app.command("key")(key)
    log_app.command("prove")(prove)
    log_app.command("verify")(verify)
    log_app.command("status")(status)
    log_app.command("witness-config")(witness_config)
    app.add_typer(log_app, name="log")

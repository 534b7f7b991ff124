"""``blackbox pact``: pact sets as signed versions in the shared blob store (DESIGN decision 26).

- ``pact propose FILE --reason TEXT [--key PATH] [--author NAME]`` checks every rule, signs the
  document with the operator key (``--key`` or ``BLACKBOX_PACT_KEY``; its public key must be in the
  trust store) and stores it as a new version whose parent is the applied one; nothing is applied;
- ``pact show VERSION [--json]`` one version, verified, with its document;
- ``pact diff A B`` a unified diff of two versions' documents;
- ``pact history [--agent ID] [--json]`` every version (those binding ``ID``), oldest first, with
  which one is applied.
"""

from __future__ import annotations

import difflib
import getpass
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from consumers.app.runtime import open_runtime
from consumers.commands.index import JsonOpt, print_rows
from consumers.index.engine import insert_rows
from consumers.pacts.versions import (
    PactVersion,
    PactVersionError,
    applied_pointer,
    list_versions,
    load_version,
    propose_version,
)
from producers.evidence import TrustStore, load_signer
from producers.evidence.trust import format_time

__all__ = ["register"]


def _trust(rt: Any) -> TrustStore:
    return TrustStore.load(rt.settings.resolved_trust_store, missing_ok=True)


def _summary(v: PactVersion, applied: str) -> dict[str, Any]:
    return {
        "version": v.version,
        "applied": v.version == applied,
        "created_at": format_time(v.created_at),
        "author": v.author,
        "key_id": v.key_id,
        "parent": v.parent,
        "agents": ",".join(v.book.agents),
        "rules": ",".join(r.name for r in v.book.rules),
        "reason": v.reason,
    }


def propose(
    file: Annotated[Path, typer.Argument(help="The pact set document (TOML).")],
    reason: Annotated[str, typer.Option("--reason", help="Why this change (kept with the version).")],
    key: Annotated[
        Path | None, typer.Option("--key", help="Operator signing key (default BLACKBOX_PACT_KEY).")
    ] = None,
    author: Annotated[str, typer.Option("--author", help="Who proposes it (default the OS user).")] = "",
) -> None:
    """Sign and store a pact set document as a new version (not applied)."""
    key_path = key or (Path(os.environ["BLACKBOX_PACT_KEY"]) if os.environ.get("BLACKBOX_PACT_KEY") else None)
    if key_path is None:
        raise PactVersionError("no operator key: pass --key PATH or set BLACKBOX_PACT_KEY")
    try:
        document = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise PactVersionError(f"cannot read the pact file {file}: {exc}") from exc
    signer = load_signer(path=key_path)
    now = datetime.now(UTC)
    with open_runtime() as rt:
        trust = _trust(rt)
        trust.check(signer.key_id, now)  # refuse a key the trust store does not accept, before storing
        version = propose_version(
            rt.blob_store,
            document=document,
            author=author or getpass.getuser(),
            reason=reason,
            signer=signer,
            now=now,
            source=str(file),
        )
        insert_rows(
            rt.index,
            "pact_versions",
            [
                {
                    "version": version.version,
                    "content_hash": version.content_hash,
                    "parent": version.parent,
                    "author": version.author,
                    "reason": version.reason,
                    "agents": ",".join(version.book.agents),
                    "key_id": version.key_id,
                    "created_at": version.created_at,
                }
            ],
        )
    typer.echo(
        f"proposed {version.version} ({len(version.book)} rule(s), agents {','.join(version.book.agents)}, "
        f"parent {version.parent or '-'}); apply with `blackbox pact apply {version.version}`"
    )


def show(
    version: Annotated[str, typer.Argument(help="The version id (pv_…).")],
    as_json: JsonOpt = False,
) -> None:
    """One version, its signature and hashes verified, with its document."""
    with open_runtime() as rt:
        v = load_version(rt.blob_store, version, _trust(rt))
        pointer = applied_pointer(rt.blob_store)
    applied = pointer.version if pointer else ""
    if as_json:
        typer.echo(json.dumps({**v.record(), "keyId": v.key_id, "applied": v.version == applied}, indent=2))
        return
    for name, value in _summary(v, applied).items():
        typer.echo(f"{name:>10}: {value}")
    typer.echo(f"{'hash':>10}: {v.content_hash}")
    typer.echo("")
    typer.echo(v.document.rstrip("\n"))


def diff(
    a: Annotated[str, typer.Argument(help="The older version.")],
    b: Annotated[str, typer.Argument(help="The newer version.")],
) -> None:
    """A unified diff of two versions' documents (and which rules were added, removed or changed)."""
    with open_runtime() as rt:
        trust = _trust(rt)
        va, vb = load_version(rt.blob_store, a, trust), load_version(rt.blob_store, b, trust)
    rules_a = {r.name: r.source for r in va.book.rules}
    rules_b = {r.name: r.source for r in vb.book.rules}
    for name in sorted(rules_a.keys() | rules_b.keys()):
        if name not in rules_a:
            typer.echo(f"rule added:   {name}")
        elif name not in rules_b:
            typer.echo(f"rule removed: {name}")
        elif rules_a[name] != rules_b[name]:
            typer.echo(f"rule changed: {name}")
    if va.book.agents != vb.book.agents:
        typer.echo(f"agents: {','.join(va.book.agents)} -> {','.join(vb.book.agents)}")
    lines = difflib.unified_diff(
        va.document.splitlines(), vb.document.splitlines(), fromfile=a, tofile=b, lineterm=""
    )
    for line in lines:
        typer.echo(line)


def history(
    agent: Annotated[str | None, typer.Option("--agent", help="Only versions binding this agent id.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Every pact version, oldest first; `applied` marks the one ingest judges by."""
    with open_runtime() as rt:
        versions = list_versions(rt.blob_store, _trust(rt))
        pointer = applied_pointer(rt.blob_store)
    applied = pointer.version if pointer else ""
    rows = [_summary(v, applied) for v in versions if agent is None or v.book.binds(agent)]
    print_rows(rows, as_json=as_json, title="pact versions")


def register(app: typer.Typer) -> None:
    pact_app = typer.Typer(
        help="Pact sets as signed versions: propose, show, diff, history.", no_args_is_help=True
    )
    pact_app.command("propose")(propose)
    pact_app.command("show")(show)
    pact_app.command("diff")(diff)
    pact_app.command("history")(history)
    app.add_typer(pact_app, name="pact")

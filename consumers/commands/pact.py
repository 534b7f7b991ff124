"""``blackbox pact``: pact sets as signed versions in the shared blob store (DESIGN decision 26).

- ``pact propose FILE --reason TEXT [--key PATH] [--author NAME]`` checks every rule, signs the
  document with the operator key (``--key`` or ``BLACKBOX_PACT_KEY``; its public key must be in the
  trust store) and stores it as a new version whose parent is the applied one; nothing is applied;
- ``pact show VERSION [--json]`` one version, verified, with its document;
- ``pact export VERSION|applied [--out FILE]`` the signed version document, verified, as an agent's
  Recorder reads it (``BLACKBOX_PACT``: the file, or a URL serving it);
- ``pact diff A B`` a unified diff of two versions' documents;
- ``pact history [--agent ID] [--json]`` every version (those binding ``ID``), oldest first, with
  which one is applied;
- ``pact apply VERSION [--sample N] [--force --reason TEXT] [--json]`` judges the findings' pinned
  decisions and a sample of recent decisions of the bound agents under the applied and the new version
  (:mod:`consumers.pacts.gate`), prints what would change per rule, and moves the shared pointer only
  if the gate passes (exit 1 otherwise); ``--force`` applies anyway and is logged as forced with its
  reason. Every capture read is a logged access (action ``evaluate``). An apply is appended to the
  transparency log (its own entry type, :mod:`consumers.tlog.entries`) before the pointer moves;
- ``pact bundle VERSION -o FILE`` the signed version, its latest apply and the apply's inclusion proof,
  for ``blackbox verify --bundle FILE`` offline (:mod:`consumers.pacts.bundle`).
"""

from __future__ import annotations

import difflib
import getpass
import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer

from consumers.app.runtime import open_runtime
from consumers.commands.index import JsonOpt, print_rows
from consumers.pacts.gate import GateReport
from consumers.pacts.record import agent_record
from consumers.pacts.store import insert_version
from consumers.pacts.versions import (
    PactVersion,
    PactVersionError,
    applied_pointer,
    list_versions,
    load_version,
    propose_version,
    version_key,
)
from producers.evidence import TrustStore, load_signer
from producers.evidence.trust import format_time, parse_time
from schemas.errors import ContractError

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
        insert_version(rt.index, version)
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


def export(
    version: Annotated[str, typer.Argument(help="The version id (pv_…), or 'applied' for the applied one.")],
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write the document here (replaced atomically).")
    ] = None,
) -> None:
    """The signed version document, verified first, for an agent's Recorder (BLACKBOX_PACT)."""
    with open_runtime() as rt:
        if version == "applied":
            pointer = applied_pointer(rt.blob_store)
            if pointer is None:
                raise PactVersionError("no pact version is applied yet (see `blackbox pact apply`)")
            version = pointer.version
        load_version(rt.blob_store, version, _trust(rt))  # refuse to hand out what does not verify
        raw = rt.blob_store.get(version_key(version))
    if out is None:
        typer.echo(raw.decode("utf-8"))
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    temporary = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    temporary.write_bytes(raw)
    os.replace(temporary, out)  # a Recorder reading the file sees the old document or the new one
    typer.echo(f"exported {version} to {out}")


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


def apply(
    version: Annotated[str, typer.Argument(help="The version to apply (pv_…).")],
    sample: Annotated[int, typer.Option("--sample", min=0, help="Recent decisions to judge.")] = 200,
    force: Annotated[
        bool, typer.Option("--force", help="Apply even if the gate fails (needs --reason).")
    ] = False,
    reason: Annotated[str, typer.Option("--reason", help="Why (required with --force).")] = "",
    as_json: JsonOpt = False,
) -> None:
    """Gate a version by what it would change on real decisions, then apply it (or --force it)."""
    from consumers.app.pact_apply import apply_version

    with open_runtime(existing_index=True) as rt:
        outcome = apply_version(rt, version, now=datetime.now(UTC), sample=sample, force=force, reason=reason)
    report, new, applied, logged = outcome.report, outcome.version, outcome.applied, outcome.logged
    if as_json:
        typer.echo(
            json.dumps(
                {**report.to_json(), "version": new.version, "applied": applied, "logged": logged}, indent=2
            )
        )
    else:
        _print_gate(report, new.version, applied=applied)
        if logged:
            typer.echo(f"logged as {logged}; export it with `blackbox pact bundle {new.version} -o FILE`")
    if not applied:
        raise typer.Exit(1)


def bundle(
    version: Annotated[str, typer.Argument(help="The applied version (pv_…).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Where to write the pact bundle (JSON).")],
) -> None:
    """Write the pact bundle of a version's latest apply: the signed version, the apply record and its
    inclusion proof in the transparency log; `blackbox verify --bundle FILE --trust KEY --log-key VKEY`
    checks it offline."""
    from consumers.pacts.logged import export_pact_bundle

    with open_runtime(existing_index=True) as rt:
        document = export_pact_bundle(
            version,
            index=rt.index,
            store=rt.blob_store,
            prover=rt.bundle_prover(),
            now=datetime.now(UTC),
        )
    try:
        out.write_bytes(json.dumps(document, ensure_ascii=False, indent=2).encode("utf-8") + b"\n")
    except OSError as exc:
        raise ContractError(f"cannot write the bundle: {exc}", path=str(out)) from exc
    proof = document["transparency"]["proof"]
    typer.echo(f"wrote {out}: {version}, leaf {proof['leafIndex']} of {proof['treeSize']}")


def _print_gate(report: GateReport, version: str, *, applied: bool) -> None:
    typer.echo(f"gate for {version}: judged {report.judged} decision(s), {report.pinned} pinned by findings")
    if not report.changes:
        typer.echo("  no verdict changes")
    for c in report.changes:
        typer.echo(
            f"  {c.rule}: would flag {len(c.flagged)}, clear {len(c.cleared)}, "
            f"errors {c.errors_before} -> {c.errors_after}"
        )
        for did in c.flagged[:10]:
            typer.echo(f"    + {did}")
        for did in c.cleared[:10]:
            typer.echo(f"    - {did}")
    if report.unreadable:
        typer.echo(f"  not judged (unreadable or denied): {len(report.unreadable)}")
    for why in report.reasons():
        typer.echo(f"  FAIL: {why}")
    verdict = "passed" if report.passed else "failed"
    typer.echo(
        f"gate {verdict}; {'applied' if applied else 'NOT applied (use --force --reason to override)'}"
    )


def record(
    agent: Annotated[str, typer.Argument(help="The agent id.")],
    since: Annotated[
        str | None, typer.Option("--since", help="Window start, ISO-8601 (default 30 days ago).")
    ] = None,
    until: Annotated[
        str | None, typer.Option("--until", help="Window end (exclusive), ISO-8601 (default none).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """An agent's behavioural record: decisions, failures, violations per rule per 1,000, findings,
    gates, pact versions in force and a score (Wilson lower bound of clean decisions)."""
    try:
        start = parse_time(since) if since else datetime.now(UTC) - timedelta(days=30)
    except ValueError as exc:
        raise ContractError(f"not an ISO-8601 time: {since!r}", path="--since") from exc
    try:
        end = parse_time(until) if until else None
    except ValueError as exc:
        raise ContractError(f"not an ISO-8601 time: {until!r}", path="--until") from exc
    with open_runtime(existing_index=True) as rt:
        result = agent_record(rt.index, agent, since=start, until=end)
    doc = result.to_json()
    if as_json:
        typer.echo(json.dumps(doc, indent=2))
        return
    typer.echo(f"agent {agent} since {doc['since']}" + (f" until {doc['until']}" if "until" in doc else ""))
    for name in ("decisions", "consequential", "failures", "clean"):
        typer.echo(f"  {name:<14} {doc[name]}")
    typer.echo(f"  {'score':<14} {doc['score']}  ({doc['score_formula']})")
    typer.echo(f"  {'gates':<14} passed {doc['gates']['passed']}, failed {doc['gates']['failed']}")
    print_rows(doc["violations"], as_json=False, title="pact violations (decisions, per 1,000)")
    print_rows(doc["findings"], as_json=False, title="findings (pinned decisions, per 1,000)")
    print_rows(doc["pact_versions"], as_json=False, title="pact versions in force")


def register(app: typer.Typer) -> None:
    pact_app = typer.Typer(
        help="Pact sets as signed versions: propose, show, export, diff, history, apply, bundle.",
        no_args_is_help=True,
    )
    pact_app.command("propose")(propose)
    pact_app.command("show")(show)
    pact_app.command("export")(export)
    pact_app.command("diff")(diff)
    pact_app.command("history")(history)
    pact_app.command("apply")(apply)
    pact_app.command("bundle")(bundle)
    app.add_typer(pact_app, name="pact")
    app.command("record")(record)

"""``blackbox verify``: is a capture evidence? Prints the verdict and exits by it.

- ``blackbox verify --file FILE.json`` verifies a capture in the JSON form, or the output of
  ``blackbox show ID --json`` (its ``capture``; a view without one says what is missing).
- ``blackbox verify --bundle FILE --trust KEYFILE [--log-key VKEY]`` verifies an evidence bundle
  offline (:mod:`producers.evidence.bundle`): ``INCOMPLETE`` (exit 1) when it has no inclusion proof.
  A pact bundle (``blackbox pact bundle``) is verified the same way (:mod:`consumers.pacts.bundle`):
  ``--trust`` then holds the operator's pact key.
- ``blackbox verify --record FILE --log-key VKEY`` verifies an agent's signed record (the audit API's
  ``GET /v1/agents/ID/record``) offline against the service's key (:mod:`consumers.pacts.attestation`).
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

from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from consumers import terminal
from consumers.app.runtime import open_runtime
from consumers.app.settings import ServiceSettings, load_service_settings
from consumers.pacts.bundle import PACT_BUNDLE_FORMAT
from consumers.verify.verdict import EXIT_CODES_HELP, EXIT_NOT_VERIFIED
from producers.evidence import TrustStore, verify_capture
from producers.evidence.bundle import read_json_object, read_log_key
from schemas.errors import ContractError, VerificationError

__all__ = ["register", "verify_command"]


def _unwrap_show_view(document: dict[str, Any], path: Path) -> dict[str, Any]:
    """The capture inside ``blackbox show --json`` output; an error saying what is missing if none."""
    if "signature" in document or not {"capture", "verification", "contentState"} & set(document):
        return document
    if "bundleFormat" in document:
        raise ContractError(
            "this is an evidence bundle: verify it with --bundle FILE --trust KEYFILE", path=str(path)
        )
    capture = document.get("capture")
    if isinstance(capture, dict) and capture:
        return capture
    state = document.get("contentState") or (document.get("verification") or {}).get("verdict")
    raise ContractError(
        f"this `show --json` output holds no capture (state {state!r}): nothing was readable to verify",
        path=f"{path}:capture",
    )


def _verify_bundle(
    path: Path, trust: Path | None, log_key: str | None, witnesses: list[str], quorum: int | None
) -> None:
    from producers.evidence.bundle import run

    if trust is None:
        raise ContractError(
            "--bundle needs --trust KEYFILE (a trust store TOML or the signer's public key)", path="--trust"
        )
    document = read_json_object(path, what="a bundle")
    if document.get("bundleFormat") == PACT_BUNDLE_FORMAT:
        _verify_pact_bundle(path, document, trust, log_key)
        return
    code = run(
        path,
        trust,
        log_key=log_key,
        witnesses=witnesses,
        witness_quorum=len(witnesses) if quorum is None else quorum,
        out=_Echo(),
    )
    if code:
        raise typer.Exit(code)


def _verify_pact_bundle(path: Path, document: dict[str, Any], trust: Path, log_key: str | None) -> None:
    from consumers.pacts.bundle import PactBundleInvalid, verify_pact_bundle
    from producers.evidence.bundle import load_trust

    name = terminal.clean(str(document.get("version") or path.name))
    try:
        report = verify_pact_bundle(document, load_trust(trust), log_key=read_log_key(log_key))
    except PactBundleInvalid as exc:
        _not_verified(name, exc)
    for line in report.lines():
        terminal.echo(terminal.clean(line))
    if not report.complete:
        raise typer.Exit(EXIT_NOT_VERIFIED)


def _verify_record(path: Path, log_key: str | None, trust: Path | None) -> None:
    from consumers.pacts.attestation import RecordInvalid, verify_agent_record
    from producers.evidence.bundle import load_trust
    from producers.evidence.keys import public_key_from

    envelope = read_json_object(path, what="a signed agent record")
    if log_key is not None:
        key: Any = read_log_key(log_key)
    elif trust is not None and not isinstance(load_trust(trust), TrustStore):
        key = public_key_from(trust.read_bytes().strip())
    else:
        raise ContractError(
            "--record needs --log-key VKEY (`blackbox log key` of the service that signed it) "
            "or --trust PUBLIC_KEY_FILE",
            path="--log-key",
        )
    try:
        value = verify_agent_record(envelope, key)
    except RecordInvalid as exc:
        _not_verified(path.name, exc)
    terminal.echo(
        terminal.clean(
            f"verified: record of {value.get('agent')} since {value.get('since')}, issued "
            f"{value.get('issuedAt')} by {value.get('issuer')}: {value.get('decisions')} decisions, "
            f"score {value.get('score')}"
        )
    )


def _not_verified(name: str, exc: Exception) -> NoReturn:
    """``NOT VERIFIED: <name> part=<part> (<Error>): <reason>`` and exit 1 (every refusal reads alike)."""
    part = getattr(exc, "part", "?")
    reason = str(exc).removeprefix(f"{part}: ")
    terminal.echo(terminal.clean(f"NOT VERIFIED: {name} part={part} ({type(exc).__name__}): {reason}"))
    raise typer.Exit(EXIT_NOT_VERIFIED) from exc


class _Echo:
    def write(self, text: str) -> None:
        if text.strip():  # one line per write, naming parts of a bundle someone sent: data
            for line in text.rstrip("\n").split("\n"):
                terminal.echo(terminal.clean(line))


def _verify_by_id(decision_id: str, settings: ServiceSettings, trust: TrustStore, reason: str) -> None:
    """Verify the stored capture and its index rows, after the access gate logged the read."""
    from consumers.privacy.ids import index_ids
    from consumers.privacy.manifest import gate_manifest
    from consumers.privacy.reveal import erasure_note
    from consumers.storage.store import current_row
    from consumers.verify.stored import stored_verdict
    from producers.privacy.keys import DataKeyStore

    with open_runtime(settings, existing_index=True) as rt:
        index = rt.index
        row = current_row(index, decision_id)
        ids = index_ids(rt.settings)
        subject = (gate_manifest(row["manifest_json"], ids) if row else {}) or {
            "decisionId": decision_id,
            "agentId": (row or {}).get("agent_id", ""),
        }
        rt.gate.authorize(rt.caller(reason), subject, action="verify")
        verdict = stored_verdict(decision_id, index=index, store=rt.blob_store, trust=trust, ids=ids)
        erased = erasure_note(decision_id, DataKeyStore(rt.blob_store))  # the evidence verifies without it
    for line in (verdict.line(), *verdict.notes(), *([erased] if erased else [])):
        terminal.echo(terminal.clean(line))
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
    bundle: Annotated[
        Path | None, typer.Option("--bundle", help="An evidence bundle (blackbox export), verified offline.")
    ] = None,
    trust_file: Annotated[
        Path | None,
        typer.Option("--trust", help="With --bundle: trust store TOML or the signer's public key."),
    ] = None,
    log_key: Annotated[
        str | None, typer.Option("--log-key", help="With --bundle: the log's verifier key (text or file).")
    ] = None,
    witness: Annotated[
        list[str] | None,
        typer.Option(
            "--witness",
            help="With --bundle: a witness's cosignature verifier key (text or file); repeatable.",
        ),
    ] = None,
    witness_quorum: Annotated[
        int | None,
        typer.Option(
            "--witness-quorum",
            help="With --bundle: how many --witness keys must have cosigned (default all).",
        ),
    ] = None,
    signed_record: Annotated[
        Path | None,
        typer.Option(
            "--record",
            help="An agent's signed record (GET /v1/agents/ID/record), verified offline with --log-key.",
        ),
    ] = None,
) -> None:
    """Verify a capture's signature, key, content hashes and working-set root (or a whole evidence
    bundle, a pact bundle, or an agent's signed record)."""
    if sum(x is not None for x in (decision_id, file, bundle, signed_record)) != 1:
        raise ContractError(
            "give one of DECISION_ID, --file FILE.json, --bundle FILE or --record FILE", path="verify"
        )
    if signed_record is not None:
        _verify_record(signed_record, log_key, trust_file)
        return
    if bundle is not None:
        _verify_bundle(bundle, trust_file, log_key, list(witness or []), witness_quorum)
        return
    settings = load_service_settings(trust_store=trust_store)
    trust = TrustStore.load(settings.resolved_trust_store)  # strict: a missing trust store is an error
    if file is None:
        _verify_by_id(str(decision_id), settings, trust, reason)
        return
    capture = _unwrap_show_view(read_json_object(file, what="a capture"), file)
    name = capture.get("decisionId") or decision_id or (str(file) if file else "?")
    try:
        report = verify_capture(capture, trust)
    except VerificationError as exc:
        _not_verified(name, exc)
    terminal.echo(terminal.clean(f"verified: {name} key={report.key_id} ({report.checked_parts} parts)"))
    if report.absent_parts:
        terminal.echo(
            terminal.clean(f"absent content (hash kept, not checked): {', '.join(report.absent_parts)}")
        )


def register(app: typer.Typer) -> None:
    app.command("verify", epilog=EXIT_CODES_HELP)(verify_command)

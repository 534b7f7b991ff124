"""``blackbox access …``: tokens for the audit endpoint, access requests, and the access log's chain.

- ``access token create --caller NAME --scope SCOPE [--subject ID…] [--agent ID…] [--expires 90d]`` prints the token
  once (only its sha256 is kept); ``token list``; ``token revoke TOKEN_ID``.
- ``access requests`` lists the access requests; ``access approve REQ --reason R [--expires 30d]`` turns
  one into a grant that expires; ``access refuse REQ --reason R``. Both are logged first, as the
  configured caller, who must be an operator. With embedded chdb, ``blackbox serve`` holds the index:
  decide over the endpoint then (``POST /v1/access-requests/REQ/approve`` with an operator token).
- ``access log verify`` walks the access log's hash chain; exit 1 when it is broken.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer

from consumers import terminal
from consumers.access.files import parse_duration
from consumers.app.runtime import open_runtime
from consumers.app.settings import load_service_settings

_c = terminal.clean  # every value shown here was written by a caller: data

__all__ = ["register"]

access_app = typer.Typer(
    help="Audit-endpoint tokens, access requests and the access log.", no_args_is_help=True
)
token_app = typer.Typer(
    help="Bearer tokens for `blackbox serve` (shown once, stored hashed).", no_args_is_help=True
)
log_app = typer.Typer(help="The access log.", no_args_is_help=True)
access_app.add_typer(token_app, name="token")
access_app.add_typer(log_app, name="log")

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def _now() -> datetime:
    return datetime.now(UTC)


@token_app.command("create")
def token_create(
    caller: Annotated[
        str, typer.Option("--caller", help="Who the token identifies (recorded in the access log).")
    ],
    scope: Annotated[
        str,
        typer.Option("--scope", help="operator, regulator, counterparty, or sender (OTLP, with --agent)."),
    ],
    subject: Annotated[
        list[str] | None,
        typer.Option(
            "--subject", help="Counterparty: an originUserId it may see (repeatable; default its caller)."
        ),
    ] = None,
    expires: Annotated[
        str | None, typer.Option("--expires", help="Lifetime: 12h, 90d, 2w (default: none).")
    ] = None,
    agent: Annotated[
        list[str] | None,
        typer.Option(
            "--agent",
            help="Sender: an agent id it may send OTLP spans for (repeatable; required for sender).",
        ),
    ] = None,
) -> None:
    """Issue a token; it is printed once and only its sha256 is kept."""
    from consumers.access import tokens_for
    from consumers.access.tokens import parse_token_scope

    settings = load_service_settings()
    now = _now()
    token, record = tokens_for(settings).create(
        caller=caller,
        scope=parse_token_scope(scope),
        now=now,
        subjects=tuple(subject or ()),
        expires_at=None if expires is None else now + parse_duration(expires),
        created_by=settings.caller,
        agents=tuple(agent or ()),
    )
    typer.echo(token)
    until = record.expires_at.isoformat() if record.expires_at else "no expiry"
    terminal.echo(
        f"token {_c(record.token_id)} for {_c(record.caller)} ({_c(record.scope)}), {until}: shown once, keep it",
        err=True,
    )


@token_app.command("list")
def token_list(as_json: JsonOpt = False) -> None:
    """The issued tokens (never the tokens themselves)."""
    from consumers.access import tokens_for

    records = tokens_for(load_service_settings()).list()
    now = _now()
    if as_json:
        terminal.echo_json([{**r.to_json(), "state": r.state(now)} for r in records])
        return
    for r in records:
        subjects = f" subjects={','.join(_c(s) for s in r.subjects)}" if r.subjects else ""
        until = r.expires_at.isoformat() if r.expires_at else "-"
        terminal.echo(
            f"{_c(r.token_id)}  {_c(r.caller):<20} {_c(r.scope):<12} {r.state(now):<8} expires={until}{subjects}"
        )


@token_app.command("revoke")
def token_revoke(token_id: Annotated[str, typer.Argument(help="The token id (`token list`).")]) -> None:
    """Revoke a token; a running `blackbox serve` refuses it from its next request."""
    from consumers.access import tokens_for

    record = tokens_for(load_service_settings()).revoke(token_id, now=_now())
    terminal.echo(f"revoked {_c(record.token_id)} ({_c(record.caller)}, {_c(record.scope)})")


@access_app.command("requests")
def list_requests(as_json: JsonOpt = False) -> None:
    """The access requests and what was decided."""
    from consumers.access.requests import AccessRequests
    from consumers.access.wiring import access_dir, grants_path

    settings = load_service_settings()
    requests = AccessRequests(access_dir(settings) / "requests.json", grants=grants_path(settings)).list()
    if as_json:
        terminal.echo_json([r.to_json() for r in requests])
        return
    for r in requests:  # every field was written by the requester: data, one line each
        what = ",".join(_c(d) for d in r.decisions) or f"agent {_c(r.agent)} {_c(r.since)}..{_c(r.until)}"
        terminal.echo(
            f"{_c(r.request_id)}  {_c(r.status):<8} {_c(r.caller)} ({_c(r.scope)}) {what}  "
            f"[{_c(r.authority)}] {_c(r.purpose)}"
        )


def _decide(request_id: str, *, approve: bool, reason: str, expires: str | None) -> None:
    options = {} if expires is None else {"expires_in": parse_duration(expires)}
    with open_runtime(existing_index=True) as rt:
        decided = rt.access_desk.decide(
            rt.caller(reason), request_id, approve=approve, reason=reason, **options
        )
    if decided.status == "approved":
        terminal.echo(
            f"approved {_c(decided.request_id)}: grant for {_c(decided.caller)} until {_c(decided.grant_expires)}"
        )
    else:
        terminal.echo(f"refused {_c(decided.request_id)}")


@access_app.command("approve")
def approve(
    request_id: Annotated[str, typer.Argument(help="The request id (req_…).")],
    reason: Annotated[str, typer.Option("--reason", help="Why it is granted (logged).")],
    expires: Annotated[
        str, typer.Option("--expires", help="How long the grant lasts: 12h, 30d, 2w.")
    ] = "30d",
) -> None:
    """Approve an access request: it becomes a grant in the grants file, expiring after --expires."""
    _decide(request_id, approve=True, reason=reason, expires=expires)


@access_app.command("refuse")
def refuse(
    request_id: Annotated[str, typer.Argument(help="The request id (req_…).")],
    reason: Annotated[str, typer.Option("--reason", help="Why it is refused (logged).")],
) -> None:
    """Refuse an access request."""
    _decide(request_id, approve=False, reason=reason, expires=None)


@log_app.command("verify")
def log_verify() -> None:
    """Walk the access log's hash chain; exit 1 naming the first row that does not hold."""
    from consumers.access.chain import verify_chain
    from consumers.access.log import read_access_log

    with open_runtime(existing_index=True) as rt:
        rows = read_access_log(rt.index)
    report = verify_chain(rows)
    legacy = f", {report.unchained} written before chaining" if report.unchained else ""
    if not report.intact:
        terminal.echo(f"BROKEN at seq {report.broken_at}: {_c(report.problem)} ({report.rows} rows{legacy})")
        raise typer.Exit(1)
    typer.echo(
        f"intact: {report.chained} chained rows{legacy}; head seq {report.head_seq} {report.head_hash}"
    )


def register(app: typer.Typer) -> None:
    app.add_typer(access_app, name="access")

"""``blackbox keys``: create signing keys and manage the trust store.

- ``keys generate [--dir DIR]`` writes a new ed25519 pair (private key 0600) and trusts its public
  key from now on (``--not-before`` to backdate, e.g. for re-signing old test captures);
- ``keys list`` shows the trust store (windows, revocations, the agents each key may sign for);
- ``keys trust PUBLIC_KEY_FILE`` trusts another runtime's public key;
- ``--agent PATTERN`` (repeatable, on ``generate`` and ``trust``) binds the key to the agent ids
  matching those globs; without it the key may sign for any agent (and re-trusting a bound key
  keeps its binding).
- ``keys revoke KEY_ID`` marks a key compromised (every signature by it is refused from then on).

The trust store is ``settings.resolved_trust_store`` (``BLACKBOX_TRUST_STORE``, default
``<data_dir>/trust.toml``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from consumers import terminal
from consumers.app.settings import load_service_settings
from producers.evidence import TrustStore, generate_keypair, load_signer, public_key_from, public_raw
from producers.evidence.trust import format_time, parse_time
from schemas.errors import ContractError

__all__ = ["register"]


AgentOption = Annotated[
    list[str] | None,
    typer.Option(
        "--agent",
        help="Agent id glob this key may sign for (repeatable, e.g. 'billing-*'). Default: any agent.",
    ),
]


def _agents(patterns: list[str] | None) -> list[str] | None:
    """The ``--agent`` values, or None when none was given (any agent, or the existing binding)."""
    return list(patterns) if patterns else None


def _agents_text(agents: tuple[str, ...] | None) -> str:
    return "any" if agents is None else ",".join(agents)


def _time_option(value: str | None, name: str) -> datetime | None:
    if value is None:
        return None
    try:
        return parse_time(value)
    except ValueError as exc:
        raise ContractError(f"not an ISO-8601 time: {value!r}", path=name) from exc


def generate(
    directory: Annotated[
        Path | None, typer.Option("--dir", help="Where to write the key pair (default <data_dir>/keys).")
    ] = None,
    not_before: Annotated[
        str | None,
        typer.Option("--not-before", help="Trust the key for captures from this time (default now)."),
    ] = None,
    note: Annotated[str, typer.Option("--note", help="A note stored with the key.")] = "",
    agent: AgentOption = None,
) -> None:
    """Write a new signing key pair and add its public key to the trust store."""
    settings = load_service_settings()
    target = directory if directory is not None else settings.data_dir / "keys"
    private_path, public_path = generate_keypair(target)
    signer = load_signer(private_path)
    store_path = settings.resolved_trust_store
    store = TrustStore.load(store_path, missing_ok=True)
    start = _time_option(not_before, "--not-before") or datetime.now(UTC)
    key = store.add(
        signer.public_raw,
        not_before=start,
        note=note or f"generated into {private_path}",
        agents=_agents(agent),
    )
    store.save(store_path)
    terminal.echo(f"key id:      {signer.key_id}")
    terminal.echo(f"private key: {private_path}  (mode 0600; set BLACKBOX_SIGNING_KEY to this path)")
    terminal.echo(f"public key:  {public_path}")
    terminal.echo(f"trusted in:  {store_path} from {format_time(start)}")
    terminal.echo(f"agents:      {_agents_text(key.agents)}")


def list_keys() -> None:
    """Show the keys of the trust store, their windows and the agents they may sign for."""
    store_path = load_service_settings().resolved_trust_store
    store = TrustStore.load(store_path, missing_ok=True)
    if not len(store):
        terminal.echo(f"no keys in {store_path}")
        return
    for key in store:
        window = f"{format_time(key.not_before)} .. {format_time(key.not_after) if key.not_after else 'open'}"
        revoked = f"  REVOKED at {format_time(key.revoked_at)}" if key.revoked_at else ""
        terminal.echo(
            terminal.clean(f"{key.key_id}  {window}{revoked}  agents={_agents_text(key.agents)}  {key.note}")
        )


def trust(
    public_key_file: Annotated[Path, typer.Argument(help="PEM public key file (or base64 of the raw key).")],
    not_before: Annotated[str | None, typer.Option("--not-before", help="Default: now.")] = None,
    not_after: Annotated[str | None, typer.Option("--not-after", help="Default: open-ended.")] = None,
    note: Annotated[str, typer.Option("--note")] = "",
    agent: AgentOption = None,
) -> None:
    """Trust another runtime's public key for captures signed within a window, for some agents."""
    store_path = load_service_settings().resolved_trust_store
    store = TrustStore.load(store_path, missing_ok=True)
    raw = public_raw(public_key_from(public_key_file))
    key = store.add(
        raw,
        not_before=_time_option(not_before, "--not-before") or datetime.now(UTC),
        not_after=_time_option(not_after, "--not-after"),
        note=note,
        agents=_agents(agent),
    )
    store.save(store_path)
    terminal.echo(f"trusted {key.key_id} in {store_path} for agents {_agents_text(key.agents)}")


def revoke(
    key_id: Annotated[str, typer.Argument(help="sha256:<hex> key id.")],
    at: Annotated[str | None, typer.Option("--at", help="Compromise time (default now).")] = None,
) -> None:
    """Mark a key compromised: every signature by it is refused from that time on."""
    store_path = load_service_settings().resolved_trust_store
    store = TrustStore.load(store_path)
    moment = _time_option(at, "--at") or datetime.now(UTC)
    key = store.revoke(key_id, moment)
    store.save(store_path)
    terminal.echo(f"revoked {key.key_id} at {format_time(key.revoked_at or moment)}")


def register(app: typer.Typer) -> None:
    keys_app = typer.Typer(help="Signing keys and the trust store.", no_args_is_help=True)
    keys_app.command("generate")(generate)
    keys_app.command("list")(list_keys)
    keys_app.command("trust")(trust)
    keys_app.command("revoke")(revoke)
    app.add_typer(keys_app, name="keys")

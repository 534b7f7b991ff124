"""Who may send spans, and for which agents.

OTLP/HTTP carries no identity of its own, and the receiver signs what it is sent with the service's
trusted key, so a sender is identified by what it proves, never by what its spans say:

- a bearer token from ``blackbox access token create --scope sender --agent ID…`` (stored hashed,
  :mod:`consumers.access.tokens`) may send for the agent ids it names, from anywhere;
- without a token, a sender on a loopback address may send for any agent (the default: the
  receiver listens on loopback unless ``--allow-remote``); a sender anywhere else is refused (401).

The peer address is the socket's (proxy headers are ignored, :mod:`consumers.web.server`).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from consumers.access.tokens import SENDER, TOKEN_PREFIX

if TYPE_CHECKING:
    from consumers.access.tokens import TokenStore

__all__ = ["Sender", "SenderAuth", "SenderRefused"]


class SenderRefused(Exception):
    """The sender is not admitted; the receiver answers 401."""


@dataclass(frozen=True, slots=True)
class Sender:
    """An admitted sender: ``credential`` names it (``token:<id>`` or ``loopback``); ``agents`` the
    agent ids it may send for (None: any)."""

    credential: str
    agents: tuple[str, ...] | None

    def may_send_for(self, agent_id: str) -> bool:
        return self.agents is None or agent_id in self.agents


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class SenderAuth:
    """Identify senders against ``tokens`` (None: no tokens issued, loopback only)."""

    def __init__(
        self,
        tokens: TokenStore | None,
        *,
        open_loopback: bool = True,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._tokens = tokens
        self._open_loopback = open_loopback
        self._clock = clock

    def identify(self, authorization: str | None, peer: str) -> Sender:
        if authorization:
            scheme, _, credential = authorization.partition(" ")
            credential = credential.strip()
            if scheme.lower() != "bearer" or not credential.startswith(TOKEN_PREFIX) or self._tokens is None:
                raise SenderRefused("the Authorization header is not 'Bearer <sender token>'")
            record, why = self._tokens.resolve(credential, now=self._clock())
            if record is None:
                raise SenderRefused(f"the bearer token is not valid ({why})")
            if record.scope != SENDER:
                raise SenderRefused("the bearer token is not a sender token (--scope sender --agent ID)")
            return Sender(f"token:{record.token_id}", record.agents)
        if self._open_loopback and is_loopback(peer):
            return Sender("loopback", None)
        raise SenderRefused(
            "a sender that is not on loopback needs a bearer token: "
            "blackbox access token create --caller NAME --scope sender --agent AGENT_ID"
        )

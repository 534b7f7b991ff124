"""Where ``blackbox otlp`` listens: ``HOST:PORT``, loopback unless the operator says otherwise.

The receiver signs what it is sent with the service's key, and OTLP/HTTP carries no identity, so
a non-loopback address is refused without ``--allow-remote`` (put an authenticating proxy or a
collector in front of it).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from schemas.errors import BlackboxError

__all__ = ["DEFAULT_LISTEN", "ListenAddress", "ListenRefused", "parse_listen"]

DEFAULT_LISTEN = "127.0.0.1:4318"


class ListenRefused(BlackboxError):
    """``--listen`` is malformed, or not loopback without ``--allow-remote``."""


@dataclass(frozen=True, slots=True)
class ListenAddress:
    host: str
    port: int

    @property
    def loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_listen(text: str, *, allow_remote: bool = False) -> ListenAddress:
    """``HOST:PORT`` or ``[IPv6]:PORT`` (port 0 picks a free one)."""
    host, sep, port = text.strip().rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ListenRefused(
            f"--listen wants HOST:PORT (e.g. {DEFAULT_LISTEN}) with a port 0-65535, got {text!r}"
        )
    address = ListenAddress(host, int(port))
    if not address.loopback and not allow_remote:
        raise ListenRefused(
            f"--listen {address} is not a loopback address: the receiver signs whatever it is sent and "
            "OTLP/HTTP carries no identity; pass --allow-remote to listen there anyway"
        )
    return address

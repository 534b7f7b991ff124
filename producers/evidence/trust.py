"""The trust store: which public keys may sign captures, and when (DESIGN decision 4).

A TOML file with one ``[[keys]]`` table per key::

    [[keys]]
    key_id = "sha256:3b1f..."            # sha256 of the raw public key; checked on load
    public_key = "base64 of the raw 32-byte ed25519 public key"
    not_before = 2026-07-01T00:00:00Z    # first capture time this key may sign
    not_after = 2026-10-01T00:00:00Z     # optional: captures at or after this are refused (rotation)
    revoked_at = 2026-08-15T09:30:00Z    # optional: compromise, see below
    agents = ["billing-*", "support-agent"]  # optional: the agent ids this key may sign for
    note = "rt_eu1_7 runtime key"

Two clocks, deliberately different:

- **Validity window — checked at the signing time**, i.e. the capture's ``capturedAt``:
  ``not_before <= capturedAt < not_after``. Rotation retires a key by setting ``not_after``; every
  capture it signed while it was current keeps verifying forever.
- **Revocation — checked at the verification time** (``now``, injectable): a key whose
  ``revoked_at`` is at or before ``now`` (or at or before the signing time) is refused for *every*
  signature, whatever ``capturedAt`` it claims. Revocation means compromise, and whoever holds a
  stolen key can write any ``capturedAt`` inside the window, so a claimed time earlier than the
  revocation proves nothing. This is the conservative choice: captures legitimately signed before
  the compromise stop verifying too; to keep them, re-attest them with a trusted key (or verify
  with an explicit earlier ``now`` and say so). Retire keys that are *not* compromised with
  ``not_after``, never with ``revoked_at``.

**Agents — checked against the signed ``agentId``** (of a capture or a flag event): ``agents`` is a
list of shell-style globs (:func:`fnmatch.fnmatchcase`: ``*``, ``?``, ``[...]``, case-sensitive,
matching the whole id). A key whose record has a list may sign only for the agents it matches, so a
runtime's key cannot write evidence under another agent's id (and take its decision ids). A record
*without* ``agents`` may sign for any agent: trust stores written before this field keep working
unchanged; bind every key with ``blackbox keys trust --agent`` (or ``generate --agent``). An empty
list is refused on load rather than read as "no agent" or "any agent".

Naive datetimes (no offset) are taken as UTC.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from producers.evidence.dsse import b64decode, b64encode
from producers.evidence.keys import key_id as compute_key_id
from schemas.errors import ContractError, KeyNotAuthorizedForAgent, KeyNotTrusted

_HEADER = """\
# blackbox trust store: ed25519 public keys allowed to sign captures.
# not_before <= capturedAt < not_after is the key's validity window (checked at the signing time);
# revoked_at marks a compromise: from then on every signature by the key is refused.
# agents (optional) lists the agent ids the key may sign for, as globs; without it, any agent.
"""


def as_utc(moment: datetime) -> datetime:
    """``moment`` as an aware UTC datetime (naive means UTC)."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def parse_time(value: object) -> datetime:
    """An aware UTC datetime from a datetime, a date, or an ISO-8601 string; ``ValueError`` otherwise."""
    if isinstance(value, datetime):
        return as_utc(value)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    if isinstance(value, str):
        return as_utc(datetime.fromisoformat(value))
    raise ValueError(f"expected a time, got {type(value).__name__}")


def format_time(moment: datetime) -> str:
    """RFC 3339 UTC with a ``Z``, as written to the trust store and shown in messages."""
    return as_utc(moment).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class TrustedKey:
    """One key of the trust store."""

    key_id: str
    public_key: bytes  # raw 32 bytes
    not_before: datetime
    not_after: datetime | None = None
    revoked_at: datetime | None = None
    note: str = ""
    agents: tuple[str, ...] | None = None  # glob patterns; None: any agent (see the module doc)

    def allows(self, agent_id: str) -> bool:
        """Whether this key may sign for ``agent_id``."""
        if self.agents is None:
            return True
        return any(fnmatchcase(agent_id, pattern) for pattern in self.agents)


def agent_patterns(patterns: Iterable[object], where: str) -> tuple[str, ...]:
    """A validated, non-empty tuple of agent globs; :class:`ContractError` at ``where`` otherwise."""
    out: list[str] = []
    for pattern in patterns:
        if not isinstance(pattern, str):
            raise ContractError("agents must be an array of strings", path=where)
        if not pattern:
            raise ContractError("an empty pattern matches no agent id; remove it", path=where)
        out.append(pattern)
    if not out:
        raise ContractError(
            "agents is empty, so the key could sign for no agent; omit agents to allow any agent",
            path=where,
        )
    return tuple(out)


class TrustStore:
    """Public keys with validity windows and revocations; :meth:`check` is the only gate."""

    def __init__(self, keys: tuple[TrustedKey, ...] | list[TrustedKey] = ()) -> None:
        self._keys: dict[str, TrustedKey] = {}
        self._public: dict[str, Ed25519PublicKey] = {}
        for key in keys:
            self._put(key)

    # --- file ------------------------------------------------------------------------------------
    @classmethod
    def load(cls, path: Path | str, *, missing_ok: bool = False) -> TrustStore:
        """Read a trust store file; a missing file is an empty store only with ``missing_ok``."""
        path = Path(path)
        try:
            with path.open("rb") as handle:
                document = tomllib.load(handle)
        except FileNotFoundError as exc:
            if missing_ok:
                return cls()
            raise ContractError(
                f"no trust store at {path} (create one with `blackbox keys generate`)", path=str(path)
            ) from exc
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ContractError(f"cannot read the trust store: {exc}", path=str(path)) from exc
        entries = document.get("keys", [])
        if not isinstance(entries, list):
            raise ContractError("`keys` must be an array of tables", path=f"{path}:keys")
        return cls([_key_from_toml(entry, f"{path}:keys[{index}]") for index, entry in enumerate(entries)])

    def save(self, path: Path | str) -> None:
        """Write the store atomically (temporary file, fsync, rename)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        chunks = [_HEADER]
        for key in self._keys.values():
            chunks.append("\n[[keys]]\n")
            chunks.append(f"key_id = {_toml_string(key.key_id)}\n")
            chunks.append(f"public_key = {_toml_string(b64encode(key.public_key))}\n")
            chunks.append(f"not_before = {format_time(key.not_before)}\n")
            if key.not_after is not None:
                chunks.append(f"not_after = {format_time(key.not_after)}\n")
            if key.revoked_at is not None:
                chunks.append(f"revoked_at = {format_time(key.revoked_at)}\n")
            if key.agents is not None:
                chunks.append(f"agents = [{', '.join(_toml_string(a) for a in key.agents)}]\n")
            chunks.append(f"note = {_toml_string(key.note)}\n")
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with temporary.open("w", encoding="utf-8") as handle:
            handle.write("".join(chunks))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)

    # --- edits -----------------------------------------------------------------------------------
    def add(
        self,
        public_raw: bytes,
        *,
        not_before: datetime,
        not_after: datetime | None = None,
        note: str = "",
        agents: Iterable[str] | None = None,
    ) -> TrustedKey:
        """Trust ``public_raw`` for captures signed in ``[not_before, not_after)`` for ``agents``.

        Adding a key that is already present replaces its window and note; a revocation is kept
        (it is never undone by ``add``), and so is its agent list unless ``agents`` is given (``add``
        never widens a bound key silently; pass ``["*"]`` to allow any agent).
        """
        identifier = compute_key_id(public_raw)
        start = as_utc(not_before)
        end = None if not_after is None else as_utc(not_after)
        if end is not None and end <= start:
            raise ContractError("not_after must be later than not_before", path="not_after")
        previous = self._keys.get(identifier)
        if agents is not None:
            bound: tuple[str, ...] | None = agent_patterns(agents, "agents")
        else:
            bound = None if previous is None else previous.agents
        key = TrustedKey(
            key_id=identifier,
            public_key=bytes(public_raw),
            not_before=start,
            not_after=end,
            revoked_at=None if previous is None else previous.revoked_at,
            note=note,
            agents=bound,
        )
        self._put(key)
        return key

    def revoke(self, key_id: str, at: datetime) -> TrustedKey:
        """Mark ``key_id`` compromised from ``at`` on (an earlier existing revocation wins)."""
        key = self._keys.get(key_id)
        if key is None:
            raise KeyNotTrusted(f"key {key_id} is not in the trust store", part="key")
        moment = as_utc(at)
        if key.revoked_at is not None and key.revoked_at <= moment:
            return key
        revoked = replace(key, revoked_at=moment)
        self._keys[key_id] = revoked
        return revoked

    # --- the gate --------------------------------------------------------------------------------
    def check(self, key_id: str, at: datetime, *, now: datetime | None = None) -> Ed25519PublicKey:
        """The public key for ``key_id`` if it may have signed at ``at``, checked at ``now``.

        ``at`` is the signing time (a capture's ``capturedAt``), checked against the window;
        ``now`` (default: the current time) is when the check happens, checked against revocation.
        Raises :class:`KeyNotTrusted` (``part="key"``) saying why.
        """
        key = self._keys.get(key_id)
        if key is None:
            raise KeyNotTrusted(f"key {key_id} is unknown to the trust store", part="key")
        signed_at = as_utc(at)
        checked_at = datetime.now(UTC) if now is None else as_utc(now)
        if key.revoked_at is not None and (key.revoked_at <= checked_at or key.revoked_at <= signed_at):
            raise KeyNotTrusted(
                f"key {key_id} was revoked at {format_time(key.revoked_at)}: every signature by it is "
                f"refused from then on, whatever signing time it claims (signed at {format_time(signed_at)})",
                part="key",
            )
        if signed_at < key.not_before:
            raise KeyNotTrusted(
                f"key {key_id} is not yet valid at the signing time {format_time(signed_at)} "
                f"(valid from {format_time(key.not_before)})",
                part="key",
            )
        if key.not_after is not None and signed_at >= key.not_after:
            raise KeyNotTrusted(
                f"key {key_id} had expired at the signing time {format_time(signed_at)} "
                f"(valid until {format_time(key.not_after)})",
                part="key",
            )
        return self._public[key_id]

    def check_agent(self, key_id: str, agent_id: str) -> None:
        """Raise :class:`KeyNotAuthorizedForAgent` unless ``key_id`` may sign for ``agent_id``.

        Call it after the signature verified, with the ``agentId`` the key signed, so a changed
        ``agentId`` is reported as tampering (the signature) rather than as a binding problem.
        """
        key = self._keys.get(key_id)
        if key is None:
            raise KeyNotTrusted(f"key {key_id} is unknown to the trust store", part="key")
        if not key.allows(agent_id):
            allowed = ", ".join(key.agents or ())
            raise KeyNotAuthorizedForAgent(
                f"key {key_id} may not sign for agent {agent_id!r} (its trust record allows: {allowed})",
                key_id=key_id,
                agent_id=agent_id,
            )

    # --- reading ---------------------------------------------------------------------------------
    def get(self, key_id: str) -> TrustedKey | None:
        return self._keys.get(key_id)

    def __contains__(self, key_id: object) -> bool:
        return key_id in self._keys

    def __iter__(self) -> Iterator[TrustedKey]:
        return iter(tuple(self._keys.values()))

    def __len__(self) -> int:
        return len(self._keys)

    def _put(self, key: TrustedKey) -> None:
        self._keys[key.key_id] = key
        self._public[key.key_id] = Ed25519PublicKey.from_public_bytes(key.public_key)


def _key_from_toml(entry: Any, where: str) -> TrustedKey:
    if not isinstance(entry, dict):
        raise ContractError("each key must be a table", path=where)
    try:
        public = b64decode(entry["public_key"])
    except KeyError as exc:
        raise ContractError("missing public_key", path=where) from exc
    except ValueError as exc:
        raise ContractError(f"public_key: {exc}", path=f"{where}.public_key") from exc
    if len(public) != 32:
        raise ContractError(f"public_key must be 32 raw bytes, got {len(public)}", path=f"{where}.public_key")
    identifier = compute_key_id(public)
    if entry.get("key_id", identifier) != identifier:
        raise ContractError(
            f"key_id {entry.get('key_id')} does not match the public key ({identifier})",
            path=f"{where}.key_id",
        )
    if entry.get("not_before") is None:
        raise ContractError("missing not_before", path=where)
    not_before = _entry_time(entry, "not_before", where)
    note = entry.get("note", "")
    if not isinstance(note, str):
        raise ContractError("note must be a string", path=f"{where}.note")
    agents = entry.get("agents")
    if agents is not None and not isinstance(agents, list):
        raise ContractError("agents must be an array of strings", path=f"{where}.agents")
    return TrustedKey(
        key_id=identifier,
        public_key=public,
        not_before=not_before,
        not_after=None if entry.get("not_after") is None else _entry_time(entry, "not_after", where),
        revoked_at=None if entry.get("revoked_at") is None else _entry_time(entry, "revoked_at", where),
        note=note,
        agents=None if agents is None else agent_patterns(agents, f"{where}.agents"),
    )


def _entry_time(entry: dict[str, Any], name: str, where: str) -> datetime:
    try:
        return parse_time(entry[name])
    except ValueError as exc:
        raise ContractError(f"{exc}", path=f"{where}.{name}") from exc


def _toml_string(text: str) -> str:
    """A TOML basic string (escapes quote, backslash and every control character)."""
    out = ['"']
    for char in text:
        code = ord(char)
        if char == '"':
            out.append('\\"')
        elif char == "\\":
            out.append("\\\\")
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04X}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)

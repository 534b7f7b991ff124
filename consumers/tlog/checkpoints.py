"""Signed checkpoints: the log's key, publishing, and the checkpoint history.

Under the log's prefix ``P``:

- ``P/checkpoint`` — the latest checkpoint, a C2SP signed note (the tlog-tiles endpoint);
- ``P/checkpoints/<size, 20 digits>`` — every checkpoint ever published, never overwritten with
  another root (the first checkpoint that includes a leaf is what the capturedAt skew check reads);
- ``P/checkpoints/<size>.tsr`` — its RFC 3161 timestamp (``TimeStampResp`` DER), when a TSA is set.

Only the log's writer publishes, while it holds the log (:meth:`consumers.tlog.writer.LogWriter.publish`):
history (written once), timestamp, then latest (compare-and-swap, never rolled back). A crash leaves at
worst a history entry the next publication repeats. A checkpoint is only ever published for a size the
log's state holds, whose tiles are written.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from producers.blobstore import BlobStore
from producers.evidence.keys import load_signer, public_raw
from producers.evidence.tlog import Checkpoint, LogKey, format_checkpoint, log_key, open_checkpoint, sign_note
from schemas.errors import BlobNotFound, ContractError, ProofInvalid, TransparencyLogError

logger = logging.getLogger(__name__)

__all__ = ["LogSigner", "Published", "checkpoint_key", "history", "latest", "load_log_signer"]


def checkpoint_key(prefix: str) -> str:
    return f"{prefix}/checkpoint"


def history_key(prefix: str, size: int) -> str:
    return f"{prefix}/checkpoints/{size:020d}"


def timestamp_key(prefix: str, size: int) -> str:
    return history_key(prefix, size) + ".tsr"


@dataclass(frozen=True, slots=True)
class LogSigner:
    """The log's identity: its origin (also the note key name) and ed25519 private key."""

    origin: str
    private_key: Ed25519PrivateKey

    @property
    def key(self) -> LogKey:
        return log_key(self.private_key.public_key(), name=self.origin)

    @property
    def vkey(self) -> str:
        return self.key.vkey

    def sign(self, size: int, root: bytes) -> str:
        return sign_note(
            format_checkpoint(self.origin, size, root), name=self.origin, private_key=self.private_key
        )


def load_log_signer(path: Path, origin: str, *, create: bool = True) -> LogSigner:
    """The log key in ``path`` (PEM or base64 seed, like a signing key); with ``create``, a missing
    file is generated (PKCS#8 PEM, mode 0600) so an embedded setup has a log from the first capture."""
    if not path.exists() and create:
        path.parent.mkdir(parents=True, exist_ok=True)
        pem = Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass  # another process created it first: use theirs
        else:
            with os.fdopen(fd, "wb") as handle:
                handle.write(pem)
            logger.warning(
                "created the transparency log key %s: back it up, its public key verifies the log", path
            )
    try:
        signer = load_signer(path)
        log_key(signer.public_key, name=origin)  # checks the origin is a valid key name
    except ContractError as exc:
        raise TransparencyLogError(f"the log key (BLACKBOX_TLOG_KEY={path}): {exc}") from exc
    return LogSigner(origin, Ed25519PrivateKey.from_private_bytes(signer.seed()))


@dataclass(frozen=True, slots=True)
class Published:
    """One checkpoint of the history: its size, the signed note, when it was stored, its timestamp."""

    size: int
    note: str
    stored_at: datetime
    timestamp: bytes | None = None


def latest(store: BlobStore, prefix: str, key: LogKey | None = None) -> tuple[str, Checkpoint] | None:
    """The latest checkpoint note and its parsed form (signature checked when ``key`` is given)."""
    try:
        note = store.get(checkpoint_key(prefix)).decode("utf-8")
    except BlobNotFound:
        return None
    except UnicodeDecodeError as exc:
        raise TransparencyLogError(f"{checkpoint_key(prefix)} is not UTF-8 text") from exc
    return note, _parse(note, key)


def _parse(note: str, key: LogKey | None) -> Checkpoint:
    if key is not None:
        return open_checkpoint(note, key)
    text = note[: note.rfind("\n\n") + 1] if "\n\n" in note else note
    try:
        return Checkpoint.parse(text)
    except ProofInvalid as exc:
        raise TransparencyLogError(f"the stored checkpoint is malformed: {exc}") from exc


def history(store: BlobStore, prefix: str) -> Iterator[Published]:
    """Every published checkpoint, smallest size first."""
    base = f"{prefix}/checkpoints/"
    infos = {info.key: info for info in store.list_info(base)}
    for key in sorted(k for k in infos if not k.endswith(".tsr")):
        name = key[len(base) :]
        if not name.isdigit():
            continue
        tsr_key = key + ".tsr"
        yield Published(
            int(name),
            store.get(key).decode("utf-8", "replace"),
            infos[key].modified,
            store.get(tsr_key) if tsr_key in infos else None,
        )


def public_key_raw(signer: LogSigner) -> bytes:
    return public_raw(signer.private_key.public_key())

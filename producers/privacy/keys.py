"""Data keys and the key-encryption key that wraps them (envelope encryption, crypto-shredding).

Each decision whose content was redacted gets a fresh 256-bit *data key*; the original parts are
sealed with it (:mod:`producers.privacy.envelope`) and the ciphertext travels inside the capture,
to every copy of it (topic, segments, backups). The data key itself never does: it is *wrapped* by a
key-encryption key (:class:`KeyEncryptionKey`: a local key file by default, a KMS in production)
and the wrapped key is stored as one small *key record* per decision in the blob store
(``datakeys/<decision id>.json``; :class:`DataKeyStore`). Destroying that record (``blackbox
erase``) makes every copy of the original unreadable at once, while the redacted capture, its
manifest and its signature stay and still verify. The record is replaced by a tombstone saying when
and why, so ``show`` can say "original erased on DATE (reason)".

Keep the ``datakeys/`` prefix out of Object Lock default retention and backups that outlive an
erasure: an old version of a key record is a copy of the key. On a versioned bucket, writing a
tombstone deletes every earlier version of the record first (:meth:`DataKeyStore.put`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from producers.owner_only import private_dirs
from producers.privacy.envelope import SealedOriginalInvalid, open_ids, seal_ids
from schemas.errors import BlackboxError, BlobNotFound

if TYPE_CHECKING:
    from producers.blobstore import BlobStore

__all__ = [
    "DATA_KEY_PREFIX",
    "DataKeyRecord",
    "DataKeyStore",
    "KeyEncryptionKey",
    "KeyUnavailable",
    "LocalKeyFile",
    "Vault",
    "new_data_key",
]

DATA_KEY_PREFIX = "datakeys/"
_NONCE = 12


class KeyUnavailable(BlackboxError):
    """A data key cannot be had: never stored, erased, or the key-encryption key cannot unwrap it."""


class KeyEncryptionKey(Protocol):
    """Wraps and unwraps data keys; a KMS implements the same three members.

    ``context`` (the decision id) is bound to the wrapped key, so a wrapped key moved to another
    decision's record does not unwrap.
    """

    @property
    def key_id(self) -> str: ...

    def wrap(self, data_key: bytes, *, context: bytes) -> bytes: ...

    def unwrap(self, wrapped: bytes, *, context: bytes) -> bytes: ...


class LocalKeyFile:
    """A 256-bit AES-GCM key in a file (mode 0600), created on first use.

    Wrapping is AES-256-GCM with a random nonce, the context as associated data. Everyone who reads
    originals (the producer that seals them, the operator who reveals them) needs the same file.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._key: bytes | None = None

    @property
    def key_id(self) -> str:
        return "local:" + hashlib.sha256(self._load()).hexdigest()[:16]

    def wrap(self, data_key: bytes, *, context: bytes) -> bytes:
        nonce = os.urandom(_NONCE)
        return nonce + AESGCM(self._load()).encrypt(nonce, data_key, context)

    def unwrap(self, wrapped: bytes, *, context: bytes) -> bytes:
        try:
            return AESGCM(self._load()).decrypt(wrapped[:_NONCE], wrapped[_NONCE:], context)
        except InvalidTag as exc:
            raise KeyUnavailable(
                f"the key-encryption key {self.key_id} ({self.path}) does not unwrap this data key"
            ) from exc

    def _load(self) -> bytes:
        if self._key is None:
            self._key = _read_or_create(self.path)
        return self._key


def read_or_create_key_file(path: Path) -> bytes:
    """The bytes of the key file at ``path``, created first (32 random bytes, mode 0600, fsync'd) when it
    does not exist; raises ``OSError``. Shared by the key-encryption key and the index id key."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        private_dirs(path.parent)
        key = AESGCM.generate_key(bit_length=256)
        try:  # O_EXCL: two processes creating it at once keep the first one's key
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return path.read_bytes()
        with os.fdopen(fd, "wb") as handle:
            handle.write(key)
            handle.flush()
            os.fsync(handle.fileno())
        return key


def _read_or_create(path: Path) -> bytes:
    try:
        key = read_or_create_key_file(path)
    except OSError as exc:
        raise KeyUnavailable(f"cannot read the key-encryption key {path}: {exc}") from exc
    if len(key) != 32:
        raise KeyUnavailable(f"{path} is not a 256-bit key ({len(key)} bytes)")
    return key


def new_data_key() -> bytes:
    return AESGCM.generate_key(bit_length=256)


@dataclass(frozen=True, slots=True, kw_only=True)
class DataKeyRecord:
    """One decision's key record: the wrapped data key, or the tombstone left by its erasure."""

    decision_id: str
    kek_id: str = ""
    wrapped: bytes | None = None
    erased_at: str | None = None
    erase_reason: str = ""
    sealed_ids: bytes | None = None
    """The salt and the raw identifiers of people, sealed under the data key
    (:func:`producers.privacy.envelope.seal_ids`); gone with the key at erasure."""

    @property
    def erased(self) -> bool:
        return self.wrapped is None

    def to_bytes(self) -> bytes:
        value: dict[str, Any] = {"decisionId": self.decision_id}
        if self.wrapped is not None:
            value |= {"kekId": self.kek_id, "wrapped": base64.b64encode(self.wrapped).decode("ascii")}
            if self.sealed_ids is not None:
                value["sealedIds"] = base64.b64encode(self.sealed_ids).decode("ascii")
        else:
            value |= {"erasedAt": self.erased_at, "reason": self.erase_reason}
        return json.dumps(value, ensure_ascii=False, sort_keys=True).encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes) -> DataKeyRecord:
        value = json.loads(data)
        wrapped = value.get("wrapped")
        sealed_ids = value.get("sealedIds") if wrapped is not None else None
        return cls(
            decision_id=str(value["decisionId"]),
            kek_id=str(value.get("kekId") or ""),
            wrapped=None if wrapped is None else base64.b64decode(wrapped),
            sealed_ids=None if sealed_ids is None else base64.b64decode(sealed_ids),
            erased_at=value.get("erasedAt"),
            erase_reason=str(value.get("reason") or ""),
        )


class DataKeyStore:
    """Key records in a blob store under ``datakeys/`` (the claim-check store the producer has)."""

    def __init__(self, blobs: BlobStore) -> None:
        self.blobs = blobs

    @staticmethod
    def key(decision_id: str) -> str:
        # a digest of the id: any decision id, of any length, makes one safe, flat blob key
        return f"{DATA_KEY_PREFIX}{hashlib.sha256(decision_id.encode('utf-8')).hexdigest()}.json"

    def put(self, record: DataKeyRecord) -> None:
        """Store ``record``. A tombstone on a versioned store (S3 Object Lock) first deletes every version
        of the record: an older version would still hold the wrapped key, and the erasure would not be one."""
        key = self.key(record.decision_id)
        if record.erased and self.blobs.versioned:
            self.blobs.delete(key)  # every version; a crash before the put leaves no key either
        self.blobs.put(key, record.to_bytes())

    def get(self, decision_id: str) -> DataKeyRecord | None:
        try:
            data = self.blobs.get(self.key(decision_id))
        except BlobNotFound:
            return None
        try:
            return DataKeyRecord.from_bytes(data)
        except (ValueError, KeyError, TypeError) as exc:
            raise KeyUnavailable(f"the key record of {decision_id} is unreadable: {exc}") from exc

    def shred(self, decision_id: str, *, at: datetime, reason: str) -> bool:
        """Replace the wrapped key by a tombstone; True if a key was destroyed (False: none, or erased)."""
        record = self.get(decision_id)
        if record is None or record.erased:
            return False
        stamp = at.isoformat(timespec="seconds").replace("+00:00", "Z")
        self.put(DataKeyRecord(decision_id=decision_id, erased_at=stamp, erase_reason=reason))
        return True

    def records(self) -> list[DataKeyRecord]:
        """Every key record (wrapped or erased)."""
        found = []
        for key in self.blobs.list(DATA_KEY_PREFIX):
            try:
                found.append(DataKeyRecord.from_bytes(self.blobs.get(key)))
            except BlobNotFound:  # erased and replaced between the listing and the read
                continue
            except (ValueError, KeyError, TypeError) as exc:
                raise KeyUnavailable(f"the key record {key} is unreadable: {exc}") from exc
        return found

    def rewrap(self, old: KeyEncryptionKey, new: KeyEncryptionKey) -> int:
        """Re-wrap every live data key from ``old`` to ``new`` (key rotation); segments are untouched.

        Returns how many records were re-wrapped; records already under ``new`` are skipped.
        """
        done = 0
        for record in self.records():
            if record.wrapped is None or record.kek_id == new.key_id:
                continue
            decision_id = record.decision_id
            context = decision_id.encode("utf-8")
            data_key = old.unwrap(record.wrapped, context=context)
            self.put(
                DataKeyRecord(
                    decision_id=decision_id,
                    kek_id=new.key_id,
                    wrapped=new.wrap(data_key, context=context),
                    sealed_ids=record.sealed_ids,
                )
            )
            done += 1
        return done


@dataclass(frozen=True, slots=True)
class Vault:
    """The key-encryption key and the key records: issue a data key (producer), get it back (reader)."""

    kek: KeyEncryptionKey
    keys: DataKeyStore

    def issue(
        self, decision_id: str, *, ids: Mapping[str, str] | None = None, salt: bytes | None = None
    ) -> bytes:
        """A new data key for ``decision_id``, its wrapped form stored before it is used; with ``ids``,
        the raw identifiers of people and their ``salt`` are sealed under it in the same record."""
        data_key = new_data_key()
        wrapped = self.kek.wrap(data_key, context=decision_id.encode("utf-8"))
        sealed = None
        if ids:
            if salt is None:
                raise ValueError("sealing identifiers needs the decision's salt")
            sealed = seal_ids(ids, salt=salt, data_key=data_key, decision_id=decision_id)
        self.keys.put(
            DataKeyRecord(decision_id=decision_id, kek_id=self.kek.key_id, wrapped=wrapped, sealed_ids=sealed)
        )
        return data_key

    def data_key(self, decision_id: str) -> bytes:
        """The decision's data key; :class:`KeyUnavailable` saying why when there is none."""
        return self._open(decision_id)[1]

    def identifiers(self, decision_id: str) -> tuple[bytes, dict[str, str]] | None:
        """(salt, raw identifiers by path) sealed in the decision's key record; None when it has none.

        :class:`KeyUnavailable` when there is no key (never stored, erased, not unwrapped)."""
        record, data_key = self._open(decision_id)
        if record.sealed_ids is None:
            return None
        try:
            return open_ids(record.sealed_ids, data_key=data_key, decision_id=decision_id)
        except SealedOriginalInvalid as exc:
            raise KeyUnavailable(str(exc)) from exc

    def _open(self, decision_id: str) -> tuple[DataKeyRecord, bytes]:
        record = self.keys.get(decision_id)
        if record is None:
            raise KeyUnavailable(f"no data key was stored for {decision_id}: its original cannot be read")
        if record.wrapped is None:
            raise KeyUnavailable(f"original erased on {record.erased_at} ({record.erase_reason})")
        return record, self.kek.unwrap(record.wrapped, context=decision_id.encode("utf-8"))

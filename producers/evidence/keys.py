"""ed25519 signing keys: the :class:`Signer`, key files, and key ids.

- key id = ``"sha256:" + hex(sha256(raw 32-byte public key))`` (DESIGN decision 4).
- ``publicKeyRef`` = the key id, optionally prefixed by a DID or name and ``#``
  (``did:armalo:agent:agt_1#sha256:ab..``); only the part after the last ``#`` identifies the key.
- Private key files are PKCS#8 PEM, unencrypted, mode 0600; public key files are SubjectPublicKeyInfo
  PEM. :func:`load_signer` also reads a file holding the base64 of the raw 32-byte seed (the form of
  ``BLACKBOX_SIGNING_KEY_B64``, and of the committed test key).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
from pathlib import Path
from typing import Any, Protocol

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from producers import native
from schemas.errors import ContractError

_KEY_ID = re.compile(r"sha256:[0-9a-f]{64}")


class _Secret(Protocol):
    def get_secret_value(self) -> str: ...


def key_id(public_raw: bytes) -> str:
    """``"sha256:" + hex(sha256(public_raw))`` for a raw 32-byte ed25519 public key."""
    if len(public_raw) != 32:
        raise ContractError(f"an ed25519 public key is 32 raw bytes, got {len(public_raw)}")
    return "sha256:" + hashlib.sha256(public_raw).hexdigest()


def key_id_from_ref(public_key_ref: object) -> str | None:
    """The key id named by a ``publicKeyRef`` (the part after the last ``#``), or None if it names none."""
    if not isinstance(public_key_ref, str):
        return None
    candidate = public_key_ref.rsplit("#", 1)[-1]
    return candidate if _KEY_ID.fullmatch(candidate) else None


def public_raw(public_key: Ed25519PublicKey) -> bytes:
    """The raw 32 bytes of an ed25519 public key."""
    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


class Signer:
    """Signs with one ed25519 private key; knows its key id and the ``publicKeyRef`` it writes."""

    __slots__ = ("_native", "_private", "key_id", "public_key", "public_key_ref", "public_raw")

    def __init__(self, private_key: Ed25519PrivateKey, *, name: str | None = None) -> None:
        if not isinstance(private_key, Ed25519PrivateKey):
            raise ContractError(f"blackbox signs with ed25519 keys, got {type(private_key).__name__}")
        if name is not None and "#" in name:
            raise ContractError("a key name must not contain '#'", path="name")
        self._private = private_key
        self.public_key: Ed25519PublicKey = private_key.public_key()
        self.public_raw: bytes = public_raw(self.public_key)
        self.key_id: str = key_id(self.public_raw)
        self.public_key_ref: str = f"{name}#{self.key_id}" if name else self.key_id
        self._native: tuple[Any, Any] | None = None  # (core, its copy of the key), made on first use

    @classmethod
    def from_seed(cls, seed: bytes, *, name: str | None = None) -> Signer:
        """From the raw 32-byte ed25519 seed (RFC 8032 private key)."""
        if len(seed) != 32:
            raise ContractError(f"an ed25519 seed is 32 raw bytes, got {len(seed)}")
        return cls(Ed25519PrivateKey.from_private_bytes(seed), name=name)

    def sign(self, data: bytes) -> bytes:
        """The 64-byte ed25519 signature of ``data`` (by the native core with the GIL released when
        it is loaded: the same bytes, ed25519 being deterministic; else by ``cryptography``)."""
        core = native.core()
        if core is not None and type(data) is bytes:
            made = self._native
            if made is None or made[0] is not core:  # first use, or native.reset() swapped the core
                made = self._native = (core, _native_key(core, self._private, self.public_raw))
            if made[1] is not None:
                signature: bytes = made[1].sign(data)
                return signature
        return self._private.sign(data)

    def seed(self) -> bytes:
        """The raw 32-byte seed (for exporting to ``BLACKBOX_SIGNING_KEY_B64``)."""
        return self._private.private_bytes(
            serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
        )

    def __repr__(self) -> str:  # never the private key
        return f"Signer(key_id={self.key_id!r}, public_key_ref={self.public_key_ref!r})"


_PROBE = b"blackbox native signing probe"


def _native_key(core: Any, private_key: Ed25519PrivateKey, public: bytes) -> Any:
    """``core``'s copy of the key (src/sign.rs), or None when it disagrees with ``cryptography`` on
    the public key or on a probe signature (then ``cryptography`` signs, as without the core)."""
    seed = private_key.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    key = core.SigningKey(seed)
    if key.public_raw() != public or key.sign(_PROBE) != private_key.sign(_PROBE):
        return None
    return key


def generate_keypair(directory: Path | str, *, stem: str = "blackbox") -> tuple[Path, Path]:
    """Write a new key pair to ``directory``; returns ``(private_path, public_path)``.

    Files are ``<stem>-<first 16 hex of the key id>.key`` (PKCS#8 PEM, mode 0600, never
    overwritten) and ``.pub`` (SubjectPublicKeyInfo PEM). The directory is created 0700 if missing.
    """
    directory = Path(directory)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    private_key = Ed25519PrivateKey.generate()
    signer = Signer(private_key)
    base = f"{stem}-{signer.key_id.removeprefix('sha256:')[:16]}"
    private_path = directory / f"{base}.key"
    public_path = directory / f"{base}.pub"
    pem = private_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(pem)
    public_path.write_bytes(
        signer.public_key.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private_path, public_path


def load_signer(
    path: Path | str | None = None, b64: str | bytes | _Secret | None = None, *, name: str | None = None
) -> Signer:
    """The signer from a key file (PEM, or base64 of the raw seed) or from base64 of the raw seed.

    Exactly one of ``path`` and ``b64`` (settings ``signing_key`` / ``signing_key_b64``; a pydantic
    ``SecretStr`` is accepted as is). Raises :class:`ContractError` naming the setting on any problem.
    """
    if (path is None) == (b64 is None):
        raise ContractError(
            "configure exactly one signing key: BLACKBOX_SIGNING_KEY (a file) or "
            "BLACKBOX_SIGNING_KEY_B64 (base64 of the raw 32-byte seed)",
            path="signing_key",
        )
    if b64 is not None:
        text = b64 if isinstance(b64, (str, bytes)) else b64.get_secret_value()
        return Signer.from_seed(_seed_from_b64(text, "signing_key_b64"), name=name)
    if path is None:  # unreachable (checked above); narrows the type
        raise ContractError("no signing key configured", path="signing_key")
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ContractError(f"cannot read the signing key file {path}: {exc}", path="signing_key") from exc
    if b"-----BEGIN" not in data:
        return Signer.from_seed(_seed_from_b64(data, "signing_key"), name=name)
    try:
        private_key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        raise ContractError(
            f"{path} is not an unencrypted PEM private key: {exc}", path="signing_key"
        ) from exc
    if not isinstance(private_key, Ed25519PrivateKey):
        raise ContractError(f"{path} holds a {type(private_key).__name__}, not ed25519", path="signing_key")
    return Signer(private_key, name=name)


def configured_signer(path: Path | str | None, b64: str | bytes | _Secret | None) -> Signer | None:
    """:func:`load_signer` of the signing-key settings, or None when neither is set."""
    if path is None and b64 is None:
        return None
    return load_signer(path, b64)


def public_key_from(value: bytes | str | Path) -> Ed25519PublicKey:
    """An ed25519 public key from raw 32 bytes, PEM (bytes or text), base64 of the raw key, or a PEM file."""
    if isinstance(value, Path):
        try:
            value = value.read_bytes()
        except OSError as exc:
            raise ContractError(f"cannot read the public key file: {exc}", path="public_key") from exc
    if isinstance(value, str):
        value = value.encode("ascii", "replace")
    if len(value) == 32 and b"-----BEGIN" not in value:
        return Ed25519PublicKey.from_public_bytes(value)
    if b"-----BEGIN" in value:
        try:
            key = serialization.load_pem_public_key(value)
        except (ValueError, UnsupportedAlgorithm) as exc:
            raise ContractError(f"not a PEM public key: {exc}", path="public_key") from exc
        if not isinstance(key, Ed25519PublicKey):
            raise ContractError(f"a {type(key).__name__} is not an ed25519 key", path="public_key")
        return key
    return Ed25519PublicKey.from_public_bytes(_seed_from_b64(value, "public_key"))


def _seed_from_b64(text: str | bytes, setting: str) -> bytes:
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ContractError(f"not base64: {exc}", path=setting) from exc
    if len(raw) != 32:
        raise ContractError(f"expected base64 of 32 raw bytes, got {len(raw)} bytes", path=setting)
    return raw

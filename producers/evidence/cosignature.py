"""Witness cosignatures on checkpoints (C2SP tlog-cosignature, ``cosignature/v1``), as a verifier sees them.

SDK-only, like :mod:`producers.evidence.tlog`: a bundle's witnessed checkpoint verifies offline.

A witness that checked a checkpoint extends everything it cosigned before adds one signature line to
the checkpoint's signed note: ``— <witness name> base64(key id[4] || timestamp[8, big-endian Unix
seconds] || ed25519 signature[64])``. The signed message is::

    cosignature/v1
    time <timestamp, decimal>
    <the checkpoint's note text: origin, size, root, extension lines>

The witness's verifier key is ``<name>+<hex key id>+base64(0x04 || public key)`` with ``key id =
sha256(name || 0x0A || 0x04 || public key)[:4]``. A plain ed25519 note key (type ``0x01``) names the
same public key; like ``transparency-dev/formats``' ``NewVerifierForCosignatureV1`` it is accepted and
treated as the ``0x04`` key (so its key id is recomputed).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from producers.evidence.keys import public_raw
from producers.evidence.tlog import MAX_NOTE_BYTES, Checkpoint, note_key_id
from schemas.errors import ProofInvalid

__all__ = [
    "Cosignature",
    "WitnessKey",
    "WitnessReport",
    "add_signature_lines",
    "cosign_line",
    "cosignature_message",
    "verify_witnesses",
    "witness_key",
]

_ED25519 = 0x01
_COSIGNATURE_V1 = 0x04
_DASH = "\u2014"
_SIGNATURE_LEN = 4 + 8 + 64
PART = "witness"


def _key_id(name: str, public_key: bytes) -> bytes:
    """``sha256(name || 0x0A || 0x04 || public key)[:4]``."""
    return hashlib.sha256(name.encode("utf-8") + b"\n" + bytes([_COSIGNATURE_V1]) + public_key).digest()[:4]


@dataclass(frozen=True, slots=True)
class WitnessKey:
    """A witness's cosignature/v1 verifier key: its name, 4-byte key id and ed25519 public key."""

    name: str
    key_id: bytes
    public_key: Ed25519PublicKey

    @property
    def vkey(self) -> str:
        raw = public_raw(self.public_key)
        return f"{self.name}+{self.key_id.hex()}+" + base64.b64encode(bytes([_COSIGNATURE_V1]) + raw).decode()

    @classmethod
    def from_public(cls, name: str, public_key: Ed25519PublicKey) -> WitnessKey:
        _check_name(name)
        return cls(name, _key_id(name, public_raw(public_key)), public_key)


def _check_name(name: str) -> None:
    if not name or any(c.isspace() or c == "+" or ord(c) < 0x20 for c in name):
        raise ProofInvalid(f"a witness name must be non-empty, without spaces or '+': {name!r}", part=PART)


def witness_key(vkey: str) -> WitnessKey:
    """The :class:`WitnessKey` in a vkey string (type ``0x04``, or a plain ed25519 ``0x01`` key);
    :class:`ProofInvalid` naming what is wrong otherwise."""
    parts = vkey.strip().split("+", 2)
    if len(parts) != 3 or len(parts[1]) != 8:
        raise ProofInvalid(f"not a witness verifier key (name+hex id+base64): {vkey[:80]!r}", part=PART)
    name, hex_id, b64 = parts
    _check_name(name)
    try:
        raw = base64.b64decode(b64, validate=True)
        key_id = bytes.fromhex(hex_id)
    except (binascii.Error, ValueError) as exc:
        raise ProofInvalid(f"the witness key {name} is not name+hex id+base64: {exc}", part=PART) from exc
    if len(raw) != 33 or raw[0] not in (_ED25519, _COSIGNATURE_V1):
        raise ProofInvalid(f"the witness key {name} is not an ed25519 cosignature key", part=PART)
    expected = _key_id(name, raw[1:]) if raw[0] == _COSIGNATURE_V1 else note_key_id(name, raw[1:])
    if expected != key_id:
        raise ProofInvalid(f"the witness key {name}: its id does not match its name and key", part=PART)
    return WitnessKey(name, _key_id(name, raw[1:]), Ed25519PublicKey.from_public_bytes(raw[1:]))


def cosignature_message(timestamp: int, text: str) -> bytes:
    """The bytes a cosignature/v1 signature covers, for a checkpoint's note ``text``."""
    Checkpoint.parse(text)  # a witness cosigns checkpoints only
    return f"cosignature/v1\ntime {timestamp}\n{text}".encode()


def cosign_line(text: str, *, name: str, private_key: Ed25519PrivateKey, timestamp: int) -> str:
    """One cosignature/v1 signature line over ``text`` (what a witness returns; tests and tools)."""
    key = WitnessKey.from_public(name, private_key.public_key())
    signature = private_key.sign(cosignature_message(timestamp, text))
    blob = key.key_id + struct.pack(">Q", timestamp) + signature
    return f"{_DASH} {name} {base64.b64encode(blob).decode('ascii')}\n"


def _split(note: str) -> tuple[str, list[str]]:
    if len(note.encode("utf-8", "replace")) > MAX_NOTE_BYTES:
        raise ProofInvalid("the note is larger than 64 KiB", part="checkpoint")
    split = note.rfind("\n\n")
    if split < 0 or not note.endswith("\n"):
        raise ProofInvalid("not a signed note: no blank line before the signatures", part="checkpoint")
    return note[: split + 1], note[split + 2 :].splitlines()


def add_signature_lines(note: str, lines: Iterable[str]) -> str:
    """``note`` with the signature ``lines`` appended, each once (a witness's answer is untrusted text:
    only well-formed ``— name base64`` lines are kept)."""
    text, existing = _split(note)
    out = list(existing)
    for line in lines:
        line = line.rstrip("\n")
        parts = line.split(" ")
        if len(parts) != 3 or parts[0] != _DASH or line in out:
            continue
        try:
            base64.b64decode(parts[2], validate=True)
        except (binascii.Error, ValueError):
            continue
        out.append(line)
    return text + "\n" + "".join(f"{line}\n" for line in out)


@dataclass(frozen=True, slots=True)
class Cosignature:
    """One verified cosignature: the witness and the time it says it cosigned (Unix seconds)."""

    witness: str
    timestamp: int


@dataclass(frozen=True, slots=True)
class WitnessReport:
    """The cosignatures that verified on a checkpoint, out of the witnesses asked for."""

    cosigned: tuple[Cosignature, ...]
    asked: int
    quorum: int

    def line(self) -> str:
        names = ", ".join(f"{c.witness} (time {c.timestamp})" for c in self.cosigned) or "none"
        return f"witnessed by {len(self.cosigned)} of {self.asked} (quorum {self.quorum}): {names}"


def verify_witnesses(note: str, witnesses: Sequence[str | WitnessKey], *, quorum: int) -> WitnessReport:
    """Check the cosignatures on ``note`` by ``witnesses`` (vkeys); at least ``quorum`` distinct ones
    must verify. A line by a listed witness that does not verify fails the note (it was changed);
    lines by anyone else are ignored, as signed-note asks. The log's own signature is checked by
    :func:`producers.evidence.tlog.open_checkpoint`, not here."""
    keys = [w if isinstance(w, WitnessKey) else witness_key(w) for w in witnesses]
    if not 0 <= quorum <= len(keys):
        raise ProofInvalid(f"a quorum of {quorum} needs at least that many --witness keys", part=PART)
    text, lines = _split(note)
    Checkpoint.parse(text)
    by_id = {(k.name, k.key_id): k for k in keys}
    seen: dict[str, Cosignature] = {}
    for line in lines:
        parts = line.split(" ")
        if len(parts) != 3 or parts[0] != _DASH:
            raise ProofInvalid(f"malformed signature line {line[:60]!r}", part="checkpoint")
        try:
            blob = base64.b64decode(parts[2], validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ProofInvalid(f"a signature line is not base64: {exc}", part="checkpoint") from exc
        key = by_id.get((parts[1], blob[:4]))
        if key is None:
            continue
        if len(blob) != _SIGNATURE_LEN:
            raise ProofInvalid(f"the cosignature by {key.name} is not a cosignature/v1 signature", part=PART)
        (timestamp,) = struct.unpack(">Q", blob[4:12])
        try:
            key.public_key.verify(blob[12:], cosignature_message(timestamp, text))
        except InvalidSignature as exc:
            raise ProofInvalid(
                f"the cosignature by witness {key.name} does not verify: the checkpoint was changed",
                part=PART,
            ) from exc
        seen[key.name] = Cosignature(key.name, timestamp)
    report = WitnessReport(tuple(seen.values()), len(keys), quorum)
    if len(seen) < quorum:
        raise ProofInvalid(
            f"the checkpoint of {Checkpoint.parse(text).size} leaves is cosigned by {len(seen)} of the "
            f"{len(keys)} witnesses given, the quorum is {quorum}",
            part=PART,
        )
    return report

"""The transparency log, as a verifier sees it: leaves, checkpoints (signed notes) and proofs.

SDK-only (``cryptography`` and the standard library): an evidence bundle verifies with
``pip install agent-blackbox`` alone. The log itself (tiles in the blob store, appends, checkpoints)
is :mod:`consumers.tlog`.

**Leaf.** One per accepted capture: the RFC 8785 canonical JSON of ::

    {"capturedAt": <the capture's capturedAt string, as signed>,
     "decisionId": <the capture's decisionId>,
     "envelopeHash": "sha256:" + hex(sha256(PAE(payloadType, manifest bytes))),
     "type": "blackbox.tlog.capture/v1"}

``PAE`` is DSSE v1's pre-authentication encoding (:mod:`producers.evidence.dsse`), ``payloadType``
is :data:`~producers.evidence.manifest.MANIFEST_PAYLOAD_TYPE` and the manifest bytes are the signed
manifest: the envelope hash is the hash of exactly the bytes the capture's ed25519 signature covers,
so a leaf commits to every manifest field and, through the hash fields, to every content part.
The leaf hash is RFC 6962's ``sha256(0x00 || leaf)``; nodes are ``sha256(0x01 || left || right)``.

**Checkpoint** (C2SP tlog-checkpoint): the signed note text ``<origin>\\n<tree size>\\n<base64
root>\\n``, then a blank line and one signature line per signer, ``— <key name> base64(key id[4] ||
ed25519 signature)``, with ``key id = sha256(key name || 0x0A || 0x01 || public key)[:4]`` (C2SP
signed-note). The log's key name is its origin. Its verifier key (``vkey``) is
``<name>+<hex key id>+base64(0x01 || public key)``.

**Inclusion proof** (what :func:`verify_inclusion` takes)::

    {"leafIndex": int, "treeSize": int, "hashes": [base64, ...], "checkpoint": "<signed note>",
     "leaf": base64 of the leaf bytes}

``hashes`` is RFC 6962's audit path; it is checked against the root in the signed checkpoint, whose
size must equal ``treeSize``. Consistency proofs (:func:`verify_consistency`) follow RFC 9162 §2.1.4.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from producers.evidence.canonical import canonical_json
from producers.evidence.dsse import pae
from producers.evidence.keys import public_key_from, public_raw
from producers.evidence.manifest import MANIFEST_PAYLOAD_TYPE
from producers.evidence.merkle import leaf_hash, node_hash
from producers.evidence.payload import signing_payload
from schemas.errors import ContractError, ProofInvalid

__all__ = [
    "LEAF_TYPE",
    "Checkpoint",
    "LogKey",
    "capture_leaf",
    "envelope_hash",
    "format_checkpoint",
    "leaf_bytes",
    "log_key",
    "note_key_id",
    "open_checkpoint",
    "open_note",
    "parse_leaf",
    "root_from_inclusion",
    "sign_note",
    "sized_leaf",
    "verify_consistency",
    "verify_inclusion",
    "vkey",
]

LEAF_TYPE = "blackbox.tlog.capture/v1"
_ED25519 = 0x01  # signed-note signature type
_DASH = "\u2014"
MAX_NOTE_BYTES = 64 * 1024  # verifiers SHOULD bound a note; 16 ed25519 signatures fit many times over


# --- leaves ---------------------------------------------------------------------------------------
def envelope_hash(manifest_payload: bytes, payload_type: str = MANIFEST_PAYLOAD_TYPE) -> str:
    """``"sha256:" + hex(sha256(PAE(payload_type, manifest_payload)))``: the bytes the signature covers."""
    return "sha256:" + hashlib.sha256(pae(payload_type, manifest_payload)).hexdigest()


def leaf_bytes(*, decision_id: str, captured_at: str, envelope_hash: str) -> bytes:
    """The leaf of one capture (module docstring); refuses a leaf the tiles' uint16 length cannot hold."""
    data = canonical_json(
        {
            "capturedAt": captured_at,
            "decisionId": decision_id,
            "envelopeHash": envelope_hash,
            "type": LEAF_TYPE,
        }
    )
    return sized_leaf(data, path="decisionId")


def sized_leaf(data: bytes, *, path: str) -> bytes:
    """``data`` if the tiles' uint16 length can hold it (every entry type's leaf); ContractError if not."""
    if len(data) > 0xFFFF:
        raise ContractError(f"a log leaf is at most 65535 bytes, this one is {len(data)}", path=path)
    return data


def capture_leaf(capture: Mapping[str, Any]) -> bytes:
    """The leaf of a sealed capture (JSON form), recomputed from its manifest."""
    signed = signing_payload(dict(capture), fill_root=False)
    return leaf_bytes(
        decision_id=str(capture.get("decisionId") or ""),
        captured_at=str(capture.get("capturedAt") or ""),
        envelope_hash=envelope_hash(signed.payload),
    )


def parse_leaf(data: bytes) -> dict[str, str]:
    """The fields of a leaf (``decisionId``, ``capturedAt``, ``envelopeHash``, ``type``); ProofInvalid otherwise."""
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProofInvalid(f"the leaf is not JSON: {exc}", part="leaf") from exc
    if not isinstance(value, dict) or value.get("type") != LEAF_TYPE:
        raise ProofInvalid(f"the leaf is not a {LEAF_TYPE} leaf", part="leaf")
    if not all(isinstance(value.get(k), str) for k in ("decisionId", "capturedAt", "envelopeHash")):
        raise ProofInvalid("the leaf lacks decisionId, capturedAt or envelopeHash", part="leaf")
    return {k: str(v) for k, v in value.items()}


# --- signed notes (C2SP signed-note, ed25519) ----------------------------------------------------------
def note_key_id(name: str, public_key: bytes) -> bytes:
    """``sha256(name || 0x0A || 0x01 || public key)[:4]``."""
    return hashlib.sha256(name.encode("utf-8") + b"\n" + bytes([_ED25519]) + public_key).digest()[:4]


def _check_name(name: str) -> str:
    if not name or any(c.isspace() or c == "+" for c in name) or any(ord(c) < 0x20 for c in name):
        raise ContractError(
            f"a note key name must be non-empty, without spaces or '+': {name!r}", path="origin"
        )
    return name


def vkey(name: str, public_key: bytes) -> str:
    """The C2SP verifier key ``<name>+<hex key id>+base64(0x01 || public key)``."""
    return f"{_check_name(name)}+{note_key_id(name, public_key).hex()}+" + base64.b64encode(
        bytes([_ED25519]) + public_key
    ).decode("ascii")


@dataclass(frozen=True, slots=True)
class LogKey:
    """A log's verifier key: the note key name, its 4-byte key id, and the ed25519 public key."""

    name: str
    key_id: bytes
    public_key: Ed25519PublicKey

    @property
    def vkey(self) -> str:
        return vkey(self.name, public_raw(self.public_key))


def _is_vkey(text: str) -> bool:
    parts = text.strip().split("+", 2)
    return len(parts) == 3 and len(parts[1]) == 8 and all(c in "0123456789abcdef" for c in parts[1])


def log_key(value: str | bytes | Ed25519PublicKey | LogKey, *, name: str | None = None) -> LogKey:
    """A :class:`LogKey` from a vkey string, or from a raw 32-byte / PEM / key object plus ``name``
    (then the origin of the checkpoint being verified, when ``None``)."""
    if isinstance(value, LogKey):
        return value
    if isinstance(value, str) and _is_vkey(value):
        key_name, hex_id, b64 = value.strip().split("+", 2)  # base64 may hold "+", name and id never
        try:
            raw = base64.b64decode(b64, validate=True)
            key_id = bytes.fromhex(hex_id)
        except (binascii.Error, ValueError) as exc:
            raise ProofInvalid(f"not a verifier key (name+hex id+base64): {exc}", part="checkpoint") from exc
        if len(raw) != 33 or raw[0] != _ED25519 or len(key_id) != 4:
            raise ProofInvalid("the verifier key is not an ed25519 note key", part="checkpoint")
        if note_key_id(key_name, raw[1:]) != key_id:
            raise ProofInvalid("the verifier key's id does not match its name and key", part="checkpoint")
        return LogKey(key_name, key_id, Ed25519PublicKey.from_public_bytes(raw[1:]))
    if name is None:
        raise ProofInvalid("a raw log public key needs the log's name (origin)", part="checkpoint")
    key = value if isinstance(value, Ed25519PublicKey) else public_key_from(value)
    return LogKey(_check_name(name), note_key_id(name, public_raw(key)), key)


def sign_note(text: str, *, name: str, private_key: Ed25519PrivateKey) -> str:
    """``text`` (ending in a newline) as a signed note with one ed25519 signature by ``name``."""
    if not text.endswith("\n"):
        raise ContractError("a note's text ends with a newline", path="note")
    _check_name(name)
    key_id = note_key_id(name, public_raw(private_key.public_key()))
    signature = private_key.sign(text.encode("utf-8"))
    return f"{text}\n{_DASH} {name} {base64.b64encode(key_id + signature).decode('ascii')}\n"


def open_note(note: str, key: LogKey) -> str:
    """The text of ``note`` once a signature by ``key`` verifies (signatures by other keys are
    ignored, as the spec asks); :class:`ProofInvalid` (``part="checkpoint"``) otherwise."""
    if len(note.encode("utf-8", "replace")) > MAX_NOTE_BYTES:
        raise ProofInvalid("the note is larger than 64 KiB", part="checkpoint")
    if any(ord(c) < 0x20 and c != "\n" for c in note):
        raise ProofInvalid("the note contains a control character other than newline", part="checkpoint")
    split = note.rfind("\n\n")
    if split < 0 or not note.endswith("\n"):
        raise ProofInvalid("not a signed note: no blank line before the signatures", part="checkpoint")
    text, lines = note[: split + 1], note[split + 2 :].splitlines()
    if not lines:
        raise ProofInvalid("the note has no signature line", part="checkpoint")
    matched = False
    for line in lines:
        parts = line.split(" ")
        if len(parts) != 3 or parts[0] != _DASH:
            raise ProofInvalid(f"malformed signature line {line[:60]!r}", part="checkpoint")
        try:
            blob = base64.b64decode(parts[2], validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ProofInvalid(f"a signature line is not base64: {exc}", part="checkpoint") from exc
        if parts[1] != key.name or blob[:4] != key.key_id:
            continue  # another signer (a witness, a rotated key): ignored
        try:
            key.public_key.verify(blob[4:], text.encode("utf-8"))
        except InvalidSignature as exc:
            raise ProofInvalid(
                f"the signature by {key.name} does not verify: the note was changed after signing",
                part="checkpoint",
            ) from exc
        matched = True
    if not matched:
        raise ProofInvalid(f"the note carries no signature by the log key {key.name}", part="checkpoint")
    return text


# --- checkpoints (C2SP tlog-checkpoint) -----------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A checkpoint's note text: origin, tree size, root hash (32 bytes) and extension lines."""

    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> Checkpoint:
        """The checkpoint in a note text (the part before the signatures)."""
        lines = text.split("\n")
        if len(lines) < 4 or lines[-1] != "" or any(line == "" for line in lines[:-1]):
            raise ProofInvalid("a checkpoint is three or more non-empty lines", part="checkpoint")
        origin, size_text, root_text = lines[0], lines[1], lines[2]
        if not size_text.isdigit() or (len(size_text) > 1 and size_text[0] == "0"):
            raise ProofInvalid(
                f"tree size {size_text!r} is not a decimal without leading zeros", part="checkpoint"
            )
        try:
            root = base64.b64decode(root_text, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ProofInvalid(f"the root hash is not base64: {exc}", part="checkpoint") from exc
        if len(root) != 32:
            raise ProofInvalid(f"the root hash is {len(root)} bytes, not 32", part="checkpoint")
        return cls(origin, int(size_text), root, tuple(lines[3:-1]))

    def text(self) -> str:
        return format_checkpoint(self.origin, self.size, self.root, self.extensions)


def format_checkpoint(origin: str, size: int, root: bytes, extensions: Sequence[str] = ()) -> str:
    """The checkpoint note text."""
    lines = [origin, str(size), base64.b64encode(root).decode("ascii"), *extensions]
    return "\n".join(lines) + "\n"


def open_checkpoint(note: str, key: str | bytes | Ed25519PublicKey | LogKey) -> Checkpoint:
    """The checkpoint in a signed note, once its log signature verifies and its origin is the key's name."""
    if isinstance(key, LogKey) or (isinstance(key, str) and _is_vkey(key)):
        resolved = log_key(key)
    else:  # a bare public key: the note names its own log; the signature still has to verify
        resolved = log_key(key, name=note.split("\n", 1)[0])
    checkpoint = Checkpoint.parse(open_note(note, resolved))
    if checkpoint.origin != resolved.name:
        raise ProofInvalid(
            f"the checkpoint is for log {checkpoint.origin!r}, the key for {resolved.name!r}",
            part="checkpoint",
        )
    return checkpoint


# --- proofs (RFC 6962 / RFC 9162 §2.1.3 and §2.1.4) ------------------------------------------------------
def root_from_inclusion(index: int, size: int, leaf: bytes, path: Sequence[bytes]) -> bytes:
    """The root implied by ``leaf`` (its *hash*) at ``index`` in a tree of ``size`` and its audit path."""
    if not 0 <= index < size:
        raise ProofInvalid(f"leaf index {index} is outside a tree of size {size}", part="inclusion")
    fn, sn, r = index, size - 1, leaf
    for p in path:
        if sn == 0:
            raise ProofInvalid("the audit path is too long", part="inclusion")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofInvalid("the audit path is too short", part="inclusion")
    return r


def verify_consistency(
    old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> None:
    """Check that the tree of ``new_size`` extends the one of ``old_size`` (nothing rewritten or
    removed); :class:`ProofInvalid` (``part="consistency"``) otherwise."""
    if old_size > new_size:
        raise ProofInvalid(f"the log shrank from {old_size} to {new_size} leaves", part="consistency")
    if old_size == new_size:
        if proof or old_root != new_root:
            raise ProofInvalid(f"two different roots for the same size {new_size}", part="consistency")
        return
    if old_size == 0:
        if proof:
            raise ProofInvalid("a proof from the empty tree must be empty", part="consistency")
        return
    path = list(proof)
    if old_size & (old_size - 1) == 0:  # a power of two: the old root is a node of the new tree
        path.insert(0, old_root)
    if not path:
        raise ProofInvalid("empty consistency proof", part="consistency")
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise ProofInvalid("the consistency proof is too long", part="consistency")
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    if sn != 0 or fr != old_root or sr != new_root:
        raise ProofInvalid(
            f"the tree of {new_size} leaves does not extend the tree of {old_size}: leaves were "
            "rewritten or removed",
            part="consistency",
        )


def _b64(value: object, what: str) -> bytes:
    if not isinstance(value, str):
        raise ProofInvalid(f"{what} must be base64 text", part="inclusion")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ProofInvalid(f"{what} is not base64: {exc}", part="inclusion") from exc


def verify_inclusion(
    leaf_bytes: bytes, proof: Mapping[str, Any], log_public_key: str | bytes | Ed25519PublicKey | LogKey
) -> Checkpoint:
    """Check that ``leaf_bytes`` is in the log at ``proof["leafIndex"]``, under the checkpoint in
    ``proof`` signed by ``log_public_key`` (a vkey string, or a raw / PEM / key object, then named
    by the checkpoint's origin). Returns the checkpoint; :class:`ProofInvalid` names the failing part.
    """
    if not isinstance(proof, Mapping):
        raise ProofInvalid("the inclusion proof is not a JSON object", part="inclusion")
    note = proof.get("checkpoint")
    if not isinstance(note, str):
        raise ProofInvalid("the proof carries no checkpoint", part="checkpoint")
    checkpoint = open_checkpoint(note, log_public_key)
    index, size = proof.get("leafIndex"), proof.get("treeSize")
    if type(index) is not int or type(size) is not int:
        raise ProofInvalid("leafIndex and treeSize must be integers", part="inclusion")
    if size != checkpoint.size:
        raise ProofInvalid(
            f"the proof is for a tree of {size} leaves, the checkpoint has {checkpoint.size}",
            part="inclusion",
        )
    if "leaf" in proof and _b64(proof["leaf"], "leaf") != leaf_bytes:
        raise ProofInvalid("the proof is for another leaf than the one given", part="leaf")
    hashes = proof.get("hashes")
    if not isinstance(hashes, list):
        raise ProofInvalid("hashes must be a list of base64 hashes", part="inclusion")
    path = [_b64(h, "a proof hash") for h in hashes]
    if any(len(h) != 32 for h in path):
        raise ProofInvalid("a proof hash is not 32 bytes", part="inclusion")
    if root_from_inclusion(index, size, leaf_hash(leaf_bytes), path) != checkpoint.root:
        raise ProofInvalid(
            f"leaf {index} is not in the tree of {size} leaves the checkpoint signs (the leaf or the "
            "proof was changed)",
            part="inclusion",
        )
    return checkpoint

"""Evidence bundles: one JSON file that a third party verifies offline with the SDK alone.

``blackbox export ID --out FILE`` (and ``GET /v1/decisions/{id}/bundle``) writes::

    {
      "bundleFormat": "blackbox.evidence-bundle/v1",
      "decisionId": "dec_...",
      "exportedAt": "2026-07-20T09:00:00.000Z",
      "capture": { ... the capture in its JSON form, as stored (content may be absent: compacted) ... },
      "envelope": {                       # DSSE v1 envelope of the signed manifest
        "payloadType": "application/vnd.blackbox.manifest+json;version=replay/v1",
        "payload": "<base64 of the manifest's RFC 8785 bytes>",
        "signatures": [{"keyid": "sha256:<hex>", "sig": "<base64 ed25519 signature over PAE>"}]
      },
      "signer": {
        "keyId": "sha256:<hex of sha256(raw public key)>",
        "publicKey": "<base64 of the raw 32-byte ed25519 public key>",
        "trustRecord": {"key_id", "public_key", "not_before", "not_after", "revoked_at", "agents", "note"}
      },
      "transparency": {                   # null when the decision has no leaf in the log
        "logKey": "<C2SP verifier key of the log, a hint>",
        "proof": {"leafIndex", "treeSize", "hashes": [base64...], "checkpoint": "<signed note>", "leaf"}
      }
    }

:func:`verify_bundle` checks, in order, each failure naming its part:

1. ``bundle`` — the format is known and every section is there.
2. ``signer.publicKey`` / ``signer.keyId`` / ``signer.trustRecord`` — the key id is the sha256 of the key,
   the trust record is for that key; then against the verifier's own trust (``--trust``): a trust-store
   TOML must hold the key with exactly that record (window, revocation, agents, note), a public-key
   file must be that key (the bundle's record then gives the window).
3. ``envelope`` — payload type, and the ed25519 signature over DSSE ``PAE(payloadType, payload)``.
4. ``capture.<field>`` — the capture's manifest is byte for byte the envelope's payload (else the first
   differing field is named), then :func:`~producers.evidence.verify.verify_capture`: key window at
   ``capturedAt``, signature, every content hash, the working-set root.
5. ``transparency`` — the leaf recomputed from the capture (decision id, ``capturedAt``, envelope hash;
   :mod:`producers.evidence.tlog`) is in the log at ``leafIndex`` under the signed checkpoint.

A bundle with no inclusion proof, or whose log key the verifier did not pin (``--log-key``), is
reported as *incomplete*, never as verified: its integrity holds, its completeness is unproven.

Run it without blackbox's services: ``python -m producers.evidence.bundle FILE --trust KEYFILE
[--log-key VKEY]``; exit 0 verified, 1 not verified or incomplete, 2 unusable input.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from producers.evidence.dsse import b64encode, open_envelope, pae
from producers.evidence.keys import key_id as compute_key_id
from producers.evidence.keys import key_id_from_ref, public_key_from, public_raw
from producers.evidence.manifest import MANIFEST_PAYLOAD_TYPE
from producers.evidence.payload import signing_payload
from producers.evidence.seal import SIGNATURE_PREFIX
from producers.evidence.trust import TrustedKey, TrustStore, format_time, parse_time
from producers.evidence.verify import verify_capture
from schemas.errors import BlackboxError, ContractError, VerificationError

__all__ = [
    "BUNDLE_FORMAT",
    "BundleInvalid",
    "BundleReport",
    "build_bundle",
    "load_trust",
    "read_json_object",
    "read_log_key",
    "trust_record",
    "verify_bundle",
]

BUNDLE_FORMAT = "blackbox.evidence-bundle/v1"
SECTIONS = ("capture", "envelope", "signer")
EXIT_VERIFIED, EXIT_NOT_VERIFIED, EXIT_UNUSABLE = 0, 1, 2


class BundleInvalid(VerificationError):
    """A part of an evidence bundle does not verify; ``part`` names it (``signer.trustRecord`` …)."""


@dataclass(frozen=True, slots=True)
class BundleReport:
    """What a bundle's verification established. ``complete`` only with a verified inclusion proof
    under a pinned log key; ``missing`` says what is not proven otherwise."""

    decision_id: str
    key_id: str
    checked_parts: int
    absent_parts: tuple[str, ...] = ()
    leaf_index: int | None = None
    tree_size: int | None = None
    log: str = ""
    missing: str = ""
    witnessed: str = ""

    @property
    def complete(self) -> bool:
        return not self.missing

    def lines(self) -> list[str]:
        head = (
            f"verified: {self.decision_id} key={self.key_id} ({self.checked_parts} parts)"
            if self.complete
            else f"INCOMPLETE: {self.decision_id} key={self.key_id} ({self.checked_parts} parts) "
            f"part=transparency: {self.missing}"
        )
        out = [head]
        if self.leaf_index is not None:
            out.append(f"in log {self.log} at leaf {self.leaf_index} of {self.tree_size}")
        if self.witnessed:
            out.append(self.witnessed)
        if self.absent_parts:
            out.append(f"absent content (hash kept, not checked): {', '.join(self.absent_parts)}")
        return out


# --- building (the service side calls this with what it read) -------------------------------------------
def trust_record(key: TrustedKey) -> dict[str, Any]:
    """A trust-store entry in the JSON form a bundle carries (the TOML entry's fields)."""
    return {
        "key_id": key.key_id,
        "public_key": b64encode(key.public_key),
        "not_before": format_time(key.not_before),
        "not_after": None if key.not_after is None else format_time(key.not_after),
        "revoked_at": None if key.revoked_at is None else format_time(key.revoked_at),
        "agents": None if key.agents is None else list(key.agents),
        "note": key.note,
    }


def build_bundle(
    capture: Mapping[str, Any],
    *,
    trusted: TrustedKey,
    transparency: Mapping[str, Any] | None,
    exported_at: datetime,
) -> dict[str, Any]:
    """The bundle of a sealed ``capture`` signed by ``trusted`` (its trust-store record)."""
    signature = capture.get("signature") if isinstance(capture.get("signature"), Mapping) else None
    encoded = (signature or {}).get("signatureBytes")
    if not isinstance(encoded, str) or not encoded.startswith(SIGNATURE_PREFIX):
        raise ContractError("the capture is not signed, so there is no envelope to export", path="signature")
    payload = signing_payload(dict(capture), fill_root=False).payload
    return {
        "bundleFormat": BUNDLE_FORMAT,
        "decisionId": capture.get("decisionId"),
        "exportedAt": format_time(exported_at),
        "capture": dict(capture),
        "envelope": {
            "payloadType": MANIFEST_PAYLOAD_TYPE,
            "payload": b64encode(payload),
            "signatures": [{"keyid": trusted.key_id, "sig": encoded[len(SIGNATURE_PREFIX) :]}],
        },
        "signer": {
            "keyId": trusted.key_id,
            "publicKey": b64encode(trusted.public_key),
            "trustRecord": trust_record(trusted),
        },
        "transparency": None if transparency is None else dict(transparency),
    }


# --- verifying ------------------------------------------------------------------------------------------
def load_trust(path: Path) -> TrustStore | Ed25519PublicKey:
    """The verifier's trust: a trust-store TOML, or one ed25519 public key (PEM, raw, base64)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ContractError(f"cannot read the trust file: {exc}", path=str(path)) from exc
    if b"-----BEGIN" in data or len(data) == 32 or (len(data.strip()) == 44 and b"=" in data):
        return public_key_from(data.strip() if len(data) != 32 else data)
    return TrustStore.load(path)


def verify_bundle(
    bundle: Mapping[str, Any],
    trust: TrustStore | Ed25519PublicKey,
    *,
    log_key: str | None = None,
    witnesses: Sequence[str] = (),
    witness_quorum: int = 0,
    at: datetime | None = None,
) -> BundleReport:
    """Verify every part of ``bundle`` (module docstring); raises :class:`VerificationError` naming the
    first part that fails. ``at`` is the verification time for revocation (default now)."""
    if not isinstance(bundle, Mapping) or bundle.get("bundleFormat") != BUNDLE_FORMAT:
        found = bundle.get("bundleFormat") if isinstance(bundle, Mapping) else None
        raise BundleInvalid(f"not a {BUNDLE_FORMAT} bundle (bundleFormat={found!r})", part="bundle")
    for section in SECTIONS:
        if not isinstance(bundle.get(section), Mapping):
            raise BundleInvalid(f"the bundle has no {section} object", part=section)
    capture: Mapping[str, Any] = bundle["capture"]

    key, store = _signer(bundle["signer"], trust)
    payload = _envelope(bundle["envelope"], key)
    _same_manifest(capture, payload)
    try:
        report = verify_capture(capture, store, at=at)
    except VerificationError as exc:
        raise type(exc)(f"capture: {exc}", part=f"capture.{exc.part}" if exc.part else "capture") from exc
    signed_id = key_id_from_ref((capture.get("signature") or {}).get("publicKeyRef"))
    if signed_id != bundle["signer"].get("keyId"):
        raise BundleInvalid(
            "the capture names another signing key than the bundle's signer", part="signer.keyId"
        )

    decision_id = str(capture.get("decisionId") or bundle.get("decisionId") or "?")
    if bundle.get("decisionId") != capture.get("decisionId"):
        raise BundleInvalid(
            f"the bundle is labelled {bundle.get('decisionId')!r}, the capture is {capture.get('decisionId')!r}",
            part="decisionId",
        )
    base = BundleReport(
        decision_id=decision_id,
        key_id=report.key_id,
        checked_parts=report.checked_parts,
        absent_parts=report.absent_parts,
    )
    transparency = bundle.get("transparency")
    if transparency is None:
        return replace(base, missing="no inclusion proof: the bundle does not show the capture is in the log")
    found = _transparency(transparency, capture, log_key=log_key, base=base)
    if not witnesses and not witness_quorum:
        return found
    from producers.evidence.cosignature import verify_witnesses

    try:  # the log's signature on this note has verified above; now the witnesses'
        witnessed = verify_witnesses(transparency["proof"]["checkpoint"], witnesses, quorum=witness_quorum)
    except VerificationError as exc:
        raise type(exc)(f"transparency: {exc}", part=f"transparency.{exc.part}") from exc
    return replace(found, witnessed=witnessed.line())


def _signer(
    signer: Mapping[str, Any], trust: TrustStore | Ed25519PublicKey
) -> tuple[Ed25519PublicKey, TrustStore]:
    raw = _b64(signer.get("publicKey"), part="signer.publicKey")
    key_id = signer.get("keyId")
    if isinstance(trust, TrustStore):
        held = trust.get(key_id) if isinstance(key_id, str) else None
        if held is None:
            raise BundleInvalid(f"your trust store does not hold the key {key_id!r}", part="signer.keyId")
        if held.public_key != raw:
            raise BundleInvalid(
                f"the public key is not the key {key_id} in your trust store", part="signer.publicKey"
            )
    elif public_raw(trust) != raw:
        raise BundleInvalid("the signer's public key is not the key you trust", part="signer.publicKey")
    if key_id != compute_key_id(raw):
        raise BundleInvalid(f"keyId {key_id!r} is not the sha256 of the public key", part="signer.keyId")
    record = signer.get("trustRecord")
    if not isinstance(record, Mapping):
        raise BundleInvalid("the signer has no trust record", part="signer.trustRecord")
    try:
        bundled = _record(record)
    except (ContractError, ValueError, KeyError, TypeError) as exc:
        raise BundleInvalid(f"the trust record is malformed: {exc}", part="signer.trustRecord") from exc
    if bundled.key_id != key_id or bundled.public_key != raw:
        raise BundleInvalid(
            "the trust record is for another key than the signer's", part="signer.trustRecord"
        )
    if not isinstance(trust, TrustStore):  # one trusted key: the bundle's record gives its window
        return trust, TrustStore([bundled])
    mine, theirs = trust_record(trust.get(key_id) or bundled), trust_record(bundled)
    differ = [k for k, v in mine.items() if theirs[k] != v]
    if differ:
        raise BundleInvalid(
            f"the trust record differs from your trust store's record for {key_id} ({', '.join(differ)})",
            part="signer.trustRecord",
        )
    return Ed25519PublicKey.from_public_bytes(raw), trust


def _record(value: Mapping[str, Any]) -> TrustedKey:
    agents = value.get("agents")
    return TrustedKey(
        key_id=str(value["key_id"]),
        public_key=_b64(value["public_key"], part="signer.trustRecord"),
        not_before=parse_time(value["not_before"]),
        not_after=None if value.get("not_after") is None else parse_time(value["not_after"]),
        revoked_at=None if value.get("revoked_at") is None else parse_time(value["revoked_at"]),
        note=str(value.get("note", "")),
        agents=None if agents is None else tuple(str(a) for a in agents),
    )


def _envelope(envelope: Mapping[str, Any], key: Ed25519PublicKey) -> bytes:
    try:
        payload, payload_type, signatures = open_envelope(envelope)
    except VerificationError as exc:
        raise BundleInvalid(str(exc), part="envelope") from exc
    if payload_type != MANIFEST_PAYLOAD_TYPE:
        raise BundleInvalid(
            f"payloadType {payload_type!r} is not the manifest's", part="envelope.payloadType"
        )
    for _hint, signature in signatures:
        try:
            key.verify(signature, pae(payload_type, payload))
        except InvalidSignature:
            continue
        return payload
    raise BundleInvalid(
        "no envelope signature verifies with the signer's key: the payload or the signature was changed",
        part="envelope",
    )


def _same_manifest(capture: Mapping[str, Any], payload: bytes) -> None:
    """The capture's manifest must be the signed payload; else name the first field that differs."""
    try:
        mine = signing_payload(dict(capture), fill_root=False).payload
    except ContractError as exc:
        raise BundleInvalid(f"the capture has no manifest: {exc}", part="capture") from exc
    if mine == payload:
        return
    field = _first_difference(json.loads(mine), json.loads(payload))
    raise BundleInvalid(
        "the capture is not what the envelope signed: it differs from the signed manifest here",
        part=f"capture.{field}" if field else "capture",
    )


def _first_difference(mine: Any, signed: Any, path: str = "") -> str:
    if isinstance(mine, dict) and isinstance(signed, dict):
        for name in sorted(set(mine) | set(signed)):
            if mine.get(name) != signed.get(name):
                return _first_difference(mine.get(name), signed.get(name), f"{path}.{name}" if path else name)
    if isinstance(mine, list) and isinstance(signed, list) and len(mine) == len(signed):
        for i, (a, b) in enumerate(zip(mine, signed, strict=True)):
            if a != b:
                return _first_difference(a, b, f"{path}[{i}]")
    return path


def _transparency(
    section: Any, capture: Mapping[str, Any], *, log_key: str | None, base: BundleReport
) -> BundleReport:
    from producers.evidence.tlog import capture_leaf, verify_inclusion

    if not isinstance(section, Mapping) or not isinstance(section.get("proof"), Mapping):
        raise BundleInvalid("the transparency section has no proof object", part="transparency")
    key = log_key or section.get("logKey")
    if not isinstance(key, str) or not key:
        return replace(base, missing="no log key: give the log's verifier key (--log-key)")
    leaf = capture_leaf(capture)
    try:
        checkpoint = verify_inclusion(leaf, section["proof"], key)
    except VerificationError as exc:
        raise type(exc)(
            f"transparency: {exc}", part=f"transparency.{exc.part}" if exc.part else "transparency"
        ) from exc
    found = replace(
        base, leaf_index=int(section["proof"]["leafIndex"]), tree_size=checkpoint.size, log=checkpoint.origin
    )
    if log_key is None:
        return replace(
            found,
            missing="the checkpoint was checked with the log key the bundle names; pin the log's key (--log-key)",
        )
    return found


def _b64(value: object, *, part: str) -> bytes:
    if not isinstance(value, str):
        raise BundleInvalid("expected base64 text", part=part)
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise BundleInvalid(f"not base64: {exc}", part=part) from exc


# --- the SDK's own command line: no services, no CLI extra ---------------------------------------------
_TOO_DEEP = "JSON nested too deeply to read (arrays or objects inside each other beyond ~1,000 levels)"


def read_json_object(path: Path, *, what: str) -> dict[str, Any]:
    """The JSON object in ``path``; a one-line ``ContractError`` naming the file (``what``: "a bundle")."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ContractError(f"cannot read: {exc}", path=str(path)) from exc
    except json.JSONDecodeError as exc:
        raise ContractError(
            f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", path=str(path)
        ) from exc
    except RecursionError as exc:  # Python's parser recurses per level: an input error, not a verdict
        raise ContractError(_TOO_DEEP, path=str(path)) from exc
    if not isinstance(value, dict):
        raise ContractError(f"{what} is a JSON object", path=str(path))
    return value


def read_bundle(path: Path) -> dict[str, Any]:
    return read_json_object(path, what="a bundle")


def run(
    bundle_path: Path,
    trust_path: Path,
    *,
    log_key: str | None,
    witnesses: Sequence[str] = (),
    witness_quorum: int = 0,
    out: Any = None,
) -> int:
    """Verify one bundle file and print the verdict; returns the exit code."""
    out = out or sys.stdout
    bundle = read_bundle(bundle_path)
    trust = load_trust(trust_path)
    name = bundle.get("decisionId") or bundle_path.name
    try:
        report = verify_bundle(
            bundle,
            trust,
            log_key=read_log_key(log_key),
            witnesses=[str(read_log_key(w)) for w in witnesses],
            witness_quorum=witness_quorum,
        )
    except RecursionError as exc:  # parsed, but too deep for the checks that walk it
        raise ContractError(_TOO_DEEP, path=str(bundle_path)) from exc
    except VerificationError as exc:
        reason = str(exc).removeprefix(f"{exc.part}: ")
        print(f"NOT VERIFIED: {name} part={exc.part} ({type(exc).__name__}): {reason}", file=out)
        return EXIT_NOT_VERIFIED
    for line in report.lines():
        print(line, file=out)
    return EXIT_VERIFIED if report.complete else EXIT_NOT_VERIFIED


def read_log_key(value: str | None) -> str | None:
    """A log verifier key given as text, or as a file holding it."""
    if value is None:
        return None
    path = Path(value)
    if "+" not in value and path.is_file():
        return path.read_text(encoding="utf-8").strip()
    return value.strip()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m producers.evidence.bundle", description="Verify a blackbox evidence bundle offline."
    )
    parser.add_argument("bundle", type=Path, help="the bundle JSON file")
    parser.add_argument(
        "--trust", type=Path, required=True, help="trust store TOML or the signer's public key"
    )
    parser.add_argument("--log-key", default=None, help="the log's verifier key (text or a file holding it)")
    parser.add_argument(
        "--witness",
        action="append",
        default=[],
        help="a witness's cosignature verifier key (text or a file); repeat for several",
    )
    parser.add_argument(
        "--witness-quorum", type=int, default=None, help="how many of the --witness keys must have cosigned"
    )
    args = parser.parse_args(argv)
    quorum = len(args.witness) if args.witness_quorum is None else args.witness_quorum
    try:
        return run(
            args.bundle, args.trust, log_key=args.log_key, witnesses=args.witness, witness_quorum=quorum
        )
    except BlackboxError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_UNUSABLE


if __name__ == "__main__":
    raise SystemExit(main())

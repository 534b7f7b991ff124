"""verify_capture's fast paths give exactly what the reference definitions give.

The reference below is verify_capture written with the plain definitions only: RFC 8785 bytes from
the ``rfc8785`` package (no fast path), the manifest as ``omit_nulls(manifest_view(...))``, each
leaf as RFC 8785 of the entry's leaf fields, each content hash recomputed from scratch. Both run on
many captures — valid, structured-only, compacted, and randomly tampered ones, each tampered one
also re-signed so that the later checks (content, working set) are reached — and must agree on the
report or on the exception (type, ``part`` and message).
"""

from __future__ import annotations

import copy
import hashlib
import random
from collections import OrderedDict
from typing import Any

import pytest
from conftest import KEY_WINDOW_START, golden_signer, large_capture, load_example
from cryptography.exceptions import InvalidSignature

from producers.evidence import TrustStore, seal, verify_capture
from producers.evidence.canonical import (
    HASH_PREFIX,
    JsonHashCache,
    fast_json_hash,
    json_hash,
    normalize,
    omit_nulls,
    reference_canonical_json,
)
from producers.evidence.dsse import b64decode, b64encode, pae
from producers.evidence.keys import key_id_from_ref
from producers.evidence.manifest import MANIFEST_PAYLOAD_TYPE, manifest_view, normalized_manifest
from producers.evidence.merkle import (
    CONTEXT_SET_ALGORITHM,
    WORKING_SET_LEAF_KEYS,
    merkle_root,
    position_order,
)
from producers.evidence.parts import iter_parts
from producers.evidence.seal import SIGNATURE_ALGORITHM, SIGNATURE_PREFIX
from producers.evidence.trust import parse_time
from schemas.errors import (
    BlackboxError,
    ContentHashMismatch,
    ContractError,
    KeyNotTrusted,
    SignatureInvalid,
    UnknownAlgorithm,
)

SIGNER = golden_signer()


def _trust() -> TrustStore:
    store = TrustStore()
    store.add(SIGNER.public_raw, not_before=KEY_WINDOW_START)
    return store


def _reference_payload(capture: dict[str, Any]) -> bytes:
    return reference_canonical_json(omit_nulls(manifest_view(capture)))


def _reference_hash(ref: Any) -> str:
    content = ref.content
    if ref.field.kind == "text":
        if type(content) is not str:
            raise ContractError(f"{ref.label} is a text part, got {type(content).__name__}", path=ref.path)
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ContractError(f"{ref.label} is not valid Unicode text: {exc}", path=ref.path) from exc
        return HASH_PREFIX + hashlib.sha256(data).hexdigest()
    return HASH_PREFIX + hashlib.sha256(reference_canonical_json(content, path=ref.path)).hexdigest()


def _reference_leaves(entries: list[Any]) -> list[bytes]:
    return [
        reference_canonical_json(
            omit_nulls({key: entries[index].get(key) for key in WORKING_SET_LEAF_KEYS}),
            path=f"memoryState.workingSetEntries[{index}]",
        )
        for index in position_order(entries)
    ]


def reference_verify(capture: dict[str, Any], trust: TrustStore) -> tuple[Any, ...]:
    """The original verify_capture, step by step, on the reference definitions.

    The order of steps, including which of two canonicalization errors is reported, is the order
    verify_capture had before its fast paths (the module doc of producers.evidence.verify).
    """
    signature = capture.get("signature")
    if not isinstance(signature, dict):
        raise SignatureInvalid("the capture has no signature block", part="signature")
    if signature.get("algorithm") != SIGNATURE_ALGORITHM:
        raise UnknownAlgorithm(
            f"signature algorithm {signature.get('algorithm')!r} is not supported (only {SIGNATURE_ALGORITHM})",
            part="signature.algorithm",
        )
    memory = capture.get("memoryState")
    memory = memory if isinstance(memory, dict) else {}
    if memory.get("contextSetAlgorithm") != CONTEXT_SET_ALGORITHM:
        raise UnknownAlgorithm(
            f"context-set algorithm {memory.get('contextSetAlgorithm')!r} is not supported "
            f"(only {CONTEXT_SET_ALGORITHM})",
            part="memoryState.contextSetAlgorithm",
        )
    reference = signature.get("publicKeyRef")
    key_id = key_id_from_ref(reference)
    if key_id is None:
        raise KeyNotTrusted(f"publicKeyRef {reference!r} names no sha256:<hex> key id", part="key")
    captured_at = capture.get("capturedAt")
    try:
        signed_at = parse_time(captured_at if isinstance(captured_at, str) else None)
    except ValueError as exc:
        raise KeyNotTrusted(
            f"capturedAt {captured_at!r} is not an ISO-8601 time, so the key's window cannot be checked",
            part="key",
        ) from exc
    public_key = trust.check(key_id, signed_at)
    encoded = signature.get("signatureBytes")
    try:
        if not isinstance(encoded, str) or not encoded.startswith(SIGNATURE_PREFIX):
            raise ValueError("missing the base64: prefix")
        signature_bytes = b64decode(encoded[len(SIGNATURE_PREFIX) :])
    except ValueError as exc:
        raise SignatureInvalid(
            f"signatureBytes {encoded!r:.40} is not base64:<signature>: {exc}", part="signature"
        ) from exc
    entries = memory.get("workingSetEntries")
    entries = entries if isinstance(entries, list) else []
    try:
        # As the original does (payload.signing_payload): with a valid position order the leaves
        # are encoded first, so a leaf without a canonical form is the error reported.
        try:
            position_order(entries)
        except ContractError:
            pass
        else:
            _reference_leaves(entries)
        payload = _reference_payload(capture)
    except ContractError as exc:
        raise SignatureInvalid(
            f"the manifest has no canonical form, so it cannot be what was signed ({exc})", part="signature"
        ) from exc
    try:
        public_key.verify(signature_bytes, pae(MANIFEST_PAYLOAD_TYPE, payload))
    except InvalidSignature as exc:
        raise SignatureInvalid(
            f"the manifest signature does not verify with key {key_id}: a manifest field (metadata or "
            "a hash field) was changed after signing, or another key signed it",
            part="signature",
        ) from exc
    absent: list[str] = []
    checked = 0
    for ref in iter_parts(capture):
        recorded = ref.recorded_hash
        if ref.content is None:
            if recorded is not None:
                absent.append(ref.path)
            continue
        if recorded is None:
            raise ContentHashMismatch(
                f"{ref.label} is present but the signed manifest records no hash for it", part=ref.path
            )
        if not isinstance(recorded, str) or not recorded.startswith(HASH_PREFIX):
            raise UnknownAlgorithm(f"{ref.label}: hash {recorded!r:.40} is not sha256", part=ref.hash_path)
        try:
            computed = _reference_hash(ref)
        except ContractError as exc:
            raise ContentHashMismatch(f"{ref.label} cannot be what was hashed: {exc}", part=ref.path) from exc
        if computed != recorded:
            raise ContentHashMismatch(
                f"{ref.label} hashes to {computed}, the signed manifest says {recorded}", part=ref.path
            )
        checked += 1
    if memory.get("contextSetLeafCount") != len(entries):
        raise ContentHashMismatch(
            f"the working set has {len(entries)} entries, the manifest says {memory.get('contextSetLeafCount')!r}",
            part="memoryState.contextSetLeafCount",
        )
    try:
        root = HASH_PREFIX + merkle_root(_reference_leaves(entries)).hex()
    except ContractError as exc:
        raise ContentHashMismatch(
            f"the working set has no Merkle root: {exc}", part="memoryState.contextSetHash"
        ) from exc
    if root != memory.get("contextSetHash"):
        raise ContentHashMismatch(
            f"the working set's RFC 6962 root is {root}, the manifest says {memory.get('contextSetHash')}",
            part="memoryState.contextSetHash",
        )
    decision_id = capture.get("decisionId")
    return (key_id, tuple(absent), checked, decision_id if isinstance(decision_id, str) else None)


def _outcome(function: Any, capture: dict[str, Any], trust: TrustStore) -> tuple[Any, ...]:
    try:
        result = function(copy.deepcopy(capture), trust)
    except BlackboxError as exc:
        return ("error", type(exc).__name__, getattr(exc, "part", None), str(exc))
    if isinstance(result, tuple):
        return ("ok", *result)
    return ("ok", result.key_id, result.absent_parts, result.checked_parts, result.decision_id)


def _resign(capture: dict[str, Any]) -> dict[str, Any]:
    """``capture`` with a valid signature over whatever its manifest now is (when it has one)."""
    capture = copy.deepcopy(capture)
    try:
        payload = _reference_payload(capture)
    except (ContractError, RecursionError):
        return capture
    signature = capture.get("signature")
    if isinstance(signature, dict):
        signature["signatureBytes"] = SIGNATURE_PREFIX + b64encode(
            SIGNER.sign(pae(MANIFEST_PAYLOAD_TYPE, payload))
        )
    return capture


# --- random tampering ------------------------------------------------------------------------------
_ODD_VALUES: list[Any] = [
    None,
    0,
    1,
    1.0,
    -0.0,
    2.5,
    1.5e-5,
    1e21,
    1e16,
    2**53,
    2**53 - 1,
    -(2**60),
    True,
    False,
    "",
    "x",
    "é",
    "😂",
    "\x00blackbox:leaf\x00",
    "\ud800",
    [],
    [None, 1.0],
    {},
    {"😂": 1},
    {1: "non-string key"},
    {"a": None, "b": [None, {"c": None}]},
    (1, 2.0),
    OrderedDict(a=1),
    float("nan"),
    "sha256:" + "0" * 64,
]


def _slots(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _slots(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += _slots(item, (*path, index))
    return out


def _mutate(capture: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    capture = copy.deepcopy(capture)
    path = rng.choice(_slots(capture)[1:])
    holder: Any = capture
    for step in path[:-1]:
        holder = holder[step]
    last = path[-1]
    action = rng.randrange(5)
    if action == 0 and isinstance(holder, dict):
        del holder[last]
    elif action == 1 and isinstance(holder[last], str) and holder[last]:
        text = holder[last]
        position = rng.randrange(len(text))
        holder[last] = text[:position] + chr(ord(text[position]) ^ 1) + text[position + 1 :]
    elif action == 2 and isinstance(holder, dict):
        holder[rng.choice(["extra", "😂", "ä"])] = copy.deepcopy(rng.choice(_ODD_VALUES))
    else:
        holder[last] = copy.deepcopy(rng.choice(_ODD_VALUES))
    return capture


def _bases() -> list[dict[str, Any]]:
    example = seal(load_example(), SIGNER)
    large = seal(large_capture(), SIGNER)
    compacted = copy.deepcopy(large)
    for ref in iter_parts(compacted):
        ref.holder[ref.field.content_key] = None
    structured = copy.deepcopy(example)
    structured["agentConfiguration"].pop("systemPromptText", None)
    structured["executionTrace"]["toolCalls"][0].pop("output", None)
    floats = large_capture()
    floats["memoryState"]["workingSetEntries"][0]["retrievalScore"] = 1.0
    floats["input"]["requestPayload"]["amount"] = 2.0
    return [example, large, compacted, structured, seal(floats, SIGNER)]


@pytest.mark.parametrize("seed", range(6))
def test_fast_verify_equals_the_reference_on_tampered_captures(seed: int) -> None:
    rng = random.Random(seed)
    trust = _trust()
    bases = _bases()
    errors: set[str] = set()
    for base in bases:
        assert _outcome(verify_capture, base, trust) == _outcome(reference_verify, base, trust)
    for _ in range(60):
        capture = rng.choice(bases)
        for _ in range(rng.randrange(1, 4)):
            capture = _mutate(capture, rng)
        for candidate in (capture, _resign(capture)):
            fast = _outcome(verify_capture, candidate, trust)
            assert fast == _outcome(reference_verify, candidate, trust)
            errors.add(str(fast[1]))
    assert {"ContentHashMismatch", "SignatureInvalid"} <= errors


def test_every_content_part_tampered_and_resigned_names_the_same_part() -> None:
    trust = _trust()
    for base in _bases()[:2]:
        for ref in iter_parts(base):
            if ref.content is None:
                continue
            for value in ("changed", 1.0, {"x": 2**53}, ["\ud800"], None, 1.5e-5):
                capture = copy.deepcopy(base)
                target = next(r for r in iter_parts(capture) if r.path == ref.path and r.field == ref.field)
                target.holder[target.field.content_key] = value
                for candidate in (capture, _resign(capture)):
                    assert _outcome(verify_capture, candidate, trust) == _outcome(
                        reference_verify, candidate, trust
                    )


# --- the pieces --------------------------------------------------------------------------------------
def test_normalized_manifest_equals_normalize_of_the_view() -> None:
    rng = random.Random(11)
    bases = _bases()
    odd: list[dict[str, Any]] = []
    for base in bases[:2]:
        variant = copy.deepcopy(base)
        variant["memoryState"] = OrderedDict(variant["memoryState"])  # a dict subclass section
        odd.append(variant)
        variant = copy.deepcopy(base)
        variant["executionTrace"]["toolCalls"].append(None)  # a record that is not an object
        variant["executionTrace"]["toolCalls"].append([1.0, None])
        odd.append(variant)
        variant = copy.deepcopy(base)
        variant["executionTrace"]["toolCalls"][0]["input"] = {"n": 2**60}  # content: stripped anyway
        variant["input"]["requestPayload"] = float("nan")
        odd.append(variant)
        variant = copy.deepcopy(base)
        variant["agentConfiguration"] = "not an object"
        variant["signature"] = ["not", "an", "object"]
        odd.append(variant)
    captures = bases + odd
    for _ in range(300):
        captures.append(_mutate(rng.choice(bases + odd), rng))
    for capture in captures:
        fast = normalized_manifest(capture)
        expected = normalize(manifest_view(capture), omit_null_members=True)
        expected = expected if isinstance(expected, dict) else None
        assert fast == expected
        if fast is not None:
            assert repr(fast) == repr(expected)  # same key order and types (1 vs 1.0 vs True)


def test_fast_json_hash_is_json_hash_or_none() -> None:
    rng = random.Random(5)
    values: list[Any] = list(_ODD_VALUES)
    for ref in iter_parts(seal(large_capture(), SIGNER)):
        if ref.content is not None and ref.field.kind == "json":
            values.append(ref.content)
    values += [_mutate({"v": copy.deepcopy(rng.choice(values))}, rng) for _ in range(200)]
    taken = 0
    for value in values:
        fast = fast_json_hash(value)
        try:
            reference: str | None = HASH_PREFIX + hashlib.sha256(reference_canonical_json(value)).hexdigest()
        except (ContractError, RecursionError):
            reference = None
        if fast is not None:
            taken += 1
            assert fast == reference == json_hash(value)
    assert taken > len(values) // 2


def test_json_hash_cache_never_returns_another_values_hash() -> None:
    cache = JsonHashCache(min_chars=0)
    look_alikes: list[Any] = [
        {"a": 1, "b": [1, 2]},
        {"a": 1.0, "b": [1, 2]},
        {"a": True, "b": [1, 2]},
        {"b": [1, 2], "a": 1},
        {"a": 1, "b": (1, 2)},
        {"a": -0.0},
        {"a": 0.0},
        {"a": 0},
        {"a": "1"},
        {"a": 1.5e-5},
        OrderedDict(a=1, b=[1, 2]),
        [1, 2],
        (1, 2),
    ]
    for _ in range(2):  # second round: every value hits its entry
        for value in look_alikes:
            assert cache.json_hash(value) == json_hash(value)
    for value in ({"a": 2**60}, {"a": float("nan")}, {1: "x"}):
        for _ in range(2):
            with pytest.raises(ContractError):
                cache.json_hash(value)

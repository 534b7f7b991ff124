"""The faster ``index_manifest_json`` (one encoder, the sealing key derived once, ids hashed once per
capture; since then printed by the native core, ``IndexViewWriter``) writes the same ``manifest_json``
bytes as the implementation it replaced, kept below as ``_reference_index_manifest_json``: ingest
compares rows for idempotency, and rows written before must read the same. Both ways are checked:
with the core (``BLACKBOX_NATIVE=require``) and with the Python reference (``off``).
"""

from __future__ import annotations

import base64
import copy
import hashlib
import hmac
import json
import random
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from consumers.ingest.prepare import _remembering
from consumers.privacy import manifest as privacy_manifest
from consumers.privacy.ids import IndexIds
from consumers.privacy.manifest import IDENTIFIERS, INDEX_VIEW, index_manifest_json, signed_manifest
from producers import native
from producers.avro import decode  # what ingest decodes with
from producers.evidence.manifest import manifest_view
from schemas.codec import encode_capture

TESTS = Path(__file__).resolve().parents[2]
# the captures ingest tests make, and the seeded generator the native core is proven with
for _folder in ("consumers/ingest", "producers/native", "schemas"):
    if str(TESTS / _folder) not in sys.path:
        sys.path.insert(0, str(TESTS / _folder))
from ingest_testdata import make_capture  # noqa: E402
from native_testing import native_mode  # noqa: E402
from test_native_canonical_captures import generated_capture  # noqa: E402

KEYS = (IndexIds(b"k" * 32), IndexIds(bytes(range(32))), IndexIds(None))
GENERATED = 2_000


def _reference_index_manifest_json(capture: Mapping[str, Any], ids: IndexIds) -> str:
    """``index_manifest_json`` as released before this change (the bytes every existing row holds)."""
    view = manifest_view(capture)
    view["signature"] = capture.get("signature")
    if ids.key is not None:
        raw = {}
        for section, field in IDENTIFIERS:
            part = view.get(section)
            value = part.get(field) if isinstance(part, dict) else None
            if isinstance(part, dict) and isinstance(value, str) and value:
                raw[f"{section}.{field}"] = value
                view[section] = part = dict(part)
                part[field] = ids.of(value)
        if raw:
            view[INDEX_VIEW] = {"sealed": _reference_seal(ids.key, str(capture.get("decisionId") or ""), raw)}
    return json.dumps(view, ensure_ascii=False, separators=(",", ":"))


def _reference_seal(key: bytes, decision_id: str, raw: dict[str, str]) -> str:
    plain = json.dumps(raw, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8")
    sealing = hmac.new(key, b"blackbox index manifest sealed ids v1", hashlib.sha256).digest()
    aad = decision_id.encode("utf-8")
    nonce = hmac.new(sealing, aad + b"\x1f" + plain, hashlib.sha256).digest()[:12]
    return base64.b64encode(nonce + AESGCM(sealing).encrypt(nonce, plain, aad)).decode("ascii")


_ODD_IDS: tuple[Any, ...] = (
    None,
    "",
    "usr_42",
    "Zoë Ångström",
    '用户\u2028\x00\x1f"\\',
    "\ud83d\ude00 emoji",
    "x" * 500,
    7,
    ["not", "a", "string"],
)


def _variants(rng: random.Random, capture: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The capture, then with odd origin ids, odd numbers, and sections that are not objects."""
    yield capture
    odd = copy.deepcopy(capture)
    inp = odd.get("input")
    if isinstance(inp, dict):
        inp["originUserId"] = rng.choice(_ODD_IDS)
        inp["originSessionId"] = rng.choice(_ODD_IDS)
        if rng.random() < 0.3:
            inp.pop("originSessionId")
    sampling = (odd.get("agentConfiguration") or {}).get("samplingParameters")
    if isinstance(sampling, dict):
        sampling["temperature"] = rng.choice([1e-07, 1e16, 0.1 + 0.2, -0.0, float("inf"), 2**60])
    yield odd
    broken = copy.deepcopy(capture)
    broken["input"] = rng.choice([None, "input as text", ["a"], {}])
    yield broken


def _corpus() -> Iterator[dict[str, Any]]:
    rng = random.Random(0x5EA1)
    for i in range(60):
        level = "structured-only" if i % 4 == 3 else "full"
        made = make_capture(i, tag="fast", size=rng.choice([0, 2_000, 20_000]), level=level)
        made["signature"] = {"algorithm": "ed25519", "publicKeyRef": "did:x#k1", "signatureBytes": "c2ln"}
        yield from _variants(rng, made)
        yield from _variants(rng, decode(encode_capture(made)).value)
    for index in range(GENERATED):
        yield from _variants(rng, generated_capture(index))


def _outcome(make: Callable[..., str], *args: Any, **kwargs: Any) -> tuple[str, str]:
    try:
        return "ok", make(*args, **kwargs)
    except Exception as exc:  # the same error either way counts as the same outcome
        return "error", type(exc).__name__


@pytest.mark.parametrize("mode", ["require", "off"])
def test_index_manifest_json_writes_the_released_bytes_for_every_capture(mode: str) -> None:
    checked = differing = answered = 0
    with native_mode(mode):
        writer = privacy_manifest._view_writer()
        assert (writer is None) == (mode == "off"), "the native core has no IndexViewWriter: rebuild it"
        for capture in _corpus():
            for ids in KEYS:
                expected = _outcome(_reference_index_manifest_json, capture, ids)
                got = _outcome(index_manifest_json, capture, ids)
                memo = _remembering(ids.of) if ids.key else None
                remembered = _outcome(index_manifest_json, capture, ids, hash_id=memo)
                checked += 1
                differing += got != expected or remembered != expected
                assert got == expected, capture.get("decisionId")
                assert remembered == expected, capture.get("decisionId")
            if writer is not None:
                answered += writer.json(capture, {}, [("signature", capture.get("signature"))]) is not None
    assert checked > 3 * 3 * GENERATED and differing == 0
    if mode == "require":  # the core must answer, not decline its way through the comparison (it
        # declines ids with lone surrogates, ints beyond i64 and non-str keys: ~7% of this corpus)
        assert answered > 0.9 * checked / len(KEYS)


def test_a_view_sealed_by_the_released_code_unseals_the_same_now() -> None:
    ids = KEYS[0]
    for capture in generated_capture(1), generated_capture(2):
        capture["input"]["originUserId"] = "cus_jane"
        old = _reference_index_manifest_json(capture, ids)
        assert signed_manifest(old, ids) == signed_manifest(index_manifest_json(capture, ids), ids)


def test_the_comparison_fails_when_the_bytes_change(monkeypatch: pytest.MonkeyPatch) -> None:
    # Proof the test above can fail: an encoder that spaces its separators differs on every capture.
    monkeypatch.setattr(privacy_manifest, "_dumps", json.JSONEncoder(ensure_ascii=False).encode)
    capture = generated_capture(0)
    with native_mode("off"):
        assert index_manifest_json(capture, KEYS[0]) != _reference_index_manifest_json(capture, KEYS[0])


def test_the_native_comparison_fails_when_the_rules_change(monkeypatch: pytest.MonkeyPatch) -> None:
    # The same proof for the core: a writer built from rules that keep the content differs.
    top_defaults, strips = privacy_manifest.manifest_rules()
    keeping = [(name, frozenset[str](), lists, defaults) for name, _drop, lists, defaults in strips]
    monkeypatch.setattr(privacy_manifest, "manifest_rules", lambda: (top_defaults, keeping))
    # a memo of its own, built from the patched rules; the module's own is back after the test
    monkeypatch.setattr(privacy_manifest, "_view_writers", native.PerCore(privacy_manifest._new_view_writer))
    capture = make_capture(1, tag="fast", size=2_000)
    with native_mode("require"):
        assert index_manifest_json(capture, KEYS[0]) != _reference_index_manifest_json(capture, KEYS[0])

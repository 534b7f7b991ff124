"""Whole captures, native scan vs Python detectors: redaction gives the same capture and records.

Seeded captures of every shape the schema tests build (the example, busy, hard, padded and
structured-only captures) have personal data, near-misses and Unicode neighbours written into every
content part (text parts and each string of the JSON parts); each is redacted with the native core
(``BLACKBOX_NATIVE=require``) and with the Python reference (``BLACKBOX_NATIVE=off``), by the
built-in detectors and by the built-in ones plus the runtime's own patterns: the redacted capture,
the redaction records, the placeholders, the originals, their hashes, the remapped spans and
:meth:`Redactor.protect`'s output are identical.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable
from typing import Any

import pytest
from native_testing import native_mode, outcome
from schemas_testdata import busy_capture, example, hard_capture, padded_example, structured_only_capture
from test_native_pii import NEIGHBOURS, pii_text

from producers.evidence import parts as parts_module
from producers.evidence.canonical import JsonHashCache
from producers.evidence.parts import iter_parts
from producers.privacy import protect as protect_module
from producers.privacy.detectors import Detector, PatternDetector, builtin_detectors
from producers.privacy.protect import Redactor
from producers.privacy.redact import redact_capture

BASES: list[Callable[[], dict[str, Any]]] = [
    example,
    busy_capture,
    hard_capture,
    padded_example,
    structured_only_capture,
]
CAPTURES = 300
DETECTOR_SETS: dict[str, Callable[[], list[Detector]]] = {
    "builtin": lambda: list(builtin_detectors()),
    "builtin+patterns": lambda: [
        *builtin_detectors(),
        PatternDetector({"EMPLOYEE": r"EMP-\d{6}", "SHORT": r"\b\d{3}\b", "WORD": "refund"}),
    ],
}


@pytest.fixture(autouse=True)
def _fixed_salt_and_fresh_hash_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """The keyed hashes take a fresh salt per capture: fixed here, so both modes can be compared;
    and the repeated-part hash cache starts empty (it would hand one mode's hash to the other)."""
    monkeypatch.setattr(protect_module, "new_salt", lambda: b"\x01" * 16)
    monkeypatch.setattr(parts_module, "_REPEATED", JsonHashCache(min_chars=256))


def _mixed(rng: random.Random, text: str) -> str:
    """``text`` with personal data spliced in (or replaced by it)."""
    if rng.random() < 0.3:
        return pii_text(rng)
    at = rng.randint(0, len(text))
    return text[:at] + rng.choice(NEIGHBOURS) + pii_text(rng, pieces=3) + rng.choice(NEIGHBOURS) + text[at:]


def _json(rng: random.Random, value: Any) -> Any:
    if type(value) is str:
        return _mixed(rng, value) if rng.random() < 0.6 else value
    if type(value) is list:
        return [_json(rng, item) for item in value] + ([pii_text(rng)] if rng.random() < 0.2 else [])
    if type(value) is dict:
        return {key: _json(rng, item) for key, item in value.items()}
    return value


def capture_with_pii(index: int) -> dict[str, Any]:
    """Capture ``index`` of the seeded sequence: a base capture, personal data in its content parts."""
    rng = random.Random(0x5CA9 + index)
    capture = BASES[index % len(BASES)]()
    for ref in list(iter_parts(capture)):
        content = ref.content
        if content is None:
            continue
        if ref.field.kind == "text" and type(content) is str:
            ref.holder[ref.field.content_key] = _mixed(rng, content)
        elif ref.field.kind != "text":
            ref.holder[ref.field.content_key] = _json(rng, content)
    return capture


def _redacted(capture: dict[str, Any], detectors: list[Detector]) -> tuple[str, str]:
    """``repr`` of the redaction and JSON of the protected capture (or what either raised)."""
    redaction = outcome(lambda: redact_capture(copy.deepcopy(capture), detectors, owned=False))
    redactor = Redactor(detectors=detectors, vault=None, label="test")
    protected = outcome(lambda: redactor.protect(copy.deepcopy(capture), owned=True))
    return repr(redaction), json.dumps(protected, ensure_ascii=False)


@pytest.mark.parametrize("detector_set", list(DETECTOR_SETS))
def test_generated_captures_redact_identically_both_ways(detector_set: str) -> None:
    captures = [capture_with_pii(index) for index in range(CAPTURES)]
    detectors = DETECTOR_SETS[detector_set]()
    with native_mode("require"):
        natively = [_redacted(capture, detectors) for capture in captures]
    with native_mode("off"):
        reference = [_redacted(capture, detectors) for capture in captures]
    redacted = 0
    for index, (ours, theirs) in enumerate(zip(natively, reference, strict=True)):
        assert ours[0] == theirs[0], f"capture {index}: the redaction differs"
        assert ours[1] == theirs[1], f"capture {index}: the protected capture differs"
        redacted += '"piiRedacted": true' in ours[1]
    # they do carry personal data (not the structured-only ones; some hard ones refuse to hash)
    assert redacted > CAPTURES * 0.6


def test_a_capture_without_personal_data_is_left_alone_both_ways() -> None:
    for make in BASES:
        with native_mode("require"):
            natively = _redacted(make(), list(builtin_detectors()))
        with native_mode("off"):
            reference = _redacted(make(), list(builtin_detectors()))
        assert natively == reference

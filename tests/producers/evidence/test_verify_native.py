"""verify_capture gives the same verdict with the native core as with the Python reference.

``verify_capture`` calls the core's ``text_hash`` / ``json_hash`` itself for each content part and
falls back to the Python paths wherever the core declines (a lone surrogate, an integer beyond
2**53 - 1, a float Python prints differently, ...). Every outcome - the report, or the exception's
type, part and message - must be the one ``BLACKBOX_NATIVE=off`` gives and the one the reference
verifier of ``test_verify_fastpath`` gives. The core must load here (``require``): a missing build
fails these tests rather than comparing Python with itself.
"""

from __future__ import annotations

import copy
import os
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from test_verify_fastpath import _ODD_VALUES, _bases, _mutate, _outcome, _resign, _trust, reference_verify

from producers import native
from producers.evidence import verify_capture
from producers.evidence.parts import iter_parts


@contextmanager
def _native(mode: str) -> Iterator[None]:
    before = os.environ.get("BLACKBOX_NATIVE")
    os.environ["BLACKBOX_NATIVE"] = mode
    native.reset()
    try:
        if mode == "require":
            assert native.core() is not None
        yield
    finally:
        if before is None:
            os.environ.pop("BLACKBOX_NATIVE", None)
        else:
            os.environ["BLACKBOX_NATIVE"] = before
        native.reset()


def _verdicts(capture: dict[str, Any]) -> list[tuple[Any, ...]]:
    trust = _trust()
    out = []
    for mode in ("require", "off"):
        with _native(mode):
            out.append(_outcome(verify_capture, capture, trust))
    with _native("off"):
        out.append(_outcome(reference_verify, capture, trust))
    return out


def _assert_one_verdict(capture: dict[str, Any]) -> tuple[Any, ...]:
    natively, python, reference = _verdicts(capture)
    assert natively == python == reference
    return natively


def _every_part_set_to(value: Any) -> Iterator[dict[str, Any]]:
    """Each base capture with one present content part replaced by ``value``, re-signed."""
    for base in _bases():
        for number, ref in enumerate(iter_parts(base)):
            if ref.content is None:
                continue
            changed = copy.deepcopy(base)
            target = list(iter_parts(changed))[number]
            target.holder[target.field.content_key] = copy.deepcopy(value)
            yield _resign(changed)


def test_untouched_captures_verify_alike() -> None:
    for base in _bases():
        assert _assert_one_verdict(base)[0] == "ok"


@pytest.mark.parametrize(
    "value",
    [
        "\ud800",
        "text \udfff tail",
        2**53,
        {"n": -(2**60)},
        [1.5e-5],
        float("nan"),
        1e21,
        "日本語 😂",
        b"bytes",
    ],
    ids=repr,
)
def test_a_part_the_core_may_decline_gets_the_reference_verdict(value: Any) -> None:
    verdicts = [_assert_one_verdict(capture) for capture in _every_part_set_to(value)]
    assert verdicts  # every base has present parts


@pytest.mark.parametrize("seed", range(3))
def test_tampered_captures_verify_alike(seed: int) -> None:
    rng = random.Random(1000 + seed)
    bases = _bases()
    for _ in range(60):
        capture = _mutate(rng.choice(bases), rng)
        for candidate in (capture, _resign(capture)):
            _assert_one_verdict(candidate)


def test_odd_values_cover_what_the_core_declines() -> None:
    # the decline cases above only mean something if the core really declines some of them
    with _native("require"):
        core = native.core()
        assert core is not None
        declined: Callable[[Any], bool] = lambda v: core.json_hash(v) is None  # noqa: E731
        assert declined(2**53) and declined(float("nan"))
        assert core.text_hash("\ud800") is None
        assert not declined({"a": 1}) and core.text_hash("a") is not None
        assert any(declined(v) for v in _ODD_VALUES)

"""The built-in detectors through the native core, with the Python detectors as fallback.

:func:`find_all` searches one string, :func:`find_in_values` every string of a capture in one call.
With the native core loaded (:mod:`producers.native`, ``src/pii.rs``) the built-in detectors of
:mod:`producers.privacy.detectors` run there, off the GIL, proven to find exactly what those classes
find; libphonenumber still confirms phone numbers here. Any other detector, a string the core
declines, or no core at all: the Python detectors run. Either way one overlap rule decides.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from producers import native
from producers.privacy.detectors import (
    CardDetector,
    Detector,
    EmailDetector,
    Finding,
    IbanDetector,
    IpDetector,
    PhoneDetector,
)

__all__ = ["find_all", "find_in_values"]


def find_all(text: str, detectors: Sequence[Detector]) -> list[Finding]:
    """Every detector's findings, overlaps resolved: earliest first, then longest, then detector order.

    The built-in detectors run in the native core when it is loaded (:func:`find_in_values`); any
    other detector runs here, and the overlap rule then sees all of their findings together.
    """
    plan = _native_plan(detectors) if type(text) is str else None  # the core takes exact str only
    if plan is not None:
        hits = plan.scan([text], plan.mask)
        if hits is not None:
            candidates = _native_candidates(plan, text, hits[0][3]) if hits else []
            return _resolve(candidates + _candidates(text, plan.others))
    return _resolve(_candidates(text, enumerate(detectors)))


def find_in_values(
    values: Sequence[Any], detectors: Sequence[Detector]
) -> list[dict[int, list[Finding]]] | None:
    """:func:`find_all` of every string in ``values`` in one native call, or None where the native
    core is not loaded or a detector is not a built-in one (the caller then uses :func:`find_all`).

    A value is a ``str`` or a JSON value whose strings are taken as ``producers.privacy.redact`` walks
    them: ``dict`` values (not keys) and ``list`` items in order, exact types only. For each value:
    the findings of each string that has any, by the string's ordinal in that walk.
    """
    plan = _native_plan(detectors)
    if plan is None or plan.others:
        return None
    hits = plan.scan(values, plan.mask)
    if hits is None:
        return None
    found: list[dict[int, list[Finding]]] = [{} for _ in values]
    for index, ordinal, text, spans in hits:
        findings = _resolve(_native_candidates(plan, text, spans))
        if findings:
            found[index][ordinal] = findings
    return found


_Candidate = tuple[int, int, int, Finding]  # start, -end, detector rank: the overlap rule's order

# The native scan's kind codes (producers/native/src/pii.rs), by the built-in detector they stand for.
_NATIVE_CODES: dict[type, int] = {
    EmailDetector: 0,
    IbanDetector: 1,
    CardDetector: 2,
    IpDetector: 3,
    PhoneDetector: 4,
}
_NATIVE_KINDS = ("EMAIL", "IBAN", "CARD", "IP")
_PHONE_CODE = 4


@dataclass(frozen=True, slots=True)
class _NativePlan:
    """Which detectors the native scan stands in for (exact built-in types), and their ranks."""

    scan: Callable[[Sequence[Any], int], list[tuple[int, int, str, list[tuple[int, int, int]] | None]] | None]
    mask: int
    ranks: tuple[tuple[int, ...], ...]  # by kind code (phone excluded): ranks of the detectors of the kind
    phones: tuple[tuple[int, PhoneDetector], ...]
    builtins: tuple[tuple[int, Detector], ...]  # the Python detectors of a string the core declines
    others: tuple[tuple[int, Detector], ...]  # detectors the core does not know


# The last plan made, with the core and the detectors it was made for: a redactor asks for the same
# detectors with every capture. One read, one write: another thread may replace it meanwhile.
_last_plan: tuple[Any, tuple[Detector, ...], _NativePlan | None] | None = None


def _native_plan(detectors: Sequence[Detector]) -> _NativePlan | None:
    global _last_plan
    core = native.core()
    last = _last_plan
    if (
        last is not None
        and last[0] is core
        and len(last[1]) == len(detectors)
        and all(a is b for a, b in zip(last[1], detectors, strict=True))
    ):
        return last[2]
    plan = _make_plan(core, detectors)
    _last_plan = (core, tuple(detectors), plan)
    return plan


def _make_plan(core: Any, detectors: Sequence[Detector]) -> _NativePlan | None:
    codes = [_NATIVE_CODES.get(type(detector)) for detector in detectors]
    if all(code is None for code in codes) or core is None:
        return None
    ranks: list[list[int]] = [[] for _ in _NATIVE_KINDS]
    phones: list[tuple[int, PhoneDetector]] = []
    builtins: list[tuple[int, Detector]] = []
    others: list[tuple[int, Detector]] = []
    mask = 0
    for rank, (detector, code) in enumerate(zip(detectors, codes, strict=True)):
        if code is None:
            others.append((rank, detector))
            continue
        mask |= 1 << code
        builtins.append((rank, detector))
        if isinstance(detector, PhoneDetector):
            phones.append((rank, detector))
        else:
            ranks[code].append(rank)
    return _NativePlan(
        core.pii_scan, mask, tuple(map(tuple, ranks)), tuple(phones), tuple(builtins), tuple(others)
    )


def _native_candidates(
    plan: _NativePlan, text: str, spans: list[tuple[int, int, int]] | None
) -> list[_Candidate]:
    """The built-in detectors' findings from the native spans; None: declined, Python decides."""
    if spans is None:
        return _candidates(text, plan.builtins)
    found: list[_Candidate] = []
    for start, end, code in spans:
        if code == _PHONE_CODE:
            for rank, phone in plan.phones:
                found.extend((f.start, -f.end, rank, f) for f in phone.confirm(text, start, end))
        else:
            finding = Finding(start, end, _NATIVE_KINDS[code])
            found.extend((start, -end, rank, finding) for rank in plan.ranks[code])
    return found


def _candidates(text: str, ranked: Iterable[tuple[int, Detector]]) -> list[_Candidate]:
    return [
        (finding.start, -finding.end, rank, finding)
        for rank, detector in ranked
        for finding in detector.find(text)
        if 0 <= finding.start < finding.end <= len(text)
    ]


def _resolve(candidates: list[_Candidate]) -> list[Finding]:
    """The overlap rule: earliest first, then longest, then detector order; overlapped ones dropped."""
    candidates.sort(key=lambda item: item[:3])
    kept: list[Finding] = []
    end = 0
    for _, _, _, finding in candidates:
        if finding.start >= end:
            kept.append(finding)
            end = finding.end
    return kept

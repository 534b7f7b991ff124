"""What counts as personal data in a string: small detectors behind one Protocol.

A detector returns :class:`Finding` spans (``str`` indices, end exclusive) and a *kind* that names
the placeholder (``[EMAIL_1]``). The built-in ones find candidates with a fast regular expression
and keep only those a real check confirms, so a date is not a phone number and a 16-digit order
number is not a card:

- ``EMAIL``: ``local@domain.tld``;
- ``PHONE``: digit runs with separators, confirmed by libphonenumber (``phonenumbers``) with strict
  grouping; international numbers (``+44 ...``) in any region, national ones in ``region``;
- ``CARD``: 13-19 digits (spaces or dashes allowed) passing the Luhn check;
- ``IBAN``: country code, check digits and 11-30 alphanumerics passing the ISO 13616 mod-97 check;
- ``IP``: IPv4 and IPv6 addresses that :mod:`ipaddress` parses.

Digits are ASCII digits (``[0-9]``: Unicode-aware ``\\d`` costs several times more per character).
This runs on the producer's worker for every capture: each pattern starts with a character class
(the regex engine then skips ahead in C) and boundaries are checked in Python on the few candidates.
These classes are the reference: :mod:`producers.privacy.native_scan` runs a set of detectors (the
built-in ones in the native core when it is loaded) and resolves their overlaps.

:class:`PatternDetector` runs the runtime's own regular expressions; :class:`PresidioDetector`
adapts Microsoft Presidio's analyzer (``agent-blackbox[presidio]``).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from schemas.errors import BlackboxError, ContractError

__all__ = [
    "CardDetector",
    "Detector",
    "EmailDetector",
    "Finding",
    "IbanDetector",
    "IpDetector",
    "PatternDetector",
    "PhoneDetector",
    "PresidioDetector",
    "builtin_detectors",
    "iban_valid",
    "luhn_valid",
]

_KIND = re.compile(r"^[A-Z][A-Z0-9_]*$")


@dataclass(frozen=True, slots=True)
class Finding:
    """``text[start:end]`` is personal data of ``kind`` (an upper-case name, e.g. ``EMAIL``)."""

    start: int
    end: int
    kind: str


class Detector(Protocol):
    """Finds personal data in one string. Must not mutate anything; may be called from any thread."""

    name: str

    def find(self, text: str) -> Iterable[Finding]: ...


class EmailDetector:
    """Around each ``@``: the longest local part before it and domain after it, then a full check."""

    name = "email"
    _LOCAL = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._%+-")
    _DOMAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-")
    _ADDRESS = re.compile(
        r"[A-Za-z0-9._%+-]{1,64}@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24}"
    )

    def find(self, text: str) -> Iterable[Finding]:
        found = []
        size = len(text)
        at = text.find("@")
        while at != -1:
            start = at
            while start > 0 and text[start - 1] in self._LOCAL and at - start < 64:
                start -= 1
            end = at + 1
            while end < size and text[end] in self._DOMAIN and end - at < 255:
                end += 1
            while end > at + 1 and text[end - 1] in ".-":  # a sentence's full stop, a dash
                end -= 1
            match = self._ADDRESS.fullmatch(text, start, end)
            if match is not None and not _word_at(text, end):
                found.append(Finding(start, end, "EMAIL"))
            at = text.find("@", max(end, at + 1))
        return found


class PhoneDetector:
    """Candidates by regex, each confirmed by libphonenumber's matcher (strict grouping)."""

    name = "phone"
    # Starts with a character class, so the scan skips ahead in C; boundaries are checked after.
    _CANDIDATE = re.compile(r"[+(0-9][0-9 \t\u00a0().+-]{5,24}[0-9]")
    _DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}|[0-9]{2}[./-][0-9]{2}[./-][0-9]{4}")

    def __init__(self, region: str = "US") -> None:
        import phonenumbers

        self.region = region
        self._phonenumbers = phonenumbers

    def find(self, text: str) -> Iterable[Finding]:
        found: list[Finding] = []
        for candidate in self._CANDIDATE.finditer(text):
            start, end = candidate.span()
            if (start and (text[start - 1].isalnum() or text[start - 1] in "_+")) or _word_at(text, end):
                continue
            raw = candidate.group()
            digits = sum(ch.isdigit() for ch in raw)
            if not 7 <= digits <= 15 or self._DATE.fullmatch(raw):
                continue
            found.extend(self.confirm(text, start, end))
        return found

    def confirm(self, text: str, start: int, end: int) -> list[Finding]:
        """The phone numbers libphonenumber finds in the candidate ``text[start:end]``."""
        lib = self._phonenumbers
        matches = lib.PhoneNumberMatcher(text[start:end], self.region, leniency=lib.Leniency.STRICT_GROUPING)
        return [Finding(start + m.start, start + m.end, "PHONE") for m in matches]


def _word_at(text: str, index: int) -> bool:
    return index < len(text) and (text[index].isalnum() or text[index] == "_")


def _word_before(text: str, index: int) -> bool:
    return index > 0 and (text[index - 1].isalnum() or text[index - 1] == "_")


def luhn_valid(digits: str) -> bool:
    """The Luhn (mod 10) check of a string of ASCII digits."""
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if position % 2:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


class CardDetector:
    name = "card"
    _CANDIDATE = re.compile(r"[0-9][0-9 -]{11,22}[0-9]")

    def find(self, text: str) -> Iterable[Finding]:
        found = []
        for candidate in self._CANDIDATE.finditer(text):
            start, end = candidate.span()
            if (start and text[start - 1] in "0123456789-") or (
                end < len(text) and text[end] in "0123456789-"
            ):
                continue
            raw = candidate.group()
            if "  " in raw or "--" in raw or " -" in raw or "- " in raw:
                continue  # one separator between digit groups, as cards are written
            digits = raw.replace(" ", "").replace("-", "")
            if 13 <= len(digits) <= 19 and luhn_valid(digits):
                found.append(Finding(start, end, "CARD"))
        return found


def iban_valid(compact: str) -> bool:
    """The ISO 13616 check of an IBAN without spaces: rotate four, letters to numbers, mod 97 == 1."""
    if not 15 <= len(compact) <= 34 or not compact[:2].isalpha() or not compact[2:4].isdigit():
        return False
    rotated = compact[4:] + compact[:4]
    try:
        number = int("".join(str(int(ch, 36)) for ch in rotated))
    except ValueError:
        return False
    return number % 97 == 1


class IbanDetector:
    """Greedy candidates (grouped by spaces or not), shortened group by group until one checks."""

    name = "iban"
    _CANDIDATE = re.compile(r"[A-Z][A-Z][0-9][0-9](?: ?[A-Z0-9]){11,30}")

    def find(self, text: str) -> Iterable[Finding]:
        found = []
        for candidate in self._CANDIDATE.finditer(text):
            if _word_before(text, candidate.start()):
                continue
            raw = candidate.group()
            end = len(raw)
            while end >= 15:
                if iban_valid(raw[:end].replace(" ", "")):
                    found.append(Finding(candidate.start(), candidate.start() + end, "IBAN"))
                    break
                cut = raw.rfind(" ", 0, end)  # drop a trailing group (a word that followed it)
                end = cut if cut >= 15 else end - 1
        return found


class IpDetector:
    name = "ip"
    _V4 = re.compile(r"[0-9][0-9]?[0-9]?\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}")
    _V6_CHARS = frozenset("0123456789abcdefABCDEF:.")

    def find(self, text: str) -> Iterable[Finding]:
        found = []
        if "." in text:
            for m in self._V4.finditer(text):
                start, end = m.span()
                if (start and (text[start - 1] == "." or _word_before(text, start))) or _word_at(text, end):
                    continue
                if end + 1 < len(text) and text[end] == "." and text[end + 1].isdigit():
                    continue
                if _parses(m.group(), ipaddress.IPv4Address):
                    found.append(Finding(start, end, "IP"))
        if "::" in text or text.count(":") >= 2:
            found.extend(self._v6(text))
        return found

    def _v6(self, text: str) -> list[Finding]:
        """Runs of hex digits, colons and dots around each colon; :mod:`ipaddress` decides."""
        found = []
        chars, size = self._V6_CHARS, len(text)
        colon = text.find(":")
        while colon != -1:
            if (colon + 1 >= size or text[colon + 1] not in chars) and (
                not colon or text[colon - 1] not in chars
            ):
                colon = text.find(":", colon + 1)  # "key": value, 12:30 h - nothing an address needs
                continue
            start = colon
            while start > 0 and text[start - 1] in chars and colon - start < 40:
                start -= 1
            end = colon
            while end < size and text[end] in chars and end - start < 46:
                end += 1
            while end > colon and text[end - 1] == ".":  # a sentence's full stop
                end -= 1
            candidate = text[start:end]
            if (
                candidate.count(":") >= 2
                and not _word_before(text, start)
                and not _word_at(text, end)
                and (end >= size or text[end] != ":")
                and _parses(candidate, ipaddress.IPv6Address)
            ):
                found.append(Finding(start, end, "IP"))
            colon = text.find(":", max(end, colon + 1))
        return found


def _parses(text: str, kind: type[ipaddress.IPv4Address] | type[ipaddress.IPv6Address]) -> bool:
    try:
        kind(text)
    except ValueError:
        return False
    return True


class PatternDetector:
    """The runtime's own regular expressions, each with the kind its placeholder names."""

    name = "patterns"

    def __init__(
        self, patterns: Mapping[str, str | re.Pattern[str]] | Sequence[str | re.Pattern[str]]
    ) -> None:
        items = patterns.items() if isinstance(patterns, Mapping) else (("CUSTOM", p) for p in patterns)
        compiled: list[tuple[str, re.Pattern[str]]] = []
        for kind, pattern in items:
            if not _KIND.match(kind):
                raise ContractError(f"a redaction kind is upper-case letters, digits and _, got {kind!r}")
            try:
                compiled.append((kind, re.compile(pattern) if isinstance(pattern, str) else pattern))
            except re.error as exc:
                raise ContractError(
                    f"redact pattern {pattern!r} ({kind}) is not a regular expression: {exc}"
                ) from exc
        self.patterns = tuple(compiled)

    def find(self, text: str) -> Iterable[Finding]:
        return [
            Finding(m.start(), m.end(), kind)
            for kind, pattern in self.patterns
            for m in pattern.finditer(text)
            if m.end() > m.start()
        ]


# Presidio's entity names, as the built-in kinds where they mean the same thing.
_PRESIDIO_KINDS = {
    "EMAIL_ADDRESS": "EMAIL",
    "PHONE_NUMBER": "PHONE",
    "CREDIT_CARD": "CARD",
    "IBAN_CODE": "IBAN",
    "IP_ADDRESS": "IP",
}


SPACY_MODEL = "en_core_web_lg"
"""The spaCy pipeline Presidio's analyzer runs on unless told otherwise (installed beside the extra)."""


class PresidioDetector:
    """Microsoft Presidio's analyzer (``presidio_analyzer.AnalyzerEngine`` unless one is given).

    Anything with ``analyze(text=..., language=..., entities=..., score_threshold=...)`` returning
    results with ``entity_type``, ``start`` and ``end`` works (tests pass a fake). Presidio runs an
    NLP model per string: it finds names and places the built-in detectors cannot, at a far higher
    cost per decision. ``model`` is the spaCy pipeline (default :data:`SPACY_MODEL`): an installed
    package or a pipeline directory; a blank one (``spacy.blank(lang).to_disk(dir)``) runs only
    Presidio's pattern recognizers (e-mail, card, IBAN, IP, URL, crypto wallet ...), no names.
    """

    name = "presidio"

    def __init__(
        self,
        analyzer: Any = None,
        *,
        language: str = "en",
        model: str | None = None,
        entities: Sequence[str] | None = None,
        score_threshold: float = 0.5,
    ) -> None:
        if analyzer is None:
            analyzer = presidio_analyzer(model=model or SPACY_MODEL, language=language)
        self.analyzer = analyzer
        self.language = language
        self.entities = list(entities) if entities is not None else None
        self.score_threshold = score_threshold

    def find(self, text: str) -> Iterable[Finding]:
        results = self.analyzer.analyze(
            text=text, language=self.language, entities=self.entities, score_threshold=self.score_threshold
        )
        found = []
        for result in results:
            kind = _PRESIDIO_KINDS.get(result.entity_type, result.entity_type)
            kind = re.sub(r"[^A-Z0-9_]", "_", str(kind).upper()) or "PII"
            if result.end > result.start:
                found.append(Finding(int(result.start), int(result.end), kind))
        return found


def presidio_analyzer(*, model: str, language: str) -> Any:
    """Presidio's ``AnalyzerEngine`` over the spaCy pipeline ``model`` (a package name or a directory).

    A missing pipeline is an error naming it: Presidio itself would download it from the network,
    from inside the agent's process, when the recorder starts.
    """
    from pathlib import Path

    try:
        import spacy.util
        from presidio_analyzer import AnalyzerEngine
        from presidio_analyzer.nlp_engine import NlpEngineProvider
    except ImportError as exc:
        raise BlackboxError(
            "BLACKBOX_REDACT=presidio needs Presidio: pip install 'agent-blackbox[presidio]'"
        ) from exc
    if not (spacy.util.is_package(model) or Path(model).is_dir()):
        raise BlackboxError(
            f"BLACKBOX_REDACT=presidio needs the spaCy pipeline {model!r}, which is not installed: "
            f"python -m spacy download {model}"
        )
    config = {"nlp_engine_name": "spacy", "models": [{"lang_code": language, "model_name": model}]}
    engine = NlpEngineProvider(nlp_configuration=config).create_engine()
    return AnalyzerEngine(nlp_engine=engine, supported_languages=[language])


def builtin_detectors(*, phone_region: str = "US") -> tuple[Detector, ...]:
    """The built-in detectors, in priority order (a card wins over a phone number on the same digits)."""
    return (EmailDetector(), IbanDetector(), CardDetector(), IpDetector(), PhoneDetector(phone_region))

"""The personal-data detectors: what each finds, and what it must not (dates, Luhn and mod-97 failures)."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass

import pytest

from producers.privacy.detectors import (
    CardDetector,
    EmailDetector,
    IbanDetector,
    IpDetector,
    PatternDetector,
    PhoneDetector,
    PresidioDetector,
    builtin_detectors,
    iban_valid,
    luhn_valid,
)
from producers.privacy.native_scan import find_all
from schemas.errors import BlackboxError, ContractError


def found(detector: object, text: str) -> list[tuple[str, str]]:
    return [(text[f.start : f.end], f.kind) for f in detector.find(text)]  # type: ignore[attr-defined]


def test_email() -> None:
    assert found(EmailDetector(), "write to jane.doe+x@example.co.uk, or not") == [
        ("jane.doe+x@example.co.uk", "EMAIL")
    ]
    assert found(EmailDetector(), "no address @ here, user@localhost, a@b") == []


@pytest.mark.parametrize(
    "text", ["+44 20 7946 0958", "(415) 555-2671", "415-555-2671", "+1 415 555 2671", "+33 1 42 68 53 00"]
)
def test_phone_numbers_are_found(text: str) -> None:
    assert found(PhoneDetector(), f"call {text} today") == [(text, "PHONE")]


@pytest.mark.parametrize(
    "text",
    [
        "2026-07-23",
        "2026-07-23T13:00:00.456Z",
        "order 12345678",
        "ref 2024-0001-77",  # a valid US number by digits, but not grouped as one
        "192.168.1.20",
        "v1.2.3",
        "13:00:00",
    ],
)
def test_dates_ids_and_versions_are_not_phone_numbers(text: str) -> None:
    assert found(PhoneDetector(), text) == []


def test_luhn() -> None:
    assert luhn_valid("4111111111111111") and luhn_valid("79927398713")
    assert not luhn_valid("4111111111111112") and not luhn_valid("79927398710")


def test_card_numbers_need_the_luhn_check() -> None:
    text = "card 4111 1111 1111 1111, typo 4111 1111 1111 1112, amex 378282246310005, order 1234567890123456"
    assert found(CardDetector(), text) == [("4111 1111 1111 1111", "CARD"), ("378282246310005", "CARD")]


def test_iban_mod_97() -> None:
    assert iban_valid("DE89370400440532013000") and iban_valid("GB82WEST12345698765432")
    assert not iban_valid("DE89370400440532013001") and not iban_valid("GB00WEST12345698765432")


def test_ibans_need_the_mod_97_check_and_stop_at_the_next_word() -> None:
    text = "pay DE89 3704 0044 0532 0130 00 BIC COBADEFFXXX; GB82WEST12345698765432. bad DE89 3704 0044 0532 0130 01"
    assert found(IbanDetector(), text) == [
        ("DE89 3704 0044 0532 0130 00", "IBAN"),
        ("GB82WEST12345698765432", "IBAN"),
    ]


def test_ip_addresses_v4_and_v6() -> None:
    text = "from 10.0.0.1. and 2001:db8::8a2e:370:7334, loopback ::1; not 999.1.1.1, 13:00:00 or std::map"
    assert found(IpDetector(), text) == [
        ("10.0.0.1", "IP"),
        ("2001:db8::8a2e:370:7334", "IP"),
        ("::1", "IP"),
    ]


def test_overlaps_keep_the_earliest_longest_finding() -> None:
    text = "jane.555-2671@example.com and 4111-1111-1111-1111"
    assert [(text[f.start : f.end], f.kind) for f in find_all(text, builtin_detectors())] == [
        ("jane.555-2671@example.com", "EMAIL"),
        ("4111-1111-1111-1111", "CARD"),
    ]


def test_runtime_patterns_with_their_kinds() -> None:
    detector = PatternDetector({"EMPLOYEE": r"EMP-\d{6}", "TICKET": re.compile(r"T#\d+")})
    assert found(detector, "EMP-123456 filed T#42") == [("EMP-123456", "EMPLOYEE"), ("T#42", "TICKET")]
    assert found(PatternDetector([r"secret-\w+"]), "a secret-sauce") == [("secret-sauce", "CUSTOM")]
    with pytest.raises(ContractError, match="not a regular expression"):
        PatternDetector({"BAD": "("})
    with pytest.raises(ContractError, match="upper-case"):
        PatternDetector({"lower": "x"})


@dataclass
class _Result:
    entity_type: str
    start: int
    end: int


class FakeAnalyzer:
    """Presidio's analyzer interface: analyze(text=, language=, entities=, score_threshold=)."""

    def __init__(self) -> None:
        self.calls: list[dict[str, object]] = []

    def analyze(self, **kwargs: object) -> list[_Result]:
        self.calls.append(kwargs)
        text = str(kwargs["text"])
        at = text.find("Jane Doe")
        return [_Result("PERSON", at, at + 8)] if at >= 0 else []


def test_presidio_adapter_over_the_analyzer_interface() -> None:
    analyzer = FakeAnalyzer()
    detector = PresidioDetector(analyzer, language="en", score_threshold=0.6)
    assert found(detector, "ask Jane Doe") == [("Jane Doe", "PERSON")]
    assert analyzer.calls == [
        {"text": "ask Jane Doe", "language": "en", "entities": None, "score_threshold": 0.6}
    ]


def test_presidio_missing_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "presidio_analyzer", None)  # import fails as when not installed
    with pytest.raises(BlackboxError, match=r"agent-blackbox\[presidio\]"):
        PresidioDetector()

"""The native personal-data scan vs the Python detectors: the same findings, string by string.

Each string is searched with the native core (``BLACKBOX_NATIVE=require``) and with the Python
reference (``BLACKBOX_NATIVE=off``): by all built-in detectors together (the overlap rule) and by
each alone, one string at a time (:func:`find_all`) and all at once (:func:`find_in_values`). The
strings: every kind of personal data in every shape the privacy tests know and more, near-misses
(dates, order numbers, versions, IPv6-ish text, addresses with trailing dots), Unicode neighbours
(accented letters, CJK, superscript and Arabic-Indic digits, NBSP, combining marks) on each side,
and 10,000 strings Hypothesis composes of all of these (derandomized, so CI runs the same ones).
"""

from __future__ import annotations

import random
import string
import threading
import time
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from native_testing import native_mode

from producers.privacy.detectors import (
    CardDetector,
    Detector,
    EmailDetector,
    Finding,
    PatternDetector,
    PhoneDetector,
    builtin_detectors,
)
from producers.privacy.native_scan import find_all, find_in_values

# Phone numbers as people write them, and digit runs that are not quite.
PHONES = [
    "+44 20 7946 0958",
    "(415) 555-2671",
    "415-555-2671",
    "+1 415 555 2671",
    "+33 1 42 68 53 00",
    "+1 (415) 555-2671",
    "+44 (0)20 7946 0958",
    "+49 30 901820",
    "1-800-555-0199",
    "415.555.2671",
    "415\u00a0555\u00a02671",
    "+44\u00a020\u00a07946\u00a00958",
    "415\t555\t2671",
    "555-2671",
    "(555)555-5555",
    "++1 415 555 2671",
    "+1 415 555 2671 ext 3",
]

# Every shape of personal data and every near-miss the privacy tests use, and more of both.
CORPUS = [
    # e-mail
    "jane.doe+x@example.co.uk",
    "jane.doe@example.com",
    "ops@acme.test",
    "jane.555-2671@example.com",
    "user@sub-domain.example.org",
    "a.b@c.d.ef",
    "jane@example.com.",
    "jane@example.com-",
    "jane@example.com..",
    "x@y.z",
    "user@localhost",
    "a@b",
    "no address @ here",
    "@example.com",
    "jane@",
    "jane@@example.com",
    "a@b.c1",
    "first_last%tag@mail-server.example.travel",
    "-dash@example.com",
    "dot.@example.com",
    "x" * 70 + "@example.com",
    "jane@" + "a" * 62 + ".com",
    "jane@" + "a" * 63 + ".com",
    "jane@a-.com",
    "jane@-a.com",
    "jane@example." + "c" * 25,
    "mailto:jane@example.com?subject=hi",
    *PHONES,
    # dates, ids and versions that are not phone numbers
    "2026-07-23",
    "2026-07-23T13:00:00.456Z",
    "23.07.2026",
    "12/31/2026",
    "31-12-2026",
    "order 12345678",
    "ref 2024-0001-77",
    "v1.2.3",
    "13:00:00",
    "version 2.10.3.4",
    "build 20260723.1",
    # card
    "4111 1111 1111 1111",
    "4111 1111 1111 1112",
    "4111-1111-1111-1111",
    "4111111111111111",
    "378282246310005",
    "1234567890123456",
    "4111  1111 1111 1111",
    "4111 -1111-1111-1111",
    "4111--1111-1111-1111",
    "6011 0009 9013 9424",
    "30569309025904",
    "4111 1111 1111 1111 0",
    # IBAN
    "DE89 3704 0044 0532 0130 00",
    "DE89370400440532013000",
    "GB82WEST12345698765432",
    "GB82 WEST 1234 5698 7654 32",
    "DE89 3704 0044 0532 0130 01",
    "NL91ABNA0417164300",
    "FR14 2004 1010 0505 0001 3M02 606",
    "DE89 3704 0044 0532 0130 00 BIC COBADEFFXXX",
    "DE89370400440532013000X",
    "de89 3704 0044 0532 0130 00",
    "XX00 0000 0000 0000 00",
    "GB82WEST12345698765432 AND MORE WORDS HERE",
    # IP
    "10.0.0.1",
    "10.0.0.1.",
    "203.0.113.7",
    "192.168.1.20",
    "999.1.1.1",
    "256.1.1.1",
    "01.2.3.4",
    "1.2.3.4.5",
    "1.2.3.4:8080",
    "10.0.0.1.2",
    "2001:db8::8a2e:370:7334",
    "::1",
    "::",
    ":::",
    "::ffff:192.168.0.1",
    "::ffff:999.168.0.1",
    "fe80::1%eth0",
    "1::2::3",
    "2001:db8:0:0:0:0:2:1",
    "2001:db8:0:0:0:0:2:1:5",
    "2001:DB8::ABCD",
    "dead:beef::",
    "a::b",
    "std::map",
    "12:30",
    "key: value",
    '{"key": "value", "n": 1}',
    "12:34:56",
    "1:2:3:4:5:6:7:8",
    "1:2:3:4:5:6:7::",
    "::1:2:3:4:5:6:7",
    "1:2:3:4:5:6:1.2.3.4",
    "1:2:3:4:5:6:7:1.2.3.4",
    "abcd:ef01:2345:6789:abcd:ef01:2345:6789",
    "abcde::1",
    "12345::",
    "::1.2.3",
]

NEIGHBOURS = [
    "",
    " ",
    "\t",
    "\n",
    ".",
    ",",
    "-",
    "_",
    "+",
    "(",
    ")",
    ":",
    "@",
    "/",
    "a",
    "Z",
    "0",
    "7",
    "é",
    "ß",
    "漢",
    "²",
    "¹",
    "\u00a0",
    "\u2007",
    "٣",
    "०",
    "Ⅻ",
    "\u200b",
    "\u0301",
    "ª",
    "ǅ",
    "😀",
    "—",
    "€",
]

# Characters the built-in patterns care about, and some they must not.
ALPHABET = string.digits + "abcdefABCDEFXYZxyz" + " .:-@+()_/%\t" + "é²\u00a0漢٣"
LOCAL = string.ascii_letters + string.digits + "._%+-"
LABEL = string.ascii_lowercase + string.digits + "-"


def email(rng: random.Random) -> str:
    local = "".join(rng.choice(LOCAL) for _ in range(rng.choice([1, 3, 8, 20, 64, 66])))
    labels = [
        "".join(rng.choice(LABEL) for _ in range(rng.choice([0, 1, 2, 5, 12, 61, 62, 63])))
        for _ in range(rng.randint(1, 3))
    ]
    tld = "".join(rng.choice(string.ascii_letters) for _ in range(rng.choice([1, 2, 3, 24, 25])))
    return f"{local}@{'.'.join(labels)}.{tld}{rng.choice(['', '', '.', '-', '..', '1'])}"


def luhn_digit(body: str) -> str:
    total = 0
    for position, char in enumerate(reversed(body)):
        value = int(char) * (1 if position % 2 else 2)
        total += value - 9 if value > 9 else value
    return str((10 - total % 10) % 10)


def card(rng: random.Random) -> str:
    body = "".join(rng.choice(string.digits) for _ in range(rng.randint(11, 19)))
    number = body + (luhn_digit(body) if rng.random() < 0.7 else rng.choice(string.digits))
    separator = rng.choice(["", " ", "-", " ", "  ", " -"])
    size = rng.choice([4, 4, 3, 5])
    return separator.join(number[i : i + size] for i in range(0, len(number), size))


def iban(rng: random.Random) -> str:
    country = "".join(rng.choice(string.ascii_uppercase) for _ in range(2))
    chars = string.digits * 3 + string.ascii_uppercase
    bban = "".join(rng.choice(chars) for _ in range(rng.randint(9, 31)))
    number = int("".join(str(int(ch, 36)) for ch in bban + country + "00"))
    check = f"{98 - number % 97:02d}" if rng.random() < 0.8 else f"{rng.randint(0, 99):02d}"
    compact = country + check + bban
    if rng.random() < 0.5:
        return " ".join(compact[i : i + 4] for i in range(0, len(compact), 4))
    return compact


def ipv4(rng: random.Random) -> str:
    def octet() -> str:
        return rng.choice([str(rng.randint(0, 255)), "0", "00", "01", str(rng.randint(256, 999))])

    return ".".join(octet() for _ in range(rng.choice([4, 4, 4, 3, 5])))


def ipv6(rng: random.Random) -> str:
    hextets = [
        "".join(rng.choice("0123456789abcdefABCDEF") for _ in range(rng.choice([0, 1, 2, 3, 4, 4, 5])))
        for _ in range(rng.randint(1, 9))
    ]
    if rng.random() < 0.5:
        hextets.insert(rng.randint(0, len(hextets)), "")
    text = ":".join(hextets)
    if rng.random() < 0.2:
        text += ":" + ipv4(rng)
    return text + rng.choice(["", "", ".", ":", "%eth0", "::"])


def phone(rng: random.Random) -> str:
    def digits(count: int) -> str:
        return "".join(rng.choice(string.digits) for _ in range(count))

    separator = rng.choice([" ", "-", ".", "\u00a0", "\t", " ", "  "])
    shapes = [
        f"+44 20 7946 0{digits(3)}",
        f"({rng.randint(200, 999)}) {rng.randint(200, 999)}-{digits(4)}",
        f"{rng.randint(200, 999)}{separator}555{separator}{digits(4)}",
        f"+1{separator}{rng.randint(200, 999)}{separator}{digits(3)}{separator}{digits(4)}",
        f"+33 1 42 68 {digits(2)} {digits(2)}",
        f"+49 30 {digits(rng.randint(5, 8))}",
        f"+{rng.randint(1, 999)} {digits(rng.randint(4, 12))}",
        separator.join(digits(rng.randint(1, 4)) for _ in range(rng.randint(2, 6))),
    ]
    return rng.choice(shapes)


def date(rng: random.Random) -> str:
    y, m, d = rng.randint(1900, 2100), rng.randint(1, 12), rng.randint(1, 28)
    return rng.choice(
        [
            f"{y}-{m:02d}-{d:02d}",
            f"{d:02d}.{m:02d}.{y}",
            f"{m:02d}/{d:02d}/{y}",
            f"{y}-{m:02d}-{d:02d}T13:00Z",
        ]
    )


MAKERS = (email, card, iban, ipv4, ipv6, phone, date)


def pii_text(rng: random.Random, *, pieces: int = 6) -> str:
    """A string of personal data, near-misses, neighbours and noise, glued without or with spaces."""
    out = []
    for _ in range(rng.randint(0, pieces)):
        pick = rng.random()
        if pick < 0.35:
            out.append(rng.choice(MAKERS)(rng))
        elif pick < 0.6:
            out.append(rng.choice(CORPUS))
        elif pick < 0.85:
            out.append(rng.choice(NEIGHBOURS))
        else:
            out.append("".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 8))))
    return rng.choice(["", " "]).join(out)


# --- the comparison -------------------------------------------------------------------------------
Spans = list[tuple[int, int, str]]


def _spans(findings: Sequence[Finding]) -> Spans:
    return [(f.start, f.end, f.kind) for f in findings]


def _each_way(texts: Sequence[str], detector_sets: Sequence[Sequence[Detector]]) -> list[list[Spans]]:
    """For each detector set, the findings of each text, with ``find_all``; one mode per call."""
    return [[_spans(find_all(text, detectors)) for text in texts] for detectors in detector_sets]


DETECTOR_SETS: list[Sequence[Detector]] = [
    builtin_detectors(),
    *([detector] for detector in builtin_detectors()),
    [PhoneDetector("GB"), CardDetector(), EmailDetector()],  # another order, another region
]


def assert_same_findings(texts: Sequence[str]) -> None:
    """Native and reference agree on every text, per detector set, one by one and all at once."""
    with native_mode("require") as core:
        natively = _each_way(texts, DETECTOR_SETS)
        batched = find_in_values(list(texts), builtin_detectors())
        assert batched is not None, "the native scan declined a batch of plain strings"
        assert_ascii_never_declined(core, texts)
    with native_mode("off"):
        reference = _each_way(texts, DETECTOR_SETS)
        assert find_in_values(list(texts), builtin_detectors()) is None
    for detectors, ours, theirs in zip(DETECTOR_SETS, natively, reference, strict=True):
        for text, mine, expected in zip(texts, ours, theirs, strict=True):
            assert mine == expected, f"{[d.name for d in detectors]} on {text!r}"
    for index, text in enumerate(texts):
        assert _spans(batched[index].get(0, [])) == reference[0][index], f"batched, on {text!r}"
        assert set(batched[index]) <= {0}


def assert_ascii_never_declined(core: ModuleType | None, texts: Sequence[str]) -> None:
    """Only a non-ASCII character can make the core decline (hand a string to Python)."""
    assert core is not None
    hits = core.pii_scan(list(texts), 0b11111)
    assert hits is not None
    declined = [texts[index] for index, _, _, spans in hits if spans is None]
    assert all(not text.isascii() for text in declined), declined


# --- tests ------------------------------------------------------------------------------------------
def test_the_privacy_tests_examples_find_the_same_both_ways() -> None:
    texts = [
        "write to jane.doe+x@example.co.uk, or not",
        "no address @ here, user@localhost, a@b",
        "card 4111 1111 1111 1111, typo 4111 1111 1111 1112, amex 378282246310005, order 1234567890123456",
        "pay DE89 3704 0044 0532 0130 00 BIC COBADEFFXXX; GB82WEST12345698765432. bad DE89 3704 0044 0532 0130 01",
        "from 10.0.0.1. and 2001:db8::8a2e:370:7334, loopback ::1; not 999.1.1.1, 13:00:00 or std::map",
        "jane.555-2671@example.com and 4111-1111-1111-1111",
        *(f"call {number} today" for number in PHONES),
    ]
    assert_same_findings(texts)
    with native_mode("require"):
        found = find_all(texts[4], builtin_detectors())
    assert [texts[4][f.start : f.end] for f in found] == ["10.0.0.1", "2001:db8::8a2e:370:7334", "::1"]


def test_every_shape_with_every_neighbour_on_each_side() -> None:
    texts = [
        f"{left}{item}{right}"
        for item in CORPUS
        for left, right in [*((n, " ") for n in NEIGHBOURS), *((" ", n) for n in NEIGHBOURS)]
        + [(n, n) for n in NEIGHBOURS]
    ]
    assert len(texts) > 10_000
    assert_same_findings(texts)


def test_whitespace_edges_and_empty_strings() -> None:
    edges = ["", " ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u2028", "\x00"]
    texts = [f"{a}{item}{b}" for item in CORPUS[::3] for a in edges for b in edges[:4]]
    assert_same_findings([*edges, *texts])


TEXTS = st.tuples(
    st.lists(
        st.one_of(
            st.sampled_from(CORPUS),
            st.sampled_from(NEIGHBOURS),
            st.tuples(st.sampled_from(MAKERS), st.integers(0, 2**32 - 1)).map(
                lambda made: made[0](random.Random(made[1]))
            ),
            st.text(alphabet=ALPHABET, max_size=8),
        ),
        max_size=8,
    ),
    st.sampled_from(["", " "]),
).map(lambda pieces: pieces[1].join(pieces[0]))


@settings(
    max_examples=100,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
@given(st.lists(TEXTS, min_size=100, max_size=100))
def test_ten_thousand_generated_strings(texts: list[str]) -> None:
    assert_same_findings(texts)


def test_long_strings_across_the_scan_windows() -> None:
    """Digits far apart and close together: the native scan searches only near digits."""
    rng = random.Random(15)
    texts = []
    for _ in range(60):
        filler = " ".join(
            rng.choice(["refund", "é", "ok", "a", "the", "漢字"]) for _ in range(rng.randint(0, 80))
        )
        texts.append(filler.join(pii_text(rng) for _ in range(rng.randint(1, 6))))
    texts.append("x" * 70 + "4111 1111 1111 1111" + "y" * 70 + "DE89 3704 0044 0532 0130 00")
    for gap in range(0, 80, 3):  # the longest matches, and digits just within and beyond reach
        texts += [
            "7" + " " * gap + "(" * 20 + "415) 555-2671",
            "+" + "(" * gap + "44 20 7946 0958" + "." * gap + "1",
            "GB82 " + "WEST " * (gap // 5) + "1234 5698 7654 32",
            "1" + "\u00a0" * gap + "415\u00a0555\u00a02671" + "\u00a0" * gap,
            "DE89" + "A" * gap + " 1" + "x" * gap + "10.0.0.1",
        ]
    assert_same_findings(texts)


def test_json_values_are_walked_as_redaction_walks_them() -> None:
    """Strings of dicts (values, not keys) and lists, in order; other types and subclasses skipped."""

    class Text(str):
        pass

    rng = random.Random(7)

    def value(depth: int) -> Any:
        pick = rng.random()
        if depth > 3 or pick < 0.5:
            return rng.choice([pii_text(rng), pii_text(rng), None, 7, 1.5, True, Text("jane@example.com")])
        if pick < 0.7:
            return [value(depth + 1) for _ in range(rng.randint(0, 4))]
        if pick < 0.8:
            return ("ops@acme.test", value(depth + 1))
        return {pii_text(rng): value(depth + 1) for _ in range(rng.randint(0, 4))}

    values = [value(0) for _ in range(300)]

    def strings(item: Any) -> list[str]:
        if type(item) is str:
            return [item]
        if type(item) is list:
            return [text for entry in item for text in strings(entry)]
        if type(item) is dict:
            return [text for entry in item.values() for text in strings(entry)]
        return []

    with native_mode("require"):
        found = find_in_values(values, builtin_detectors())
    assert found is not None
    with native_mode("off"):
        for item, mine in zip(values, found, strict=True):
            expected = {i: find_all(text, builtin_detectors()) for i, text in enumerate(strings(item))}
            assert mine == {i: f for i, f in expected.items() if f}


def test_too_deep_a_value_is_declined_and_other_detectors_run_in_python() -> None:
    deep: Any = "jane@example.com"
    for _ in range(250):
        deep = [deep]
    with native_mode("require"):
        assert find_in_values([deep], builtin_detectors()) is None  # the caller walks it in Python
        assert find_in_values(["x"], [*builtin_detectors(), PatternDetector({"ID": r"\d+"})]) is None
        mixed = find_all(
            "EMP-004711 ops@acme.test 4111 1111 1111 1111",
            [*builtin_detectors(), PatternDetector({"ID": r"\d+"})],
        )
    with native_mode("off"):
        expected = find_all(
            "EMP-004711 ops@acme.test 4111 1111 1111 1111",
            [*builtin_detectors(), PatternDetector({"ID": r"\d+"})],
        )
    assert mixed == expected
    assert [f.kind for f in mixed] == ["ID", "EMAIL", "CARD"]


def test_the_scan_lets_other_threads_run(core: ModuleType) -> None:
    """The GIL is released while scanning: a Python thread keeps running during a long scan."""
    text = "a1 b2:c3. " * 2_000_000  # digits and colons everywhere: ~20 MB the scan cannot skip
    started = time.perf_counter()
    assert core.pii_scan([text], 0b11111) == []
    alone = time.perf_counter() - started
    done = threading.Event()
    scanner = threading.Thread(target=lambda: (core.pii_scan([text], 0b11111), done.set()))
    longest = 0.0
    last = time.perf_counter()
    scanner.start()
    while not done.is_set():
        now = time.perf_counter()
        longest = max(longest, now - last)
        last = now
    scanner.join()
    # holding the GIL would stall this loop for the whole scan
    assert longest < alone * 0.4, f"this thread stalled {longest:.3f} s during a {alone:.3f} s scan"


def test_the_plan_is_made_once_per_detector_set_and_core(core: ModuleType) -> None:
    """A redactor asks with the same detectors for every capture: the same plan; any other set (or
    another core, or none) gets its own."""
    from producers.privacy.native_scan import _native_plan

    detectors = (EmailDetector(), PhoneDetector())
    plan = _native_plan(detectors)
    assert plan is not None and _native_plan(list(detectors)) is plan
    others = (EmailDetector(), PhoneDetector())
    other_plan = _native_plan(others)
    assert other_plan is not None and other_plan is not plan
    assert other_plan.phones[0][1] is others[1]  # the plan confirms phones with these detectors
    with native_mode("off"):
        assert _native_plan(detectors) is None
    assert _native_plan(detectors) is not plan  # the core was loaded again: a plan for it

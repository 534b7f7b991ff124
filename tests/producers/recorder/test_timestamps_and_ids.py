"""The agent-thread fast paths for timestamps and decision ids give what the plain forms give.

``format_timestamp`` formats with %-formatting and ``new_decision_id`` builds its ULID from a cached
time prefix and translated random bytes; the references below are the plain forms they replace
(strftime, and base32 of the 130-bit value digit by digit), written out here as the oracle.
"""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime, timedelta, timezone

import pytest

from producers.clock import format_timestamp
from producers.decision import new_decision_id

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def reference_timestamp(moment: datetime) -> str:
    moment = moment.astimezone(UTC)
    return f"{moment:%Y-%m-%dT%H:%M:%S}.{moment.microsecond // 1000:03d}Z"


def reference_id(ms: int, random_bits: int) -> str:
    value = (ms << 80) | random_bits
    chars = []
    for _ in range(26):
        chars.append(CROCKFORD[value & 31])
        value >>= 5
    return "dec_" + "".join(reversed(chars))


def moments(count: int) -> list[datetime]:
    rng = random.Random(0x7153)
    zones = [UTC, UTC, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-11))]
    edges = [
        datetime(1, 1, 1, tzinfo=UTC),
        datetime(999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
        datetime(1000, 1, 1, tzinfo=UTC),
        datetime(1969, 12, 31, 23, 59, 59, 999_000, tzinfo=UTC),
        datetime(1970, 1, 1, tzinfo=UTC),
        datetime(2026, 12, 1, 21, 50, 0, 999, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=timezone(timedelta(hours=14))),
    ]
    out = list(edges)
    for _ in range(count):
        moment = datetime(1000, 1, 1, tzinfo=UTC) + timedelta(
            microseconds=rng.randrange(9_000 * 365 * 86_400 * 10**6)
        )
        out.append(moment.astimezone(rng.choice(zones)))
    return out


def test_timestamps_are_the_strftime_form() -> None:
    for moment in moments(20_000):
        assert format_timestamp(moment) == reference_timestamp(moment), moment


def test_a_datetime_subclass_and_a_naive_time_keep_their_old_handling() -> None:
    class Moment(datetime):
        pass

    moment = Moment(2026, 7, 23, 13, 0, 0, 456_789, tzinfo=UTC)
    assert format_timestamp(moment) == "2026-07-23T13:00:00.456Z"
    with pytest.raises(ValueError, match="timezone-aware"):
        format_timestamp(datetime(2026, 7, 23, 13, 0, 0))


def test_ids_are_the_ulid_of_their_millisecond_and_random_part() -> None:
    for moment in moments(5_000):
        decision_id = new_decision_id(moment)
        assert len(decision_id) == 30 and decision_id.startswith("dec_")
        assert set(decision_id[4:]) <= set(CROCKFORD)
        random_bits = int("".join(f"{CROCKFORD.index(c):05b}" for c in decision_id[14:]), 2)
        ms = int(moment.timestamp() * 1000)
        assert decision_id == reference_id(ms, random_bits), moment


def test_ids_in_one_millisecond_differ_and_later_ones_sort_after() -> None:
    moment = datetime(2026, 12, 1, 21, 50, 0, 123_000, tzinfo=UTC)
    ids = [new_decision_id(moment) for _ in range(20_000)]
    assert len(set(ids)) == len(ids)
    assert {decision_id[:14] for decision_id in ids} == {ids[0][:14]}
    later = new_decision_id(moment + timedelta(milliseconds=1))
    assert later > max(ids)
    assert new_decision_id(moment - timedelta(milliseconds=1)) < min(ids)


def test_every_random_character_is_equally_likely() -> None:
    moment = datetime(2026, 12, 1, tzinfo=UTC)
    counts = Counter("".join(new_decision_id(moment)[14:] for _ in range(20_000)))
    assert set(counts) == set(CROCKFORD)
    expected = 20_000 * 16 / 32
    chi_square = sum((n - expected) ** 2 / expected for n in counts.values())
    assert chi_square < 80  # 31 degrees of freedom: p < 1e-7 above this

"""Retention classes and expiry; the DLQ limit rule; local dead letters."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from consumers.ingest.classify import classify, parse_timestamp, retention_class
from consumers.ingest.dlq import DlqLimit, DlqLimitExceeded, DlqLimitState
from consumers.retention.policy import default_policy
from producers.transports.base import DeadLetter, SourceMessage, first_offsets, next_offsets
from producers.transports.spool.dead_letter import LocalDeadLetters
from schemas.errors import ContractError

NOW = datetime(2026, 8, 1, tzinfo=UTC)
T0 = datetime(2026, 7, 23, 13, 0, 0, 456000, tzinfo=UTC)


def _capture(level: str = "full", flagged: bool = False, days: object = 365) -> dict[str, object]:
    return {
        "capturedAt": "2026-07-23T13:00:00.456Z",
        "captureLevel": level,
        "consequential": {"flagged": flagged, "reason": None},
        "replayPolicy": {"retentionDays": days},
    }


def test_classes() -> None:
    assert retention_class(_capture(flagged=True)) == "consequential"
    assert retention_class(_capture("structured-only")) == "structured"
    assert retention_class(_capture("sampled")) == "routine"
    assert retention_class(_capture("full")) == "routine"


def test_expiry_follows_the_retention_policy() -> None:
    policy = default_policy()
    r = classify(_capture("full"), policy=policy)
    assert (r.retention_class, r.content_expires_at, r.expires_at) == (
        "routine",
        T0 + timedelta(days=30),
        T0 + timedelta(days=365),
    )
    r = classify(_capture(flagged=True, days=400), policy=policy)
    assert (r.retention_class, r.content_expires_at, r.expires_at, r.retention_days) == (
        "consequential",
        T0 + timedelta(days=400),
        T0 + timedelta(days=400),
        400,
    )
    assert classify(_capture("structured-only"), policy=policy).retention_class == "structured"
    assert (
        classify(_capture("full"), policy=policy, force_consequential=True).retention_class == "consequential"
    )
    # a short retentionDays caps the content window
    assert classify(_capture(days=7), policy=policy).content_expires_at == T0 + timedelta(days=7)
    # a capture without a valid capturedAt has no retention: the caller quarantines it
    with pytest.raises(ContractError):
        classify(dict(_capture(), capturedAt="yesterday"), policy=policy)
    assert parse_timestamp("2026-07-23T13:00:00") == datetime(2026, 7, 23, 13, tzinfo=UTC)


def test_dlq_limit_single_poison_message_batches_keep_going() -> None:
    state = DlqLimitState(DlqLimit(max_consecutive_invalid=3))
    for _ in range(3):  # batches of size one, each a poison message: dead-lettered
        state.accept(state.check([True]))
    with pytest.raises(DlqLimitExceeded, match="in a row"):
        state.check([True])  # the fourth in a row stops
    state.accept(state.check([False]))  # a good message resets the run
    assert state.consecutive_invalid == 0


def test_dlq_limit_mixed_batches_never_stop_and_full_invalid_batches_do() -> None:
    state = DlqLimitState(DlqLimit(max_consecutive_invalid=3))
    state.accept(state.check([True] * 10 + [False]))  # not 100 % invalid: dead-letter the ten
    state.accept(state.check([False, True, True]))
    assert state.consecutive_invalid == 2
    with pytest.raises(DlqLimitExceeded):
        state.check([True] * 5)
    assert state.consecutive_invalid == 2  # a refused batch is not counted
    state.check([])  # nothing to judge


def test_offsets_helpers() -> None:
    msgs = [SourceMessage("t", p, o, None, b"") for p, o in [(0, 5), (1, 9), (0, 3), (0, 7)]]
    assert next_offsets(msgs) == {0: 8, 1: 10}
    assert first_offsets(msgs) == {0: 3, 1: 9}


def test_local_dead_letters_keep_bytes_and_origin(tmp_path: Path) -> None:
    sink = LocalDeadLetters(tmp_path)
    msg = SourceMessage("blackbox.captures.v1", "spool-0001.avro", 17, b"agt_1", b"\xc3\x01junk")
    letter = DeadLetter(msg, "decode_error", "truncated message")
    sink.send([letter])
    sink.send([letter])  # redelivery overwrites
    sink.flush()
    files = sorted(p.name for p in (tmp_path / "spool-0001.avro").iterdir())
    assert files == ["0000000000000000017.json", "0000000000000000017.msg"]
    assert (tmp_path / "spool-0001.avro" / "0000000000000000017.msg").read_bytes() == msg.value
    meta = json.loads((tmp_path / "spool-0001.avro" / "0000000000000000017.json").read_text())
    assert meta["reason"] == "decode_error"
    assert meta["original_partition"] == "spool-0001.avro"
    assert meta["original_offset"] == "17"
    assert meta["key"] == "agt_1"

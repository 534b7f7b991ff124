"""No single bad input stops ingest (issue 8, item 6): captures that overflow the retention policy,
implausible times, values the index cannot hold, unexpected errors, and unreadable spool files are
quarantined or dead-lettered with their reason while everything after them is indexed."""

from __future__ import annotations

import importlib
import io
import json
import os
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import fastavro
import pytest
from ingest_testdata import chdb_index, encoded, make_capture, new_signer, sealed

from consumers.app.settings import ServiceSettings, load_service_settings
from consumers.index import ChdbIndex
from consumers.ingest.batch import BatchProcessor
from consumers.ingest.dlq import DlqLimit, DlqLimitExceeded
from consumers.ingest.loop import LoopConfig
from consumers.ingest.service import build_service
from consumers.retention.policy import MAX_EXPIRES_AT
from consumers.storage.reader import load_capture
from producers.blobstore import LocalBlobStore
from producers.evidence import Signer, TrustStore
from producers.transports.base import SourceMessage
from producers.transports.spool.dead_letter import DEAD_LETTER_DIR, LocalDeadLetters
from producers.transports.spool.files import SPOOL_RECORD_SCHEMA, SpoolWriter, spool_files
from producers.transports.spool.source import SpoolSource
from schemas.codec import encode_capture

TOPIC = "blackbox.captures.v1"
# the package re-exports a function named prepare: reach the module itself
prepare_module = importlib.import_module("consumers.ingest.prepare")
NOW = datetime(2026, 8, 1, tzinfo=UTC)  # after every make_capture day


@pytest.fixture
def signer() -> Signer:
    return new_signer()


@pytest.fixture
def trust(signer: Signer) -> TrustStore:
    """Valid since year 1, so extreme capturedAt values reach the admission rules."""
    store = TrustStore()
    store.add(signer.public_raw, not_before=datetime(1, 1, 1, tzinfo=UTC))
    return store


@pytest.fixture
def index(tmp_path: Path) -> Iterator[ChdbIndex]:
    with chdb_index(tmp_path / "chdb") as idx:
        yield idx


@pytest.fixture
def processor(index: ChdbIndex, trust: TrustStore, tmp_path: Path) -> Iterator[BatchProcessor]:
    proc = BatchProcessor(
        store=LocalBlobStore(tmp_path / "blobs"),
        index=index,
        trust=trust,
        dead_letters=LocalDeadLetters(tmp_path / "dlq"),
        clock=lambda: NOW,
    )
    yield proc
    proc.close()


def _msgs(values: Sequence[bytes]) -> list[SourceMessage]:
    return [SourceMessage(TOPIC, 0, i, b"agt_support_1", v) for i, v in enumerate(values)]


def _capture(i: int, signer: Signer, **changes: Any) -> bytes:
    c = make_capture(i, tag="poison")
    for path, value in changes.items():
        node = c
        *parents, leaf = path.split(".")
        for part in parents:
            node = node[part]
        node[leaf] = value
    return encoded(c, signer)


def _indexed(index: ChdbIndex) -> dict[str, dict[str, Any]]:
    return {r["decision_id"]: r for r in index.query("SELECT * FROM decisions FINAL")}


def _quarantined(index: ChdbIndex) -> dict[str, dict[str, Any]]:
    return {r["decision_id"]: r for r in index.query("SELECT * FROM quarantine FINAL")}


# --- per-capture failures stay with that capture ----------------------------------------------------------


def test_retention_overflow_captures_no_longer_stop_their_batch(
    processor: BatchProcessor, index: ChdbIndex, signer: Signer
) -> None:
    """Regression: retentionDays=3,000,000 or capturedAt in 9999 raised OverflowError for the batch."""
    values = [
        _capture(1, signer),
        _capture(2, signer, **{"replayPolicy.retentionDays": 3_000_000}),
        _capture(3, signer, capturedAt="9999-12-31T23:59:59.999Z"),
        _capture(4, signer),
    ]
    result = processor.process(_msgs(values))
    assert (result.indexed, result.quarantined, result.dead_lettered) == (3, 1, 0)
    rows = _indexed(index)
    assert set(rows) == {"dec_poison_000001", "dec_poison_000002", "dec_poison_000004"}
    # clamped, not refused: a validly signed "keep forever" is evidence, kept until the documented maximum
    assert rows["dec_poison_000002"]["expires_at"] == MAX_EXPIRES_AT
    assert (
        rows["dec_poison_000002"]["retention_days"]
        == (MAX_EXPIRES_AT - rows["dec_poison_000002"]["captured_at"]).days
    )
    q = _quarantined(index)["dec_poison_000003"]
    assert (q["reason"], q["part"]) == ("capturedAt in the future beyond clock skew (24h)", "capturedAt")


def test_captured_at_is_checked_against_ingest_time_with_clock_skew(
    processor: BatchProcessor, index: ChdbIndex, signer: Signer
) -> None:
    iso = lambda t: t.isoformat(timespec="milliseconds").replace("+00:00", "Z")  # noqa: E731
    values = [
        _capture(1, signer, capturedAt=iso(NOW + timedelta(hours=23))),  # a fast producer clock: fine
        _capture(2, signer, capturedAt=iso(NOW + timedelta(hours=25))),
        _capture(3, signer, capturedAt="1969-12-31T23:59:59.000Z"),
    ]
    result = processor.process(_msgs(values))
    assert (result.indexed, result.quarantined) == (1, 2)
    assert set(_indexed(index)) == {"dec_poison_000001"}
    reasons = {d: r["reason"] for d, r in _quarantined(index).items()}
    assert reasons == {
        "dec_poison_000002": "capturedAt in the future beyond clock skew (24h)",
        "dec_poison_000003": "capturedAt before 1970-01-01",
    }


def test_a_value_the_index_cannot_hold_is_quarantined_not_retried_forever(
    processor: BatchProcessor, index: ChdbIndex, signer: Signer
) -> None:
    """Regression: a negative latency failed the whole insert (IndexError_, retried in place forever)."""
    values = [
        _capture(1, signer, **{"executionTrace.totalLatencyMs": -5}),
        _capture(2, signer),
    ]
    result = processor.process(_msgs(values))
    assert (result.indexed, result.quarantined) == (1, 1)
    q = _quarantined(index)["dec_poison_000001"]
    assert q["reason"] == "value out of range: decisions.total_latency_ms=-5 does not fit Nullable(UInt64)"
    assert q["part"] == "total_latency_ms"
    again = processor.process(_msgs(values))  # redelivery: same reason, nothing new
    assert (again.duplicates, again.quarantined) == (1, 0)


def test_an_unexpected_error_quarantines_only_that_capture(
    processor: BatchProcessor, index: ChdbIndex, signer: Signer, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = prepare_module.classify

    def exploding(capture: Any, **kwargs: Any) -> Any:
        if capture["decisionId"] == "dec_poison_000002":
            raise OverflowError("date value out of range")
        return real(capture, **kwargs)

    monkeypatch.setattr(prepare_module, "classify", exploding)
    values = [_capture(i, signer) for i in (1, 2, 3)]
    result = processor.process(_msgs(values))
    assert (result.indexed, result.quarantined, result.dead_lettered) == (2, 1, 0)
    assert _quarantined(index)["dec_poison_000002"]["reason"] == (
        "unexpected error: OverflowError: date value out of range"
    )
    shown = load_capture("dec_poison_000002", index=index, store=processor.store)
    assert shown.quarantined  # the bytes are kept and readable


def test_an_unexpected_error_before_decoding_dead_letters_the_message(
    processor: BatchProcessor,
    index: ChdbIndex,
    signer: Signer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    real = prepare_module.decode

    def exploding(data: bytes) -> Any:
        if data == b"boom":
            raise RecursionError("maximum recursion depth exceeded")
        return real(data)

    monkeypatch.setattr(prepare_module, "decode", exploding)
    result = processor.process(_msgs([b"boom", _capture(1, signer)]))
    assert (result.indexed, result.dead_lettered) == (1, 1)
    (letter,) = (tmp_path / "dlq").glob("*/*.json")
    meta = json.loads(letter.read_text())
    assert meta["reason"] == "unexpected_error"
    assert meta["detail"] == "unexpected error: RecursionError: maximum recursion depth exceeded"


# --- unreadable spool files go to <spool>/dead-letter/ ---------------------------------------------------


def _settings(tmp_path: Path) -> ServiceSettings:
    return load_service_settings(data_dir=tmp_path / "bb", transport="spool", blob="local")


def _publish(spool: Path, values: Sequence[bytes]) -> str:
    writer = SpoolWriter(spool)
    for v in values:
        writer.append(b"agt_support_1", v)
    writer.publish()
    return spool_files(spool)[-1]


def _raw_file(spool: Path, name: str, data: bytes) -> str:
    spool.mkdir(parents=True, exist_ok=True)
    (spool / name).write_bytes(data)
    return name


def _multi_block(values: Sequence[bytes]) -> bytes:
    """A spool file with one Avro block per record, so a truncation leaves the first ones readable."""
    buf = io.BytesIO()
    records = [{"key": b"agt_support_1", "value": v, "timestamp": 0} for v in values]
    fastavro.writer(buf, fastavro.parse_schema(SPOOL_RECORD_SCHEMA), records, sync_interval=1)
    return buf.getvalue()


def _foreign_avro() -> bytes:
    buf = io.BytesIO()
    schema = {"type": "record", "name": "Other", "fields": [{"name": "a", "type": "int"}]}
    fastavro.writer(buf, fastavro.parse_schema(schema), [{"a": 1}])
    return buf.getvalue()


def _run(settings: ServiceSettings, index: ChdbIndex, trust: TrustStore, **kw: Any) -> Any:
    config = LoopConfig(batch_size=kw.pop("batch_size", 50), max_wait=0.02, drain_idle=0.0)
    with build_service(settings, index=index, trust=trust, loop_config=config, **kw) as service:
        stats = service.run(drain=True)
        return stats, service.source


def test_unreadable_spool_files_are_moved_aside_and_ingest_goes_on(
    tmp_path: Path, index: ChdbIndex, signer: Signer, trust: TrustStore
) -> None:
    """Regression: a truncated or foreign *.avro in the spool made consume exit 2 on every run."""
    settings = _settings(tmp_path)
    spool = settings.resolved_spool_dir
    good = [sealed(make_capture(i, tag="sp"), signer) for i in range(6)]
    real = _publish(spool, [encode_capture(c) for c in good[:2]])
    truncated = (spool / real).read_bytes()
    _raw_file(spool, "1000000000001-x-00000001.avro", os.urandom(300))  # random bytes
    _raw_file(spool, "1000000000002-x-00000002.avro", _foreign_avro())
    _raw_file(spool, "1000000000003-x-00000003.avro", truncated[: len(truncated) // 2])
    _raw_file(spool, "1000000000004-x-00000004.avro", b"")
    mixed = _multi_block([encode_capture(c) for c in good[2:4]] + [b"lost"])
    _raw_file(spool, "1000000000005-x-00000005.avro", mixed[:-30])  # last block cut: 2 records readable
    last = SpoolWriter(spool)  # published after the bad ones, by a live writer
    for c in good[4:]:
        last.append(b"agt_support_1", encode_capture(c))
    last.publish()
    # a still-running producer's temp file is not published: never read, never dead-lettered
    live = SpoolWriter(spool)
    live.append(b"agt_support_1", encode_capture(sealed(make_capture(99, tag="sp"), signer)))
    live._fh.flush()
    (partial,) = [n for n in os.listdir(spool) if n.startswith(".tmp-")]

    stats, source = _run(settings, index, trust, batch_size=3)
    assert stats.indexed == 6 and stats.dead_lettered == 0
    assert set(_indexed(index)) == {c["decisionId"] for c in good}
    for c in good:
        assert (
            load_capture(
                c["decisionId"], index=index, store=LocalBlobStore(settings.resolved_blob_dir)
            ).capture
            == c
        )
    dead = spool / DEAD_LETTER_DIR
    moved = sorted(p.name for p in dead.glob("*.avro"))
    assert moved == [f"100000000000{n}-x-0000000{n}.avro" for n in range(1, 6)]
    assert source.dead_files == 5
    reasons = {n: json.loads((dead / f"{n}.reason.json").read_text()) for n in moved}
    assert all(
        r["reason"] == "corrupt_spool_file" and r["error"] and r["dead_lettered_at"] for r in reasons.values()
    )
    assert reasons[moved[4]]["records_read"] == 2 and reasons[moved[0]]["records_read"] == 0
    assert "SchemaResolutionError" in reasons[moved[1]]["error"]
    assert (dead / moved[0]).stat().st_size == 300  # moved whole, never rewritten
    assert partial in os.listdir(spool)
    assert not [n for n in spool_files(spool) if n.startswith("100000000000")]  # no bad file left

    live.publish()  # the producer finishes: its file is read like any other
    stats, source = _run(settings, index, trust)
    assert (stats.indexed, source.dead_files) == (1, 0)
    live.close()


def test_a_damaged_file_is_moved_only_after_its_readable_records_are_committed(
    tmp_path: Path, signer: Signer
) -> None:
    spool = tmp_path / "spool"
    values = [encode_capture(sealed(make_capture(i), signer)) for i in range(3)]
    name = _raw_file(spool, "1000000000001-x-00000001.avro", _multi_block(values)[:-20])
    src = SpoolSource(directory=spool, checkpoint=tmp_path / "ckpt.json", topic=TOPIC)
    batch = src.consume(10, 0.05)
    assert [m.value for m in batch] == values[:2]
    assert spool_files(spool) == [name]  # a crash now re-reads the two records
    src.close()

    again = SpoolSource(directory=spool, checkpoint=tmp_path / "ckpt.json", topic=TOPIC)
    batch = again.consume(10, 0.05)
    assert [m.offset for m in batch] == [0, 1]
    again.commit({name: 2})
    assert spool_files(spool) == [] and (spool / DEAD_LETTER_DIR / name).exists()
    assert json.loads((spool / DEAD_LETTER_DIR / f"{name}.reason.json").read_text())["records_read"] == 2
    assert again.consume(10, 0.05) == [] and again.caught_up()
    again.close()


def test_unreadable_files_in_a_row_stop_the_consumer(
    tmp_path: Path, index: ChdbIndex, trust: TrustStore
) -> None:
    settings = _settings(tmp_path)
    for n in range(1, 5):
        _raw_file(settings.resolved_spool_dir, f"100000000000{n}-x-0000000{n}.avro", b"not avro")
    with pytest.raises(DlqLimitExceeded, match="3 spool files in a row are unreadable"):
        _run(settings, index, trust, dlq_limit=DlqLimit(max_consecutive_invalid=2))
    assert len(list((settings.resolved_spool_dir / DEAD_LETTER_DIR).glob("*.avro"))) == 2
    assert len(spool_files(settings.resolved_spool_dir)) == 2  # the rest wait for the operator


def test_cli_consume_says_where_dead_letters_went(tmp_path: Path, signer: Signer, trust: TrustStore) -> None:
    from typer.testing import CliRunner

    from consumers.cli import app

    data = tmp_path / "bb"
    trust.save(data / "trust.toml")
    _publish(data / "spool", [encode_capture(sealed(make_capture(1), signer)), b"junk"])
    _raw_file(data / "spool", "9999999999999-x-00000001.avro", b"truncated")
    env = {"BLACKBOX_DATA_DIR": str(data), "BLACKBOX_TRANSPORT": "spool", "BLACKBOX_BLOB": "local"}
    result = CliRunner().invoke(app, ["consume", "--drain", "--max-wait", "0.1"], env=env)
    assert result.exit_code == 0, result.output
    assert "indexed=1" in result.output and "dead_lettered_files=1" in result.output
    assert f"dead letters: 1 messages in {data / 'dlq'}" in result.output
    assert f"dead-lettered spool files: 1 moved to {data / 'spool' / DEAD_LETTER_DIR}" in result.output

"""The spool backend: the transport contract, then what only a spool has - Avro container files
published by fsync + rename, read back by position, linger and rotation, one consumer per spool."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastavro
import pytest
from transport_contract import TransportContract

from producers.settings import BlackboxSettings, load_settings
from producers.transports import DeadLetter, DeliveryFailed, Transport, open_sender
from producers.transports.spool.dead_letter import read_dead_letters
from producers.transports.spool.files import (
    SPOOL_RECORD_SCHEMA,
    SpoolCheckpoint,
    SpoolPosition,
    SpoolWriter,
    mark_consumed,
    read_spool,
    recover_partials,
    spool_files,
)
from producers.transports.spool.sender import SpoolTransport
from producers.transports.spool.source import SpoolSource
from schemas.errors import TransportError


class TestSpoolTransport(TransportContract):
    kind = "spool"
    undelivered_code = "spool_io"
    sample_partition = "1700000000000-host_1_abc123-00000001.avro"
    wait = 5.0

    @pytest.fixture
    def settings(self, tmp_path: Path) -> BlackboxSettings:
        return load_settings(transport="spool", data_dir=tmp_path / "bb")

    def undeliverable(self, settings: BlackboxSettings) -> tuple[Transport, Callable[[], None]]:
        # The records wait in the temp file; removing the spool directory makes publishing them fail.
        sender = open_sender(settings, linger_ms=60_000)
        return sender, lambda: shutil.rmtree(settings.resolved_spool_dir)

    def read_dead_letters(self, settings: BlackboxSettings, *, expect: int) -> list[DeadLetter]:
        return list(read_dead_letters(settings.data_dir / "dlq"))


# --- the spool files ---------------------------------------------------------------------------------


def _publish(directory: Path, values: list[bytes]) -> str:
    writer = SpoolWriter(directory)
    for value in values:
        writer.append(b"agt_1", value, 1_700_000_000_000)
    assert writer.publish() == len(values)
    return spool_files(directory)[-1]


def test_publish_then_read_in_order(tmp_path: Path) -> None:
    first = _publish(tmp_path, [b"a0", b"a1", b"a2"])
    time.sleep(0.002)
    second = _publish(tmp_path, [b"b0"])
    assert spool_files(tmp_path) == [first, second]
    records = list(read_spool(tmp_path))
    assert [(r.file, r.index, r.value) for r in records] == [
        (first, 0, b"a0"),
        (first, 1, b"a1"),
        (first, 2, b"a2"),
        (second, 0, b"b0"),
    ]
    assert records[0].key == b"agt_1" and records[0].timestamp_ms == 1_700_000_000_000
    file, index, value = records[1]  # unpacks as (file, index, bytes)
    assert (file, index, value) == (first, 1, b"a1")
    assert records[1].next_position == SpoolPosition(first, 2)


def test_files_are_standard_avro_containers(tmp_path: Path) -> None:
    name = _publish(tmp_path, [b"x"])
    with open(tmp_path / name, "rb") as fh:
        reader = fastavro.reader(fh)
        schema: Any = reader.writer_schema
        assert [f["name"] for f in schema["fields"]] == [f["name"] for f in SPOOL_RECORD_SCHEMA["fields"]]
        assert list(reader) == [{"key": b"agt_1", "value": b"x", "timestamp": 1_700_000_000_000}]


def test_unpublished_file_is_invisible(tmp_path: Path) -> None:
    writer = SpoolWriter(tmp_path)
    writer.append(b"k", b"v")
    assert writer.pending == 1
    assert spool_files(tmp_path) == []
    assert list(read_spool(tmp_path)) == []
    writer.publish()
    assert [r.value for r in read_spool(tmp_path)] == [b"v"]
    assert writer.publish() == 0  # nothing pending: no empty file
    assert len(spool_files(tmp_path)) == 1


def test_start_position_and_checkpoint(tmp_path: Path) -> None:
    first = _publish(tmp_path, [b"a0", b"a1", b"a2"])
    time.sleep(0.002)
    _publish(tmp_path, [b"b0", b"b1"])
    checkpoint = SpoolCheckpoint(tmp_path / "offsets" / "ingest.json")
    assert checkpoint.load() is None
    checkpoint.commit(SpoolPosition(first, 2))
    position = SpoolCheckpoint(tmp_path / "offsets" / "ingest.json").load()
    assert position == SpoolPosition(first, 2)
    assert [r.value for r in read_spool(tmp_path, start=position)] == [b"a2", b"b0", b"b1"]


def test_mark_consumed_deletes_or_moves(tmp_path: Path) -> None:
    """Deleted by default (nothing outlives retention in ``consumed/``); ``keep`` moves it there."""
    first = _publish(tmp_path, [b"a"])
    time.sleep(0.002)
    second = _publish(tmp_path, [b"b"])
    mark_consumed(tmp_path, first)
    assert spool_files(tmp_path) == [second]
    assert not (tmp_path / "consumed").exists() and not (tmp_path / first).exists()
    mark_consumed(tmp_path, first)  # idempotent
    mark_consumed(tmp_path, second, keep=True)
    assert spool_files(tmp_path) == []
    assert (tmp_path / "consumed" / second).exists()


def test_late_file_from_another_writer_is_not_skipped(tmp_path: Path) -> None:
    """A file that sorts before the committed one but is still in the spool is read in full."""
    late = SpoolWriter(tmp_path)
    late.append(b"k", b"late")
    early_name_time = time.time_ns()
    on_time = _publish(tmp_path, [b"on-time"])
    late.publish()
    late_name = next(n for n in spool_files(tmp_path) if n != on_time)
    os.rename(tmp_path / late_name, tmp_path / f"{early_name_time // 1_000_000 - 5:013d}-zz-00000001.avro")
    values = [r.value for r in read_spool(tmp_path, start=SpoolPosition(on_time, 1))]
    assert values == [b"late"]


def test_recover_partials_of_a_dead_writer(tmp_path: Path) -> None:
    writer = SpoolWriter(tmp_path)
    writer.append(b"k", b"v1")
    writer.append(b"k", b"v2")
    writer._writer.flush()
    writer._fh.flush()
    part = writer._part
    assert part is not None
    dead = part.with_name(part.name.replace(f"_{os.getpid()}_", "_999999999_"))
    os.rename(part, dead)
    assert recover_partials(tmp_path) == 2
    assert [r.value for r in read_spool(tmp_path)] == [b"v1", b"v2"]
    assert not dead.exists()


def test_live_writers_partials_are_left_alone(tmp_path: Path) -> None:
    writer = SpoolWriter(tmp_path)
    writer.append(b"k", b"v")
    writer._writer.flush()
    assert recover_partials(tmp_path) == 0
    assert writer.publish() == 1


def test_corrupt_file_raises_transport_error(tmp_path: Path) -> None:
    (tmp_path / "0000000000001-bad-00000001.avro").write_bytes(b"not avro at all")
    with pytest.raises(TransportError):
        list(read_spool(tmp_path))


# --- the sender over the spool ----------------------------------------------------------------------


def test_transport_delivers_only_after_publish(tmp_path: Path) -> None:
    transport = SpoolTransport(tmp_path, linger_ms=60_000)
    results: list[DeliveryFailed | None] = []
    transport.send(b"k", b"v1", results.append)
    transport.send(b"k", b"v2", results.append)
    assert transport.poll(0) == 0 and results == []
    assert spool_files(tmp_path) == []
    assert transport.flush(1) == 0
    assert results == [None, None]
    assert [r.value for r in read_spool(tmp_path)] == [b"v1", b"v2"]


def test_transport_linger_publishes_in_poll(tmp_path: Path) -> None:
    transport = SpoolTransport(tmp_path, linger_ms=20)
    results: list[DeliveryFailed | None] = []
    transport.send(b"k", b"v", results.append)
    assert transport.poll(0) == 0
    assert transport.poll(0.5) == 1  # waits for the linger deadline, then publishes
    assert results == [None]


def test_transport_rotates_by_count_and_size(tmp_path: Path) -> None:
    transport = SpoolTransport(tmp_path / "count", linger_ms=60_000, max_file_records=3)
    results: list[DeliveryFailed | None] = []
    for i in range(7):
        transport.send(b"k", b"%d" % i, results.append)
    assert len(spool_files(tmp_path / "count")) == 2  # two full files published, one record pending
    transport.close()
    assert len(spool_files(tmp_path / "count")) == 3
    assert results == [None] * 7
    assert [r.value for r in read_spool(tmp_path / "count")] == [b"%d" % i for i in range(7)]

    sized = SpoolTransport(tmp_path / "size", linger_ms=60_000, max_file_bytes=10_000)
    for _ in range(5):
        sized.send(b"k", b"x" * 4_000, results.append)
    assert len(spool_files(tmp_path / "size")) == 1  # 3 records crossed 10 KB
    sized.close()


def test_transport_publish_failure_reaches_callbacks(tmp_path: Path) -> None:
    transport = SpoolTransport(tmp_path, linger_ms=60_000)
    results: list[DeliveryFailed | None] = []
    transport.send(b"k", b"v", results.append)
    os.chmod(tmp_path, 0o500)
    try:
        if os.access(tmp_path, os.W_OK):  # running as root: permissions do not bite; break the rename instead
            part = transport._writer._part
            assert part is not None
            transport._writer._part = part.with_name("missing" + part.name)
        transport.flush()
    finally:
        os.chmod(tmp_path, 0o700)
    assert len(results) == 1 and isinstance(results[0], DeliveryFailed)
    transport.send(b"k", b"after", results.append)  # the transport keeps working
    transport.flush()
    assert results[1] is None


# --- the source over the spool ----------------------------------------------------------------------


def _publish_files(directory: Path, *files: list[bytes]) -> None:
    """One writer publishing ``files`` in order (one writer's files sort in publication order)."""
    writer = SpoolWriter(directory)
    for values in files:
        for v in values:
            writer.append(b"agt", v)
        writer.publish()


def _source(tmp_path: Path) -> SpoolSource:
    return SpoolSource(directory=tmp_path / "spool", checkpoint=tmp_path / "ckpt.json", topic="t")


def test_spool_source_reads_in_order_and_commits_progress(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    _publish_files(spool, [b"a0", b"a1", b"a2"], [b"b0", b"b1"])
    src = _source(tmp_path)
    first = src.consume(4, 0.1)
    assert [m.value for m in first] == [b"a0", b"a1", b"a2", b"b0"]
    assert [m.offset for m in first] == [0, 1, 2, 0]
    assert isinstance(first[0].partition, str) and first[0].key == b"agt"
    src.commit({first[0].partition: 3, first[3].partition: 1})
    assert len(spool_files(spool)) == 1  # the first file is fully committed: out of the spool
    src.close()

    again = _source(tmp_path)  # a restart resumes after the last commit
    rest = again.consume(10, 0.1)
    assert [m.value for m in rest] == [b"b1"]
    assert again.caught_up()
    again.commit({rest[0].partition: 2})
    assert spool_files(spool) == []
    assert again.consume(10, 0.05) == []
    again.close()


def test_one_embedded_consumer_per_spool(tmp_path: Path) -> None:
    src = _source(tmp_path)
    with pytest.raises(TransportError, match="another embedded consumer"):
        _source(tmp_path)
    src.close()

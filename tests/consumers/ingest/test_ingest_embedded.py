"""Ingest in embedded mode (local spool, local blobs, chdb): every batch rule, without services."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from ingest_testdata import (
    chdb_index,
    content_bytes,
    current_row,
    encoded,
    flag_bytes,
    make_capture,
    new_signer,
    sealed,
    sha,
    trust_for,
)

from consumers.app.settings import load_service_settings
from consumers.index import ChdbIndex
from consumers.ingest.batch import BatchProcessor
from consumers.ingest.dlq import DlqLimit, DlqLimitExceeded
from consumers.ingest.service import build_service
from consumers.ingest.store import update_decisions
from consumers.storage.reader import StoredCaptureMismatch, load_capture
from consumers.storage.segments import SegmentCorrupt
from consumers.storage.store import current_row as stored_row
from consumers.verify.stored import IndexRowMismatch, verify_stored
from producers.blobstore import LocalBlobStore
from producers.claimcheck import claim_key
from producers.evidence import Signer, TrustStore
from producers.transports.base import SourceMessage
from producers.transports.spool.dead_letter import LocalDeadLetters
from producers.transports.spool.files import SpoolWriter
from schemas.codec import encode_event, fingerprint
from schemas.errors import CaptureNotFound, ContentHashMismatch, SignatureInvalid

TOPIC = "blackbox.captures.v1"


@pytest.fixture
def signer() -> Signer:
    return new_signer()


@pytest.fixture
def trust(signer: Signer) -> TrustStore:
    return trust_for(signer)


@pytest.fixture
def index(tmp_path: Path) -> Iterator[ChdbIndex]:
    with chdb_index(tmp_path / "chdb") as idx:
        yield idx


@pytest.fixture
def store(tmp_path: Path) -> LocalBlobStore:
    return LocalBlobStore(tmp_path / "blobs")


@pytest.fixture
def processor(store: LocalBlobStore, index: ChdbIndex, trust: TrustStore, tmp_path: Path) -> BatchProcessor:
    return BatchProcessor(
        store=store, index=index, trust=trust, dead_letters=LocalDeadLetters(tmp_path / "dlq")
    )


def _msgs(values: Sequence[bytes], *, partition: int = 0, start: int = 0) -> list[SourceMessage]:
    return [SourceMessage(TOPIC, partition, start + i, b"agt_support_1", v) for i, v in enumerate(values)]


def _count(index: ChdbIndex, table: str, final: bool = False) -> int:
    return int(index.query(f"SELECT count() AS n FROM {table}{' FINAL' if final else ''}")[0]["n"])


def _poison(signer: Signer) -> dict[str, bytes]:
    good = encoded(make_capture(900), signer)
    return {
        "truncated": good[: len(good) // 2],
        "bad_magic": b"\x00\x01" + good[2:],
        "unknown_fingerprint": good[:2] + b"\xde\xad\xbe\xef\x00\x00\x00\x00" + good[10:],
        "empty": b"",
    }


# --- decode, DLQ, quarantine, the partition keeps moving -------------------------------------------------


def test_poison_goes_to_dlq_bad_signature_to_quarantine_and_the_spool_moves_on(
    tmp_path: Path, index: ChdbIndex, signer: Signer, trust: TrustStore
) -> None:
    settings = load_service_settings(data_dir=tmp_path / "bb", transport="spool", blob="local")
    forger = new_signer()
    caps = [sealed(make_capture(i), signer) for i in range(4)]
    forged = sealed(make_capture(50), forger)  # a key the trust store does not know
    tampered = sealed(make_capture(51), signer)
    tampered["executionTrace"]["finalOutputText"] += " (edited)"
    poison = _poison(signer)
    from schemas.codec import encode_capture

    values = [
        encode_capture(caps[0]),
        poison["truncated"],
        encode_capture(forged),
        poison["bad_magic"],
        encode_capture(caps[1]),
        encode_capture(tampered),
        poison["unknown_fingerprint"],
        encode_capture(caps[2]),
        poison["empty"],
        encode_capture(caps[3]),
    ]
    writer = SpoolWriter(settings.resolved_spool_dir)
    for v in values:
        writer.append(b"agt_support_1", v)
    writer.publish()

    with build_service(settings, index=index, trust=trust, batch_size=4, max_wait=0.05) as service:
        stats = service.run(drain=True)
    assert (stats.messages, stats.indexed, stats.quarantined, stats.dead_lettered) == (10, 4, 2, 4)

    letters = sorted((tmp_path / "bb" / "dlq").glob("*/*.json"))
    reasons = {int(p.stem): json.loads(p.read_text())["reason"] for p in letters}
    assert reasons == {1: "decode_error", 3: "decode_error", 6: "unknown_fingerprint", 8: "decode_error"}
    meta = json.loads(letters[0].read_text())
    assert (
        meta["original_topic"] == TOPIC
        and meta["original_offset"] == "1"
        and meta["original_partition"].endswith(".avro")
    )
    assert (letters[0].with_suffix(".msg")).read_bytes() == poison["truncated"]

    q = {r["decision_id"]: r for r in index.query("SELECT * FROM quarantine FINAL")}
    assert q["dec_t_000050"]["reason"] == "KeyNotTrusted" and q["dec_t_000050"]["part"] == "key"
    assert q["dec_t_000051"]["reason"] == "ContentHashMismatch"
    assert q["dec_t_000051"]["part"] == "executionTrace.finalOutputText"
    trusted = {
        r["decision_id"]
        for r in index.query("SELECT decision_id FROM decisions FINAL WHERE trust = 'verified'")
    }
    assert trusted == {c["decisionId"] for c in caps}  # quarantined captures never reach decisions
    assert _count(index, "decisions") == 4

    # the spool was fully committed: a second run finds nothing
    with build_service(settings, index=index, trust=trust, max_wait=0.05) as service:
        assert service.run(drain=True).messages == 0

    shown = load_capture("dec_t_000051", index=index, store=LocalBlobStore(settings.resolved_blob_dir))
    assert shown.quarantined and shown.quarantine[0]["reason"] == "ContentHashMismatch"
    assert shown.capture["executionTrace"]["finalOutputText"].endswith("(edited)")  # kept, flagged


def test_a_fully_invalid_batch_stops_without_committing(
    tmp_path: Path, index: ChdbIndex, signer: Signer, trust: TrustStore
) -> None:
    settings = load_service_settings(data_dir=tmp_path / "bb")
    writer = SpoolWriter(settings.resolved_spool_dir)
    for _ in range(6):
        writer.append(b"k", b"\xc3\x01garbage")
    writer.publish()
    limit = DlqLimit(max_consecutive_invalid=3)
    with (
        build_service(settings, index=index, trust=trust, dlq_limit=limit, max_wait=0.05) as service,
        pytest.raises(DlqLimitExceeded, match="all 6 messages of the batch are invalid"),
    ):
        service.run(drain=True)
    assert not (tmp_path / "bb" / "dlq").exists()  # nothing dead-lettered, nothing committed
    assert not (tmp_path / "bb" / "ingest" / "spool-checkpoint.json").exists()

    # batches of one: isolated poison is dead-lettered until the run of invalid messages passes the limit
    with build_service(
        settings, index=index, trust=trust, dlq_limit=limit, batch_size=1, max_wait=0.05
    ) as service:
        with pytest.raises(DlqLimitExceeded):
            service.run(drain=True)
        assert service.loop.stats.dead_lettered == 3


# --- dedup, conflicts, redelivery ------------------------------------------------------------------------


def test_same_batch_twice_gives_one_row_per_decision(
    processor: BatchProcessor, index: ChdbIndex, store: LocalBlobStore, signer: Signer
) -> None:
    values = [
        encoded(
            make_capture(i, flagged=i % 3 == 0, level="structured-only" if i % 4 == 1 else "full"), signer
        )
        for i in range(12)
    ]
    first = processor.process(_msgs(values))
    again = processor.process(_msgs(values))
    assert (first.indexed, first.duplicates, again.indexed, again.duplicates) == (12, 0, 0, 12)
    assert again.segments == ()  # nothing new to write
    assert _count(index, "decisions") == 12 == _count(index, "decisions", final=True)
    assert _count(index, "tool_calls") == 24 and _count(index, "memory_entries") == 24
    classes = {r["retention_class"] for r in index.query("SELECT retention_class FROM decisions")}
    assert classes == {"consequential", "routine", "structured"}
    assert len(first.segments) == 3  # one PUT per class per batch
    assert all(store.exists(k) for k in first.segments)
    # within one batch too
    dup = processor.process(_msgs([values[0], values[0]], start=100))
    assert (dup.indexed, dup.duplicates) == (0, 2)


def test_crash_between_segment_and_index_redelivers_to_the_same_segment(
    processor: BatchProcessor, index: ChdbIndex, store: LocalBlobStore, signer: Signer
) -> None:
    values = [encoded(make_capture(i), signer) for i in range(5)]

    class Crash(Exception):
        pass

    def crash(point: str) -> None:
        if point == "after_segments":
            raise Crash

    with pytest.raises(Crash):
        processor.process(_msgs(values, start=40), hook=crash)
    assert _count(index, "decisions") == 0
    written = sorted(store.list("segments/"))
    result = processor.process(_msgs(values, start=40))
    assert list(result.segments) == written  # the same key, overwritten
    assert sorted(store.list("segments/")) == written
    assert _count(index, "decisions") == 5


def test_same_id_different_content_is_quarantined_and_reported(
    processor: BatchProcessor, index: ChdbIndex, store: LocalBlobStore, signer: Signer
) -> None:
    original = sealed(make_capture(7), signer)
    other = make_capture(7)
    other["executionTrace"]["finalOutputText"] = "a different answer"
    from schemas.codec import encode_capture

    first = processor.process(_msgs([encode_capture(original)]))
    clash = processor.process(_msgs([encoded(other, signer)], start=1))
    assert first.indexed == 1 and clash.conflicts == ("dec_t_000007",) and clash.quarantined == 1
    again = processor.process(_msgs([encoded(other, signer)], start=2))  # redelivered: not quarantined twice
    assert again.conflicts == ("dec_t_000007",) and again.quarantined == 0
    assert _count(index, "quarantine", final=True) == 1

    shown = load_capture("dec_t_000007", index=index, store=store)
    assert shown.content_state == "full" and shown.capture == original  # the first one stays the evidence
    assert [q["reason"] for q in shown.quarantine] == ["ConflictingDuplicate"]
    assert shown.row == stored_row(index, "dec_t_000007")  # the one-query read adds no column of its own
    # a conflict inside one batch
    mixed = processor.process(
        _msgs(
            [encoded(make_capture(8), signer), encoded(make_capture(8, seed=99, size=3000), signer)], start=10
        )
    )
    assert mixed.indexed == 1 and mixed.conflicts == ("dec_t_000008",)


# --- flags -------------------------------------------------------------------------------------------------


def test_flags_upgrade_before_with_and_after_the_capture(
    processor: BatchProcessor, index: ChdbIndex, signer: Signer
) -> None:
    early, same, late = make_capture(1), make_capture(2), make_capture(3)
    assert processor.process(_msgs([flag_bytes("dec_t_000001", signer)])).flags == 1  # flag first
    r = processor.process(
        _msgs(
            [
                encoded(early, signer),
                encoded(same, signer),
                flag_bytes("dec_t_000002", signer, failure=False),
                encoded(late, signer),
            ],
            start=1,
        )
    )
    assert r.indexed == 3 and r.flags == 1 and r.upgraded == 0
    r = processor.process(_msgs([flag_bytes("dec_t_000003", signer)], start=5))
    assert r.upgraded == 1
    rows = {
        x["decision_id"]: x
        for x in index.query(
            "SELECT decision_id, consequential, retention_class, failed_any, version FROM decisions_current"
        )
    }
    for did in ("dec_t_000001", "dec_t_000002", "dec_t_000003"):
        assert rows[did]["consequential"] and rows[did]["retention_class"] == "consequential", did
    assert rows["dec_t_000001"]["failed_any"] and not rows["dec_t_000002"]["failed_any"]
    assert rows["dec_t_000003"]["failed_any"] and rows["dec_t_000003"]["version"] > 0
    assert _count(index, "decisions", final=True) == 3

    # unsigned and forged flags are quarantined, never applied
    r = processor.process(
        _msgs([flag_bytes("dec_t_000004", None), flag_bytes("dec_t_000004", new_signer())], start=6)
    )
    assert r.flags == 0 and r.quarantined == 2
    reasons = sorted(x["reason"] for x in index.query("SELECT reason FROM quarantine FINAL"))
    assert reasons == ["flag KeyNotTrusted", "flag SignatureInvalid"]


# --- claim checks -------------------------------------------------------------------------------------------


def test_claim_checks_resolve_or_dead_letter(
    processor: BatchProcessor, index: ChdbIndex, store: LocalBlobStore, signer: Signer, tmp_path: Path
) -> None:
    capture = sealed(make_capture(1, size=60_000, flagged=True), signer)
    from schemas.codec import encode_capture

    body = encode_capture(capture)
    digest = sha(body)
    key = claim_key(agent_id=capture["agentId"], decision_id=capture["decisionId"], sha256_hex=digest[7:])
    store.put(key, body)

    def claim(**over: Any) -> bytes:
        value = {
            "decisionId": capture["decisionId"],
            "agentId": capture["agentId"],
            "blobKey": key,
            "sha256": digest,
            "size": len(body),
            "captureLevel": "full",
            "consequential": True,
        }
        return encode_event("claim_check", {**value, **over})

    r = processor.process(_msgs([claim(), claim(blobKey="claims/gone.avro"), claim(sha256=sha(b"x"))]))
    assert (r.indexed, r.dead_lettered) == (1, 2)
    reasons = sorted(json.loads(p.read_text())["reason"] for p in (tmp_path / "dlq").glob("*/*.json"))
    assert reasons == ["claim_check_mismatch", "claim_check_missing"]
    shown = load_capture(capture["decisionId"], index=index, store=store)
    assert shown.capture == capture and shown.row["retention_class"] == "consequential"
    assert store.exists(key)  # left for redelivery; lifecycle rules clean claims/


# --- show and verify_stored ---------------------------------------------------------------------------------


def test_show_returns_every_content_field_byte_identical(
    processor: BatchProcessor, index: ChdbIndex, store: LocalBlobStore, signer: Signer
) -> None:
    caps = [sealed(make_capture(i, size=20_000), signer) for i in range(3)]
    from schemas.codec import encode_capture

    processor.process(_msgs([encode_capture(c) for c in caps]))
    for c in caps:
        shown = load_capture(c["decisionId"], index=index, store=store)
        assert content_bytes(shown.capture) == content_bytes(c)
        assert shown.capture == c and shown.content_state == "full" and not shown.quarantined
        assert shown.to_json()["stored"]["trust"] == "verified"
    with pytest.raises(CaptureNotFound):
        load_capture("dec_missing", index=index, store=store)


def test_compacted_decision_shows_metadata_and_still_verifies(
    processor: BatchProcessor, index: ChdbIndex, store: LocalBlobStore, signer: Signer, trust: TrustStore
) -> None:
    capture = sealed(make_capture(3), signer)
    from schemas.codec import encode_capture

    result = processor.process(_msgs([encode_capture(capture)]))
    update_decisions(index, ["dec_t_000003"], {"content_state": "metadata-only", "segment_key": ""})
    store.delete(result.segments[0])
    shown = load_capture("dec_t_000003", index=index, store=store)
    assert shown.content_state == "metadata-only" and "compacted" in shown.to_json()["note"]
    assert "finalOutputText" not in shown.capture["executionTrace"]
    assert shown.capture["executionTrace"]["finalOutputHash"] == capture["executionTrace"]["finalOutputHash"]
    report = verify_stored("dec_t_000003", index=index, store=store, trust=trust)
    assert report.content_state == "metadata-only" and "executionTrace.finalOutputText" in report.absent_parts


def test_tampered_segment_and_index_rows_are_rejected_naming_the_part(
    processor: BatchProcessor, index: ChdbIndex, store: LocalBlobStore, signer: Signer, trust: TrustStore
) -> None:
    caps = [sealed(make_capture(i), signer) for i in range(3)]
    from schemas.codec import encode_capture

    result = processor.process(_msgs([encode_capture(c) for c in caps]))
    assert verify_stored("dec_t_000000", index=index, store=store, trust=trust).checked_parts > 10

    # a segment byte flipped: zstd's checksum or the row's sha256 refuses it
    key = result.segments[0]
    row = current_row(index, "dec_t_000001")
    assert row is not None
    body = bytearray(store.get(key))
    body[row["segment_offset"] + row["segment_length"] // 2] ^= 0x01
    store.put(key, bytes(body))
    with pytest.raises(SegmentCorrupt, match="checksum"):
        verify_stored("dec_t_000001", index=index, store=store, trust=trust)

    # a recompressed, re-hashed segment whose content was edited: the content hash names the part
    edited = dict(caps[2])
    edited["executionTrace"] = {**caps[2]["executionTrace"], "finalOutputText": "edited"}
    from consumers.storage.segments import SegmentWriter

    w = SegmentWriter(retention_class="routine", topic="x", partition=0, first_offset=0)
    w.append(encode_capture(edited))
    forged_key, forged_body = w.finish()
    store.put(forged_key, forged_body)
    loc = w.locations()[0]
    update_decisions(
        index,
        ["dec_t_000002"],
        {
            "segment_key": forged_key,
            "segment_offset": loc.offset,
            "segment_length": loc.length,
            "content_sha256": "",
        },
    )
    with pytest.raises(ContentHashMismatch) as mismatch:
        verify_stored("dec_t_000002", index=index, store=store, trust=trust)
    assert mismatch.value.part == "executionTrace.finalOutputText"
    with pytest.raises(StoredCaptureMismatch):  # show refuses bytes that are not the recorded ones
        update_decisions(index, ["dec_t_000002"], {"content_sha256": sha(b"other")})
        load_capture("dec_t_000002", index=index, store=store)

    # an index row edited after ingest
    update_decisions(index, ["dec_t_000000"], {"prompt_version": "v9.9"})
    with pytest.raises(IndexRowMismatch) as row_err:
        verify_stored("dec_t_000000", index=index, store=store, trust=trust)
    assert row_err.value.part == "index.decisions.prompt_version"
    caps_ok = processor.process(_msgs([encoded(make_capture(20), signer)], start=50))
    assert caps_ok.indexed == 1
    index.command(
        "ALTER TABLE tool_calls UPDATE output_hash = 'sha256:00' WHERE decision_id = 'dec_t_000020' SETTINGS mutations_sync = 1"
    )
    with pytest.raises(IndexRowMismatch) as child_err:
        verify_stored("dec_t_000020", index=index, store=store, trust=trust)
    assert child_err.value.part == "index.tool_calls.output_hash"
    # a forged signature on an otherwise valid capture cannot come in through ingest at all
    forged = sealed(make_capture(30), signer)
    forged["agentId"] = "agt_other"
    assert processor.process(_msgs([encode_capture(forged)], start=60)).quarantined == 1
    with pytest.raises(SignatureInvalid):
        from producers.evidence import verify_capture

        verify_capture(forged, trust)


def test_unknown_fingerprint_constant_is_really_unknown() -> None:
    assert fingerprint("capture") != b"\xde\xad\xbe\xef\x00\x00\x00\x00"


# --- worker processes and the CLI -------------------------------------------------------------------------


def test_worker_processes_write_the_same_segments_as_inline(
    tmp_path: Path, store: LocalBlobStore, signer: Signer, trust: TrustStore
) -> None:
    values = [encoded(make_capture(i, flagged=i % 4 == 0), signer) for i in range(12)]
    values.insert(5, b"\xc3\x01broken")
    results: list[Any] = []
    for workers in (0, 2):
        with chdb_index(tmp_path / f"chdb{workers}") as idx:
            proc = BatchProcessor(
                store=store,
                index=idx,
                trust=trust,
                dead_letters=LocalDeadLetters(tmp_path / f"dlq{workers}"),
                workers=workers,
            )
            try:
                results.append(proc.process(_msgs(values)))
                rows = idx.query(
                    "SELECT decision_id, segment_key, segment_offset FROM decisions ORDER BY decision_id"
                )
            finally:
                proc.close()
        results.append(rows)
    inline, inline_rows, pooled, pooled_rows = results
    assert inline == pooled and inline_rows == pooled_rows
    assert inline.indexed == 12 and inline.dead_lettered == 1


def test_cli_consume_and_show(tmp_path: Path, signer: Signer, trust: TrustStore) -> None:
    from typer.testing import CliRunner

    from consumers.cli import app

    data = tmp_path / "bb"
    trust.save(data / "trust.toml")
    capture = sealed(make_capture(1, size=3000), signer)
    from schemas.codec import encode_capture

    writer = SpoolWriter(data / "spool")
    writer.append(b"agt_support_1", encode_capture(capture))
    writer.append(b"agt_support_1", b"junk")
    writer.publish()
    env = {"BLACKBOX_DATA_DIR": str(data), "BLACKBOX_TRANSPORT": "spool", "BLACKBOX_BLOB": "local"}
    runner = CliRunner()
    result = runner.invoke(app, ["consume", "--drain", "--max-wait", "0.1"], env=env)
    assert result.exit_code == 0, result.output
    assert "indexed=1" in result.output and "dead_lettered=1" in result.output
    shown = runner.invoke(app, ["show", "dec_t_000001", "--json"], env=env)
    assert shown.exit_code == 0, shown.output
    view = json.loads(shown.output)
    assert view["capture"] == capture and view["contentState"] == "full"
    assert view["stored"]["trust"] == "verified" and view["stored"]["segment_key"].startswith(
        "segments/routine/"
    )
    summary = runner.invoke(app, ["show", "dec_t_000001"], env=env)
    assert (
        summary.exit_code == 0 and "dec_t_000001" in summary.output and "segments/routine/" in summary.output
    )
    missing = runner.invoke(app, ["show", "dec_nope"], env=env)
    assert missing.exit_code != 0
    with chdb_index(data / "index", database="blackbox") as idx:
        log = idx.query("SELECT decision_id, action, outcome FROM access_log ORDER BY at")
    assert [(r["decision_id"], r["action"], r["outcome"]) for r in log] == [
        ("dec_t_000001", "show", "allowed"),
        ("dec_t_000001", "show", "allowed"),
    ]

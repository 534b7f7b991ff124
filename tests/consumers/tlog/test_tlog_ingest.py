"""The log at ingest (embedded: local blobs, chdb): one leaf per accepted capture, never two, proofs that
verify with the SDK alone, and ``log verify`` catching a deleted capture, a rewritten log, a changed tile
and a capture time later than the log saw it - with trusted time from an RFC 3161 TSA on loopback."""

from __future__ import annotations

import base64
import datetime as dt
import json
import random
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from ingest_testdata import chdb_index, encoded, make_capture, new_signer, sealed, trust_for
from tsa import running_tsa

from consumers.index import ChdbIndex
from consumers.ingest.batch import BatchProcessor
from consumers.tlog import prove
from consumers.tlog.audit import AuditReport, audit
from consumers.tlog.checkpoints import LogSigner, latest, load_log_signer
from consumers.tlog.frontier import object_key
from consumers.tlog.log import Entry, TransparencyLog, catch_up
from consumers.tlog.tiles import TreeReader
from consumers.tlog.timestamp import load_roots
from producers.blobstore import LocalBlobStore
from producers.evidence import Signer
from producers.evidence.merkle import merkle_root
from producers.evidence.tlog import (
    capture_leaf,
    leaf_bytes,
    open_checkpoint,
    verify_consistency,
    verify_inclusion,
)
from producers.transports.base import SourceMessage
from producers.transports.spool.dead_letter import LocalDeadLetters
from schemas.codec import encode_capture
from schemas.errors import TransparencyLogError

TOPIC = "blackbox.captures.v1"
PREFIX = "tlog/test"
ORIGIN = "blackbox.test/log"


@pytest.fixture
def signer() -> Signer:
    return new_signer()


@pytest.fixture
def index(tmp_path: Path) -> Iterator[ChdbIndex]:
    with chdb_index(tmp_path / "chdb") as idx:
        yield idx


@pytest.fixture
def store(tmp_path: Path) -> LocalBlobStore:
    return LocalBlobStore(tmp_path / "blobs")


@pytest.fixture
def log_signer(tmp_path: Path) -> LogSigner:
    return load_log_signer(tmp_path / "tlog.key", ORIGIN)


def _log(store: LocalBlobStore, index: ChdbIndex, signer: LogSigner, tmp: Path, **kw: Any) -> TransparencyLog:
    kw.setdefault("interval", 3600.0)
    return TransparencyLog(
        store=store, index=index, signer=signer, prefix=PREFIX, lock_path=tmp / "tlog.lock", **kw
    )


def _processor(
    store: LocalBlobStore, index: ChdbIndex, signer: Signer, log: TransparencyLog, tmp: Path
) -> BatchProcessor:
    return BatchProcessor(
        store=store,
        index=index,
        trust=trust_for(signer),
        dead_letters=LocalDeadLetters(tmp / "dlq"),
        tlog=log,
    )


def _msgs(values: Sequence[bytes], *, start: int = 0) -> list[SourceMessage]:
    return [SourceMessage(TOPIC, 0, start + i, b"agt_support_1", v) for i, v in enumerate(values)]


def _captures(signer: Signer, ids: range, **kw: Any) -> list[dict[str, Any]]:
    return [sealed(make_capture(i, size=500, **kw), signer) for i in ids]


def _audit(store: LocalBlobStore, index: ChdbIndex, key: LogSigner, **kw: Any) -> AuditReport:
    return audit(store=store, index=index, prefix=PREFIX, key=key.key, **kw)


def _kinds(report: AuditReport) -> set[str]:
    return {f.kind for f in report.findings}


def test_each_accepted_capture_gets_one_leaf_whose_proof_verifies_with_the_sdk(
    store: LocalBlobStore, index: ChdbIndex, signer: Signer, log_signer: LogSigner, tmp_path: Path
) -> None:
    log = _log(store, index, log_signer, tmp_path)
    processor = _processor(store, index, signer, log, tmp_path)
    captures = _captures(signer, range(30))
    batches = [captures[0:10], captures[10:20], captures[20:30]]
    results = [
        processor.process(_msgs([encoded(c, signer) for c in b], start=10 * i)) for i, b in enumerate(batches)
    ]
    assert [r.logged for r in results] == [10, 10, 10]
    again = processor.process(_msgs([encoded(c, signer) for c in batches[1]], start=10))  # redelivered
    assert again.duplicates == 10 and again.logged == 0
    forged = dict(
        captures[0], decisionId="dec_forged"
    )  # signature no longer matches: quarantined, not logged
    tampered = processor.process(_msgs([encode_capture(forged)], start=40))
    assert tampered.quarantined == 1 and tampered.logged == 0
    with pytest.raises(TransparencyLogError, match="no checkpoint covers it yet"):
        prove(store, captures[3]["decisionId"], index=index, prefix=PREFIX)
    note = log.publish()
    assert note is not None and open_checkpoint(note, log_signer.vkey).size == 30
    assert log.publish() is None  # nothing new: no second checkpoint of the same size

    for capture in captures:
        proof = prove(store, capture["decisionId"], index=index, prefix=PREFIX)
        assert set(proof) == {"leafIndex", "treeSize", "hashes", "checkpoint", "leaf"}
        leaf = capture_leaf(capture)  # a third party recomputes the leaf from the capture alone
        assert base64.b64decode(proof["leaf"]) == leaf
        assert verify_inclusion(leaf, json.loads(json.dumps(proof)), log_signer.vkey).size == 30
    report = _audit(store, index, log_signer)
    assert report.ok, report.findings
    assert (report.leaves, report.checkpoints) == (30, 1)


def test_a_batch_that_died_between_its_rows_and_its_leaves_is_logged_on_redelivery(
    store: LocalBlobStore, index: ChdbIndex, signer: Signer, log_signer: LogSigner, tmp_path: Path
) -> None:
    log = _log(store, index, log_signer, tmp_path)
    processor = _processor(store, index, signer, log, tmp_path)
    batch = _msgs([encoded(c, signer) for c in _captures(signer, range(12))])

    def die(point: str) -> None:
        if point == "after_tlog_tiles":
            raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        processor.process(batch, hook=die)  # decisions indexed, leaves integrated (swapped), no leaf rows
    assert index.query("SELECT count() AS n FROM tlog_leaves")[0]["n"] == 0
    fresh = _processor(store, index, signer, _log(store, index, log_signer, tmp_path), tmp_path)  # a restart
    redelivered = fresh.process(batch)
    # the swap made them part of the log before the crash: the rows come from the tiles, no leaf twice
    assert redelivered.duplicates == 12 and redelivered.logged == 0
    assert fresh.tlog is not None and fresh.tlog.publish() is not None
    assert fresh.tlog.size == 12
    report = _audit(store, index, log_signer)
    assert report.ok and report.leaves == 12, report.findings


def test_ten_thousand_appends_stay_consistent_with_every_checkpoint(
    store: LocalBlobStore, index: ChdbIndex, log_signer: LogSigner, tmp_path: Path
) -> None:
    log = _log(store, index, log_signer, tmp_path, interval=0.0)  # a checkpoint after every append
    now = dt.datetime.now(dt.UTC)
    rng = random.Random(13)
    leaves: list[bytes] = []
    checkpoints: list[str] = []
    while len(leaves) < 10_000:
        n = min(rng.choice([1, 7, 255, 256, 300, 997]), 10_000 - len(leaves))
        entries = [
            Entry(
                f"d{len(leaves) + i}",
                now,
                leaf_bytes(
                    decision_id=f"d{len(leaves) + i}",
                    captured_at=now.isoformat(),
                    envelope_hash="sha256:" + "ab" * 32,
                ),
            )
            for i in range(n)
        ]
        assert log.append(entries) == n
        leaves.extend(e.leaf for e in entries)
        current = latest(store, PREFIX, log_signer.key)
        assert current is not None and current[1].size == len(leaves)
        checkpoints.append(current[0])
    final = open_checkpoint(checkpoints[-1], log_signer.vkey)
    assert final.root == merkle_root(leaves)
    reader = TreeReader(store, PREFIX, final.size)
    for note in checkpoints:
        old = open_checkpoint(note, log_signer.vkey)
        verify_consistency(old.size, final.size, old.root, final.root, reader.consistency(old.size))
    report = _audit(store, index, log_signer, since=checkpoints[0])
    # no decisions were indexed for these synthetic leaves: only missing-capture findings, nothing else
    assert _kinds(report) == {"missing-capture"} and report.checkpoints == len(checkpoints)


def test_log_verify_catches_a_deleted_capture_a_rewritten_log_and_a_changed_tile(
    store: LocalBlobStore, index: ChdbIndex, signer: Signer, log_signer: LogSigner, tmp_path: Path
) -> None:
    log = _log(store, index, log_signer, tmp_path)
    processor = _processor(store, index, signer, log, tmp_path)
    captures = _captures(signer, range(20))
    processor.process(_msgs([encoded(c, signer) for c in captures]))
    kept = log.publish()
    assert kept is not None and _audit(store, index, log_signer, since=kept).ok

    # someone deletes a capture...
    victim = captures[7]["decisionId"]
    index.command(
        "ALTER TABLE decisions DELETE WHERE decision_id = {id:String} SETTINGS mutations_sync = 1",
        {"id": victim},
    )
    found = _audit(store, index, log_signer, since=kept)
    assert _kinds(found) == {"missing-capture"} and victim in found.findings[0].detail

    # ...and rewrites the log without its leaf, re-signing with the log's own key
    for key in list(store.list(PREFIX + "/")):
        store.delete(key)
    index.command("TRUNCATE TABLE tlog_leaves")
    rewritten = _log(store, index, log_signer, tmp_path)
    rest = [c for c in captures if c["decisionId"] != victim]
    now = dt.datetime.now(dt.UTC)
    rewritten.append([Entry(c["decisionId"], now, capture_leaf(c)) for c in rest])
    rewritten.publish()
    caught = _audit(store, index, log_signer, since=kept)
    assert "consistency" in _kinds(caught), caught.findings
    assert _audit(store, index, log_signer).ok  # without the old checkpoint, the rewrite is self-consistent

    # a changed tile is caught by recomputing the tiles
    tile = object_key(PREFIX, "0/0.p/19")
    body = bytearray(store.get(tile))
    body[5] ^= 1
    store.put(tile, bytes(body))
    assert "tile" in _kinds(_audit(store, index, log_signer))


def test_the_index_is_not_the_sequencer_a_second_index_catches_up_from_the_tiles(
    store: LocalBlobStore, index: ChdbIndex, log_signer: LogSigner, tmp_path: Path
) -> None:
    """Another index on the same log (another ingest host), or one that lost rows, cannot fork it: the
    size and order come from the log's state, the rows from the entry bundles."""
    log = _log(store, index, log_signer, tmp_path)
    now = dt.datetime.now(dt.UTC)

    def leaf(did: str) -> bytes:
        return leaf_bytes(decision_id=did, captured_at=now.isoformat(), envelope_hash="sha256:" + "cd" * 32)

    assert log.append([Entry("d1", now, leaf("d1")), Entry("d2", now, leaf("d2"))]) == 2
    with chdb_index(tmp_path / "chdb") as other_index:  # another (empty) index on the same log
        other = _log(store, other_index, log_signer, tmp_path / "other")
        # d2 redelivered to the other host is not logged twice; d3 goes after it
        assert other.append([Entry("d2", now, leaf("d2")), Entry("d3", now, leaf("d3"))]) == 1
        rows = {
            r["decision_id"]: r["leaf_index"] for r in other_index.query("SELECT * FROM tlog_leaves FINAL")
        }
        assert rows == {"d1": 0, "d2": 1, "d3": 2}
    # the first index lost a row: it is written again from the tiles, and nothing forks
    index.command("ALTER TABLE tlog_leaves DELETE WHERE leaf_index = 1 SETTINGS mutations_sync = 1")
    assert log.append([Entry("d4", now, leaf("d4"))]) == 1
    rows = {r["decision_id"]: r["leaf_index"] for r in index.query("SELECT * FROM tlog_leaves FINAL")}
    assert rows == {"d1": 0, "d2": 1, "d3": 2, "d4": 3}
    note = log.publish()
    assert note is not None and open_checkpoint(note, log_signer.vkey).size == 4
    assert TreeReader(store, PREFIX, 4).root() == merkle_root([leaf(f"d{i}") for i in range(1, 5)])


def test_checkpoints_carry_rfc3161_time_and_a_capture_dated_after_its_checkpoint_is_reported(
    store: LocalBlobStore, index: ChdbIndex, signer: Signer, log_signer: LogSigner, tmp_path: Path
) -> None:
    with running_tsa() as tsa:
        log = _log(store, index, log_signer, tmp_path, tsa_url=tsa.url)
        processor = _processor(store, index, signer, log, tmp_path)
        honest = _captures(signer, range(5))
        future = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=10)
        late_capture = make_capture(99, size=500)
        late_capture["capturedAt"] = future.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        late = sealed(late_capture, signer)
        processor.process(_msgs([encoded(c, signer) for c in [*honest, late]]))
        log.publish()
        assert len(tsa.requests) == 1
        roots = load_roots(tsa.write_roots(tmp_path / "roots.pem"))
        report = _audit(store, index, log_signer, tsa_roots=roots, skew=dt.timedelta(seconds=60))
    assert (report.timestamps, report.timestamps_signed) == (1, 1)
    late_findings = [f for f in report.findings if f.kind == "captured-after-checkpoint"]
    assert (
        len(late_findings) == 1
        and "dec_t_000099" in late_findings[0].detail
        and "RFC 3161" in late_findings[0].detail
    )
    assert _kinds(report) == {"captured-after-checkpoint"}

    with running_tsa() as stranger:  # a TSA the auditor does not trust
        wrong = load_roots(stranger.write_roots(tmp_path / "other.pem"))
    distrusted = _audit(store, index, log_signer, tsa_roots=wrong, skew=dt.timedelta(hours=1))
    assert _kinds(distrusted) == {"timestamp"}


def test_log_verify_says_plainly_when_a_decision_is_logged_twice(
    store: LocalBlobStore, index: ChdbIndex, signer: Signer, log_signer: LogSigner, tmp_path: Path
) -> None:
    """Ingest deduplicates before integrating; a leaf that got in twice anyway (a writer whose index
    lost rows mid-log) is a note when identical and a finding when different."""
    log = _log(store, index, log_signer, tmp_path)
    processor = _processor(store, index, signer, log, tmp_path)
    captures = _captures(signer, range(3))
    processor.process(_msgs([encoded(c, signer) for c in captures]))
    twice = capture_leaf(captures[1])
    log.writer.hold()
    log.writer.integrate([twice])  # past the deduplication, as a buggy or forked writer would
    log.writer.release()
    log.publish()
    catch_up(index, store, PREFIX, 4)
    report = _audit(store, index, log_signer)
    assert report.ok, report.findings
    assert any(
        "logged twice with identical leaves" in n and captures[1]["decisionId"] in n for n in report.notes
    )

    changed = leaf_bytes(  # the same decision with another envelope
        decision_id=captures[2]["decisionId"],
        captured_at=captures[2]["capturedAt"],
        envelope_hash="sha256:" + "ee" * 32,
    )
    log.writer.hold()
    log.writer.integrate([changed])
    log.writer.release()
    log.publish()
    catch_up(index, store, PREFIX, 5)
    assert "duplicate-leaf" in _kinds(_audit(store, index, log_signer))


def test_log_verify_shared_counts_other_hosts_decisions_in_a_note(
    store: LocalBlobStore, index: ChdbIndex, log_signer: LogSigner, tmp_path: Path
) -> None:
    log = _log(store, index, log_signer, tmp_path)
    now = dt.datetime.now(dt.UTC)
    leaf = leaf_bytes(
        decision_id="elsewhere", captured_at=now.isoformat(), envelope_hash="sha256:" + "ab" * 32
    )
    log.append([Entry("elsewhere", now, leaf)])
    log.publish()
    assert _kinds(_audit(store, index, log_signer)) == {"missing-capture"}
    shared = _audit(store, index, log_signer, shared=True)
    assert shared.ok and any("other ingest hosts" in n for n in shared.notes)


def test_an_idle_ingest_signs_its_last_leaves_once_the_interval_passed(
    store: LocalBlobStore, index: ChdbIndex, log_signer: LogSigner, tmp_path: Path
) -> None:
    moments = iter([0.0, 1.0, 1.5, 12.0, 12.0, 13.0])
    log = _log(store, index, log_signer, tmp_path, interval=10.0, clock=lambda: next(moments))
    now = dt.datetime.now(dt.UTC)
    leaf = leaf_bytes(decision_id="d1", captured_at=now.isoformat(), envelope_hash="sha256:" + "ab" * 32)
    log.append([Entry("d1", now, leaf)])  # at 1.0: no checkpoint yet
    assert latest(store, PREFIX) is None
    log.tick()  # at 1.5: the interval has not passed
    assert latest(store, PREFIX) is None
    log.tick()  # at 12.0: it has, and a leaf is unsigned
    current = latest(store, PREFIX, log_signer.key)
    assert current is not None and current[1].size == 1
    log.tick()  # nothing new: no second publication

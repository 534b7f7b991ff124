"""Compaction and legal hold with S3 Object Lock, on the real MinIO (a bucket created with object locking,
governance mode): a locked segment is not deleted before its date, not even by compaction, which reports
it as locked and carries on; a legal hold becomes an S3 legal hold that blocks deletion until released."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from retention_world import T0, World, make_capture

from consumers.retention.hold import LegalHolds
from producers.blobstore import BlobStore, S3BlobStore
from schemas.errors import BlobLocked

pytestmark = pytest.mark.minio

DAY = timedelta(days=1)


def _holds(world: World) -> LegalHolds:
    base = world.tmp / "data" / "retention"
    return LegalHolds(
        index=world.index,
        audit_path=base / "holds.jsonl",
        lock_path=base / "retention.lock",
        caller="counsel",
        clock=world.clock,
        store=world.store,
    )


def _routine(world: World) -> str:
    """Two routine captures and one consequential; returns the routine segment."""
    world.ingest(
        [
            make_capture(world.signer, "dec_r1", T0),
            make_capture(world.signer, "dec_r2", T0 + timedelta(minutes=1)),
            make_capture(world.signer, "dec_c", T0 + timedelta(minutes=2), consequential=True),
        ]
    )
    return world.segments["dec_r1"]


def test_compaction_leaves_a_segment_retained_until_its_date_and_says_so(
    make_world: Callable[[BlobStore], World], object_lock_store: S3BlobStore
) -> None:
    world = make_world(object_lock_store)
    segment = _routine(world)
    until = datetime.now(UTC) + timedelta(seconds=4)
    world.store.put(segment, world.store.get(segment), retain_until=until)  # locked as ingest would
    before = world.snapshot()

    world.clock.set(T0 + 31 * DAY)  # the routine content window has closed
    result = world.compactor().run()
    assert result.errors == ()
    assert len(result.locked) == 1 and result.locked[0].startswith(f"{segment}: retained (governance)")
    assert result.summary()["locked"] == 1
    assert (result.compacted, result.segments_deleted) == (0, 0)
    assert world.snapshot() == before  # nothing changed: no row lost its content, nothing copied
    assert world.read("dec_r1")["decisionId"] == "dec_r1"
    with pytest.raises(BlobLocked):
        world.store.delete(segment)

    time.sleep(max(0.0, (until - datetime.now(UTC)).total_seconds()) + 1.0)
    after = world.compactor().run()
    assert after.locked == () and after.errors == ()
    assert (after.compacted, after.segments_deleted) == (2, 1)
    assert not world.store.exists(segment)
    assert world.row("dec_r1")["content_state"] == "metadata-only"


def test_a_locked_pending_delete_stays_pending_and_is_reported(
    make_world: Callable[[BlobStore], World], object_lock_store: S3BlobStore
) -> None:
    """A lock set after compaction logged and re-pointed the rows: the delete is refused, the run still
    finishes, and the next run after the date deletes and confirms it."""
    world = make_world(object_lock_store)
    segment = _routine(world)
    until = datetime.now(UTC) + timedelta(seconds=4)
    world.clock.set(T0 + 31 * DAY)

    def lock_after_rows(point: str) -> None:
        if point == "after_rows":
            world.store.put(segment, world.store.get(segment), retain_until=until)

    result = world.compactor(hook=lock_after_rows).run()
    assert result.errors == () and result.segments_deleted == 0
    assert len(result.locked) == 1 and "deletion pending until the lock allows" in result.locked[0]
    assert world.store.exists(segment)
    assert world.row("dec_r1")["content_state"] == "metadata-only"

    again = world.compactor().run()
    assert len(again.locked) == 1 and again.pending_deleted == 0
    time.sleep(max(0.0, (until - datetime.now(UTC)).total_seconds()) + 1.0)
    done = world.compactor().run()
    assert done.locked == () and done.pending_deleted == 1
    assert not world.store.exists(segment)
    confirmed = [d for d in world.deletions() if d["segment_key"] == segment]
    assert {d["action"] for d in confirmed} >= {"delete-segment", "segment-deleted"}


def test_legal_hold_is_an_s3_legal_hold_until_released(
    make_world: Callable[[BlobStore], World], object_lock_store: S3BlobStore
) -> None:
    world = make_world(object_lock_store)
    segment = _routine(world)
    holds = _holds(world)

    assert holds.hold("dec_r1", reason="litigation 17").store_hold
    assert world.store.lock_reason(segment) == "under S3 legal hold"
    with pytest.raises(BlobLocked, match="legal hold"):
        world.store.delete(segment)

    # dec_r2 is due; without the S3 hold compaction would copy dec_r1 out and delete the segment
    world.clock.set(T0 + 31 * DAY)
    result = world.compactor().run()
    assert [r.split(": ", 1)[1] for r in result.locked] == [
        "under S3 legal hold; its 2 decision(s) left as they are"
    ]
    assert (result.compacted, result.hold_copied, result.segments_deleted) == (0, 0, 0)
    assert world.store.exists(segment) and world.row("dec_r2")["content_state"] == "full"

    # a release leaves the S3 hold while another held decision shares the segment
    assert holds.hold("dec_r2", reason="litigation 18").store_hold
    assert not holds.release("dec_r1", reason="settled").store_hold
    assert world.store.lock_reason(segment) == "under S3 legal hold"
    assert holds.release("dec_r2", reason="settled").store_hold
    assert world.store.lock_reason(segment) is None

    after = world.compactor().run()
    assert after.locked == () and after.errors == ()
    assert (after.compacted, after.segments_deleted) == (2, 1)
    assert not world.store.exists(segment)

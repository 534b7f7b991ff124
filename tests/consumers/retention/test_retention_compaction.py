"""Compaction end to end: real segments, real chdb index, LocalBlobStore and real MinIO."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta

import pytest
from retention_world import T0, World, make_capture, standard_captures

from consumers.retention.compaction import HOOK_POINTS
from consumers.retention.hold import LegalHolds
from consumers.retention.log import read_jsonl
from producers.blobstore import BlobStore
from producers.claimcheck import claim_key
from producers.evidence import verify_capture
from schemas.errors import BlobNotFound

DAY = timedelta(days=1)


def _scenario(world: World) -> dict[str, str]:
    """Ingest the cast, flag one in time and one late, hold one. Returns decision id -> original segment."""
    caps = standard_captures(world.signer)
    world.ingest(list(caps.values()))
    world.flag("dec_promoted", T0 + 10 * DAY, reason="refund dispute")
    world.flag("dec_late_flag", T0 + 31 * DAY, reason="too late")
    holds = LegalHolds(
        index=world.index,
        audit_path=world.tmp / "data" / "retention" / "holds.jsonl",
        lock_path=world.tmp / "data" / "retention" / "retention.lock",
        caller="counsel",
        clock=world.clock,
    )
    holds.hold("dec_held", reason="litigation 2030-17")
    # two captures also went by claim check: their full bodies sit under claims/ too
    for did in ("dec_routine_2", "dec_conseq_2"):
        world.store.put(_claim(world, did), world.read_bytes(did))
    return dict(world.segments)


def _claim(world: World, did: str) -> str:
    row = world.row(did)
    return claim_key(
        agent_id=row["agent_id"], decision_id=did, sha256_hex=world.sha[did].removeprefix("sha256:")
    )


def test_31_days_later(make_world: Callable[[BlobStore], World], blob_store: BlobStore) -> None:
    world = make_world(blob_store)
    original = _scenario(world)
    routine_segment = original["dec_routine_1"]
    consequential_segment = original["dec_conseq_1"]
    structured_segment = original["dec_structured"]
    assert {routine_segment, consequential_segment, structured_segment} == set(original.values())

    world.clock.set(T0 + 31 * DAY)
    result = world.compactor().run()

    assert result.errors == ()
    assert (result.compacted, result.promoted, result.hold_copied, result.expired) == (5, 1, 1, 0)
    assert result.segments_deleted == 2
    assert result.claims_deleted == 1
    assert not blob_store.exists(_claim(world, "dec_routine_2"))
    assert blob_store.exists(_claim(world, "dec_conseq_2"))

    # routine, sampled, late-flagged and structured captures: metadata-only, still verifiable
    for did in ("dec_routine_1", "dec_routine_2", "dec_sampled", "dec_late_flag", "dec_structured"):
        row = world.row(did)
        assert row["content_state"] == "metadata-only", did
        assert (row["segment_key"], row["segment_offset"], row["segment_length"]) == ("", 0, 0)
        assert row["expires_at"] == T0 + 365 * DAY + (row["captured_at"] - T0)
        manifest = json.loads(row["manifest_json"])
        report = verify_capture(manifest, world.trust, at=world.clock.now())
        assert report.decision_id == did
        assert report.checked_parts == 0
        if did != "dec_structured":
            assert "renderedContext.text" in report.absent_parts
    assert world.row("dec_late_flag")["retention_class"] == "routine"

    # consequential: untouched, same segment, readable
    for did in ("dec_conseq_1", "dec_conseq_2"):
        row = world.row(did)
        assert row["content_state"] == "full"
        assert row["segment_key"] == consequential_segment
        assert row["version"] == 0
        assert world.read(did)["decisionId"] == did

    # promoted: copied into a consequential segment before the routine one went
    row = world.row("dec_promoted")
    assert row["content_state"] == "full"
    assert row["retention_class"] == "consequential"
    assert row["consequential"] is True
    assert row["consequential_reason"] == "refund dispute"
    assert row["segment_key"].startswith("segments/consequential/")
    assert row["content_sha256"] == world.sha["dec_promoted"]
    assert world.read("dec_promoted")["decisionId"] == "dec_promoted"

    # held: content, state and hold untouched (its frame copied verbatim out of the segment that went)
    row = world.row("dec_held")
    assert row["content_state"] == "full"
    assert row["legal_hold"] is True
    assert row["hold_reason"] == "litigation 2030-17"
    assert row["segment_key"].startswith("segments/routine/retention/")
    held = world.read("dec_held")
    assert held["decisionId"] == "dec_held"
    assert verify_capture(held, world.trust, at=world.clock.now()).checked_parts > 0

    # the segments are gone, the consequential one stays
    assert not blob_store.exists(routine_segment)
    assert not blob_store.exists(structured_segment)
    assert blob_store.exists(consequential_segment)
    with pytest.raises(BlobNotFound):
        blob_store.get(routine_segment)

    # every deletion logged: what, why, when - in the table and in the JSONL file
    logged = {(d["decision_id"], d["action"]) for d in world.deletions()}
    for did in ("dec_routine_1", "dec_routine_2", "dec_sampled", "dec_late_flag", "dec_structured"):
        assert (did, "compact") in logged
    assert ("dec_promoted", "promote") in logged
    assert ("dec_held", "hold-copy") in logged
    assert ("", "delete-segment") in logged and ("", "segment-deleted") in logged
    assert ("dec_routine_2", "delete-claim") in logged and ("", "claim-deleted") in logged
    lines = read_jsonl(world.log_path)
    by_decision = {(e["decision_id"], e["action"]): e for e in lines}
    entry = by_decision[("dec_routine_1", "compact")]
    assert entry["segment_key"] == routine_segment
    assert "routine.content_days=30" in entry["reason"]
    assert entry["at"] == "2030-02-01T00:00:00.000Z"
    assert entry["policy"].startswith("article-default@sha256:")
    assert by_decision[("dec_promoted", "promote")]["target"] == world.row("dec_promoted")["segment_key"]
    deleted_segments = {e["segment_key"] for e in lines if e["action"] == "segment-deleted"}
    assert deleted_segments == {routine_segment, structured_segment}
    assert {e["segment_key"] for e in lines if e["action"] == "claim-deleted"} == {
        _claim(world, "dec_routine_2")
    }
    assert len({e["entry_id"] for e in lines}) == len(lines)


def test_second_run_changes_nothing(make_world: Callable[[BlobStore], World], blob_store: BlobStore) -> None:
    world = make_world(blob_store)
    _scenario(world)
    world.clock.set(T0 + 31 * DAY)
    first = world.compactor().run()
    assert first.changed
    state, blobs, lines = world.snapshot(), world.blobs(), read_jsonl(world.log_path)

    world.clock.advance(hours=1)
    second = world.compactor().run()
    assert not second.changed
    assert second.log_entries == 0
    assert world.snapshot() == state
    assert world.blobs() == blobs
    assert read_jsonl(world.log_path) == lines


def test_dry_run_changes_nothing(make_world: Callable[[BlobStore], World], local_store: BlobStore) -> None:
    world = make_world(local_store)
    _scenario(world)
    state, blobs = world.snapshot(), world.blobs()
    world.clock.set(T0 + 31 * DAY)
    result = world.compactor().run(dry_run=True)
    assert result.dry_run
    assert (result.compacted, result.promoted, result.hold_copied, result.segments_deleted) == (5, 1, 1, 2)
    assert world.snapshot() == state
    assert world.blobs() == blobs
    assert world.deletions() == []
    assert not world.log_path.exists()


def _final_state(world: World) -> tuple[object, ...]:
    rows = world.index.query(
        "SELECT decision_id, content_state, segment_key, segment_offset, segment_length, retention_class, "
        "consequential, legal_hold FROM decisions FINAL ORDER BY decision_id"
    )
    return tuple(tuple(r.values()) for r in rows), tuple(sorted(world.blobs()))


@pytest.mark.parametrize("point", HOOK_POINTS)
def test_crash_then_rerun_completes(
    make_world: Callable[[BlobStore], World],
    blob_store: BlobStore,
    point: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    world = make_world(blob_store)
    _scenario(world)
    world.clock.set(T0 + 31 * DAY)
    expected = world.compactor().plan()

    class Crash(RuntimeError):
        pass

    def hook(reached: str) -> None:
        if reached == point:
            raise Crash(point)

    with pytest.raises(Crash):
        world.compactor(hook=hook).run()

    world.clock.advance(minutes=5)
    rerun = world.compactor().run()
    assert rerun.errors == ()

    # the end state is the one a clean run reaches
    for did in ("dec_routine_1", "dec_routine_2", "dec_sampled", "dec_late_flag", "dec_structured"):
        assert world.row(did)["content_state"] == "metadata-only"
        assert world.row(did)["segment_key"] == ""
    assert world.read("dec_promoted")["decisionId"] == "dec_promoted"
    assert world.row("dec_promoted")["retention_class"] == "consequential"
    assert world.read("dec_held")["decisionId"] == "dec_held"
    assert world.row("dec_held")["legal_hold"] is True
    for seg in expected.segments:
        assert not blob_store.exists(seg.segment_key)
    remaining = set(world.blobs())
    assert remaining == {world.row(d)["segment_key"] for d in ("dec_conseq_1", "dec_promoted", "dec_held")}

    # nothing pending, every decision's step logged exactly once
    lines = read_jsonl(world.log_path)
    assert len({e["entry_id"] for e in lines}) == len(lines)
    actions = {(e["decision_id"], e["action"]) for e in lines}
    for seg in expected.segments:
        for step in seg.steps:
            assert (step.decision_id, step.action) in actions
    confirmed = {e["segment_key"] for e in lines if e["action"] == "segment-deleted"}
    assert confirmed == {seg.segment_key for seg in expected.segments}
    assert not blob_store.exists(_claim(world, "dec_routine_2"))
    assert blob_store.exists(_claim(world, "dec_conseq_2"))
    assert {e["segment_key"] for e in lines if e["action"] == "claim-deleted"} == {
        _claim(world, "dec_routine_2")
    }

    third = world.compactor().run()
    assert not third.changed


def test_expiry_after_retention(make_world: Callable[[BlobStore], World], local_store: BlobStore) -> None:
    world = make_world(local_store)
    original = _scenario(world)
    world.clock.set(T0 + 31 * DAY)
    world.compactor().run()
    held_segment = world.row("dec_held")["segment_key"]

    world.clock.set(T0 + 366 * DAY)
    result = world.compactor().run()
    assert result.errors == ()
    for did in (
        "dec_routine_1",
        "dec_sampled",
        "dec_structured",
        "dec_conseq_1",
        "dec_conseq_2",
        "dec_promoted",
    ):
        row = world.row(did)
        assert row["content_state"] == "expired", did
        assert row["manifest_json"] == ""
        assert row["segment_key"] == ""
    assert not local_store.exists(original["dec_conseq_1"])
    assert not local_store.exists(world.segments["dec_promoted"])
    assert world.index.query(
        "SELECT count() AS n FROM tool_calls WHERE decision_id IN ('dec_conseq_1', 'dec_routine_1')"
    ) == [{"n": 0}]
    # the held decision is untouched by expiry too
    row = world.row("dec_held")
    assert (row["content_state"], row["segment_key"], row["legal_hold"]) == ("full", held_segment, True)
    assert world.read("dec_held")["decisionId"] == "dec_held"
    assert result.held == 1
    expired = {e["decision_id"] for e in read_jsonl(world.log_path) if e["action"] == "expire"}
    assert {"dec_routine_1", "dec_conseq_1", "dec_promoted"} <= expired


def test_release_hands_the_decision_back_to_the_policy(
    make_world: Callable[[BlobStore], World], local_store: BlobStore
) -> None:
    world = make_world(local_store)
    _scenario(world)
    world.clock.set(T0 + 31 * DAY)
    world.compactor().run()
    holds = LegalHolds(
        index=world.index,
        audit_path=world.tmp / "data" / "retention" / "holds.jsonl",
        lock_path=world.tmp / "data" / "retention" / "retention.lock",
        caller="counsel",
        clock=world.clock,
    )
    copy_segment = world.row("dec_held")["segment_key"]
    holds.release("dec_held", reason="case closed")
    result = world.compactor().run()
    assert result.compacted == 1
    assert world.row("dec_held")["content_state"] == "metadata-only"
    assert not local_store.exists(copy_segment)


def test_capture_asking_for_shorter_retention(
    make_world: Callable[[BlobStore], World], local_store: BlobStore
) -> None:
    world = make_world(local_store)
    short = make_capture(world.signer, "dec_short", T0, consequential=True, retention_days=7)
    normal = make_capture(world.signer, "dec_normal", T0, consequential=True)
    world.ingest([short, normal])
    world.clock.set(T0 + 8 * DAY + 2 * DAY)  # past the 7 days and the 24 h grace
    result = world.compactor().run()
    assert (result.expired, result.moved) == (1, 1)
    assert world.row("dec_short")["content_state"] == "expired"
    assert world.row("dec_normal")["content_state"] == "full"
    assert world.row("dec_normal")["segment_key"].startswith("segments/consequential/retention/")
    assert world.read("dec_normal")["decisionId"] == "dec_normal"


def test_corrupt_frame_keeps_the_segment(
    make_world: Callable[[BlobStore], World], local_store: BlobStore
) -> None:
    world = make_world(local_store)
    _scenario(world)
    key = world.segments["dec_promoted"]
    row = world.row("dec_promoted")
    body = bytearray(local_store.get(key))
    body[row["segment_offset"] + row["segment_length"] // 2] ^= 0xFF
    local_store.put(key, bytes(body))
    world.clock.set(T0 + 31 * DAY)
    result = world.compactor().run()
    assert any(key in e for e in result.errors)
    assert local_store.exists(key)
    assert world.row("dec_routine_1")["content_state"] == "full"
    assert world.row("dec_structured")["content_state"] == "metadata-only"  # other segments go on


def test_progress_reports_every_decision(
    make_world: Callable[[BlobStore], World], local_store: BlobStore
) -> None:
    world = make_world(local_store)
    _scenario(world)
    world.clock.set(T0 + 31 * DAY)
    seen: list[tuple[int, int]] = []
    world.compactor().run(progress=lambda done, total: seen.append((done, total)))
    assert seen[0] == (0, 7) and seen[-1] == (7, 7)

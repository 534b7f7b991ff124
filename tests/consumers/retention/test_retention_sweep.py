"""Nothing outlives retention: orphan segments, quarantine segments and claim-check bodies are swept.

Real segments, the real chdb index, LocalBlobStore and a fresh bucket on the real MinIO. Orphan age is
the blob store's own last-modified time against the compactor's clock, so these tests set the clock to
the real now (the blobs were just written) and move it forward instead of sleeping.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from retention_world import TOPIC, World, make_capture

from consumers.ingest.store import insert_quarantine
from consumers.retention.hold import LegalHolds
from consumers.retention.log import DeletionEntry, DeletionLog, read_jsonl
from consumers.retention.plan import QuarantineRow, plan_sweep
from consumers.retention.policy import RetentionPolicy, RetentionPolicyError, default_policy
from consumers.retention.sweep import SWEEP_HOOK_POINTS, Sweeper
from consumers.storage.reader import load_capture
from consumers.storage.segments import SegmentWriter, read_capture
from producers.blobstore import BlobInfo, BlobStore
from producers.claimcheck import claim_key
from schemas.codec import decode, encode_capture

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
AGENT = "agt_support_1"  # the example capture's


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def _claim(agent_id: str, decision_id: str, data: bytes) -> str:
    return claim_key(agent_id=agent_id, decision_id=decision_id, sha256_hex=hashlib.sha256(data).hexdigest())


def _killed_consumer_segment(world: World, captures: list[dict[str, Any]], *, first_offset: int) -> str:
    """What a consumer killed between its segment PUT and its index insert leaves: a segment no row names."""
    writer = SegmentWriter(retention_class="routine", topic=TOPIC, partition=3, first_offset=first_offset)
    for capture in captures:
        writer.append(encode_capture(capture))
    key, body = writer.finish()
    world.store.put(key, body)
    return key


def _first_capture(store: BlobStore, key: str) -> dict[str, Any]:
    body = store.get(key)
    frame_length = len(body) if body.count(b"\x28\xb5\x2f\xfd") == 1 else body.index(b"\x28\xb5\x2f\xfd", 1)
    value: dict[str, Any] = decode(read_capture(store, key, 0, frame_length)).value
    return value


def _quarantine(
    world: World, capture: dict[str, Any], *, received_at: datetime, offset: int, claim: bool = False
) -> tuple[str, str]:
    """A quarantined capture as ingest leaves it: a quarantine segment, a quarantine row, maybe a claim."""
    data = encode_capture(capture)
    writer = SegmentWriter(retention_class="quarantine", topic=TOPIC, partition=5, first_offset=offset)
    writer.append(data)
    key, body = writer.finish()
    world.store.put(key, body)
    loc = writer.locations()[0]
    sha = "sha256:" + hashlib.sha256(data).hexdigest()
    insert_quarantine(
        world.index,
        [
            {
                "decision_id": capture["decisionId"],
                "agent_id": capture["agentId"],
                "reason": "SignatureInvalid",
                "part": "signature",
                "source": f"{TOPIC}/5/{offset}",
                "segment_key": key,
                "segment_offset": loc.offset,
                "segment_length": loc.length,
                "received_at": received_at,
                "content_sha256": sha,
            }
        ],
    )
    claim_blob = _claim(capture["agentId"], capture["decisionId"], data) if claim else ""
    if claim:
        world.store.put(claim_blob, data)
    return key, claim_blob


def _quarantine_rows(world: World, decision_id: str) -> list[dict[str, Any]]:
    return world.index.query(
        "SELECT * FROM quarantine FINAL WHERE decision_id = {id:String}", {"id": decision_id}
    )


def _holds(world: World) -> LegalHolds:
    return LegalHolds(
        index=world.index,
        audit_path=world.tmp / "data" / "retention" / "holds.jsonl",
        lock_path=world.tmp / "data" / "retention" / "retention.lock",
        caller="counsel",
        clock=world.clock,
    )


def test_killed_consumers_segment_is_swept_after_the_grace_and_logged(
    make_world: Callable[[BlobStore], World], blob_store: BlobStore
) -> None:
    world = make_world(blob_store)
    now = _now()
    world.clock.set(now)
    kept = make_capture(world.signer, "dec_indexed", now - HOUR)
    world.ingest([kept])
    lost = [make_capture(world.signer, f"dec_lost_{i}", now - HOUR) for i in range(3)]
    orphan = _killed_consumer_segment(world, lost, first_offset=100)
    # what the issue found: no row refers to it, yet it still decompresses to prompts and outputs
    refs = world.index.query(
        "SELECT count() AS n FROM decisions WHERE segment_key = {k:String}", {"k": orphan}
    )
    assert refs == [{"n": 0}]
    assert _first_capture(blob_store, orphan)["executionTrace"]["finalOutputText"]

    within = world.compactor().run()
    assert blob_store.exists(orphan), "an in-flight batch's segment must survive the grace"
    assert (within.orphan_segments_deleted, within.orphans_in_grace) == (0, 1)
    assert not within.changed

    world.clock.advance(hours=23)
    assert world.compactor().run().orphan_segments_deleted == 0
    assert blob_store.exists(orphan)

    world.clock.advance(hours=2)  # 25 h after it was written: past orphan_grace_hours = 24
    swept = world.compactor().run()
    assert swept.orphan_segments_deleted == 1
    assert swept.errors == ()
    assert not blob_store.exists(orphan)
    assert blob_store.exists(world.segments["dec_indexed"])
    assert world.read("dec_indexed")["decisionId"] == "dec_indexed"

    logged = {(d["segment_key"], d["action"]) for d in world.deletions()}
    assert (orphan, "orphan-segment") in logged and (orphan, "orphan-deleted") in logged
    lines = [e for e in read_jsonl(world.log_path) if e["segment_key"] == orphan]
    assert [e["action"] for e in lines] == ["orphan-segment", "orphan-deleted"]
    assert "orphan_grace_hours=24" in lines[0]["reason"]

    state, log_lines = world.blobs(), read_jsonl(world.log_path)
    world.clock.advance(hours=1)
    again = world.compactor().run()
    assert not again.changed and again.log_entries == 0
    assert world.blobs() == state and read_jsonl(world.log_path) == log_lines


def test_orphan_age_is_wall_clock_never_as_of(
    make_world: Callable[[BlobStore], World], local_store: BlobStore
) -> None:
    """``compact --as-of 2040`` evaluates the policy then; it cannot make an in-flight segment old."""
    world = make_world(local_store)
    now = _now()
    world.clock.set(now)
    orphan = _killed_consumer_segment(world, [make_capture(world.signer, "dec_x", now)], first_offset=7)
    result = world.compactor().run(as_of=now + 3650 * DAY)
    assert result.orphan_segments_deleted == 0
    assert local_store.exists(orphan)


def test_a_segment_written_again_is_young_again(
    make_world: Callable[[BlobStore], World], blob_store: BlobStore
) -> None:
    """A redelivered batch rewrites its segment before indexing it: the rewrite restarts the grace."""
    world = make_world(blob_store)
    world.clock.set(_now())
    capture = make_capture(world.signer, "dec_redelivered", _now())
    orphan = _killed_consumer_segment(world, [capture], first_offset=42)
    plan = world.compactor().plan_sweep()
    assert plan.orphans == ()
    world.clock.advance(hours=25)
    assert [o.key for o in world.compactor().plan_sweep().orphans] == [orphan]

    # the sweep stats each orphan again right before deleting: written again since the listing (by
    # the real clock: the redelivered batch puts the same key now), it is young and left alone
    stale = world.compactor().plan_sweep()
    blob_store.put(orphan, blob_store.get(orphan))

    def sweeper() -> Sweeper:
        return Sweeper(
            index=world.index,
            store=blob_store,
            entry=lambda **f: DeletionEntry(at=world.clock.now(), as_of=stale.as_of, policy="p", **f),
            record=DeletionLog(world.index, world.log_path).record,
            hook=lambda point: None,
        )

    assert sweeper().run(replace(stale, now=_now() + HOUR)).orphan_segments == 0
    assert blob_store.exists(orphan)
    assert world.deletions() == []
    # the same plan, executed when the rewrite is itself past the grace, deletes it
    assert sweeper().run(replace(stale, now=_now() + 25 * HOUR)).orphan_segments == 1
    assert not blob_store.exists(orphan)


def test_quarantine_content_goes_after_quarantine_days_rows_stay(
    make_world: Callable[[BlobStore], World], blob_store: BlobStore
) -> None:
    world = make_world(blob_store)
    now = _now()
    world.clock.set(now)
    bad = make_capture(world.signer, "dec_tampered", now - DAY)
    segment, claim = _quarantine(world, bad, received_at=now - DAY, offset=0, claim=True)
    assert decode(read_capture(blob_store, segment, 0, blob_store.stat(segment).size)).value["decisionId"]
    shown = load_capture("dec_tampered", index=world.index, store=blob_store)
    assert shown.content_state == "quarantined" and shown.capture["decisionId"] == "dec_tampered"

    early = world.compactor().run(as_of=now + 88 * DAY)  # received a day ago: 89 days in quarantine
    assert early.quarantine_segments_deleted == 0
    assert blob_store.exists(segment) and blob_store.exists(claim)

    # like `blackbox compact --as-of <90 days on>`: the policy is evaluated then
    result = world.compactor().run(as_of=now + 90 * DAY)
    assert (result.quarantine_segments_deleted, result.quarantine_rows_cleared) == (1, 1)
    assert result.claims_deleted == 1
    assert result.errors == ()
    assert not blob_store.exists(segment)
    assert not blob_store.exists(claim)

    rows = _quarantine_rows(world, "dec_tampered")
    assert len(rows) == 1, "the fact of the quarantine remains"
    row = rows[0]
    assert (row["segment_key"], row["segment_offset"], row["segment_length"]) == ("", 0, 0)
    assert row["reason"] == "SignatureInvalid" and row["content_sha256"].startswith("sha256:")
    shown = load_capture("dec_tampered", index=world.index, store=blob_store)
    assert shown.content_state == "quarantine-expired"
    assert shown.capture == {} and len(shown.quarantine) == 1

    actions = {(d["decision_id"], d["segment_key"], d["action"]) for d in world.deletions()}
    assert ("dec_tampered", segment, "quarantine-expire") in actions
    assert ("", segment, "delete-segment") in actions and ("", segment, "segment-deleted") in actions
    assert ("dec_tampered", claim, "delete-claim") in actions and ("", claim, "claim-deleted") in actions

    lines = read_jsonl(world.log_path)
    again = world.compactor().run(as_of=now + 91 * DAY)
    assert not again.changed and again.log_entries == 0
    assert read_jsonl(world.log_path) == lines


def test_orphan_claim_checks_are_swept_live_and_held_ones_kept(
    make_world: Callable[[BlobStore], World], blob_store: BlobStore
) -> None:
    world = make_world(blob_store)
    now = _now()
    world.clock.set(now)
    live = make_capture(world.signer, "dec_big", now - HOUR)
    held = make_capture(world.signer, "dec_held_big", now - HOUR)
    world.ingest([live, held])
    _holds(world).hold("dec_held_big", reason="litigation 2030-17")
    live_claim = _claim(AGENT, "dec_big", world.read_bytes("dec_big"))
    blob_store.put(live_claim, world.read_bytes("dec_big"))
    held_claim = _claim(AGENT, "dec_held_big", world.read_bytes("dec_held_big"))
    blob_store.put(held_claim, world.read_bytes("dec_held_big"))
    # a producer retry with other bytes for the held decision, never ingested: the hold keeps it too
    retry = encode_capture(make_capture(world.signer, "dec_held_big", now - 2 * HOUR))
    held_retry = _claim(AGENT, "dec_held_big", retry)
    blob_store.put(held_retry, retry)
    # never ingested (producer put the body, the message never made it) and dead-lettered ones
    never = encode_capture(make_capture(world.signer, "dec_never_sent", now))
    never_claim = _claim(AGENT, "dec_never_sent", never)
    blob_store.put(never_claim, never)
    dead = encode_capture(make_capture(world.signer, "dec_dead_lettered", now))
    dead_claim = _claim(AGENT, "dec_dead_lettered", dead)
    blob_store.put(dead_claim, dead)
    all_claims = {live_claim, held_claim, held_retry, never_claim, dead_claim}

    world.clock.advance(hours=24 * 7)  # a week: the message may still be waiting in the topic
    result = world.compactor().run()
    assert result.orphan_claims_deleted == 0 and result.orphans_in_grace == 2
    assert set(blob_store.list("claims/")) == all_claims

    world.clock.advance(hours=25)  # past orphan_claim_grace_hours = 192
    result = world.compactor().run()
    assert result.orphan_claims_deleted == 2
    assert result.held >= 1
    assert set(blob_store.list("claims/")) == {live_claim, held_claim, held_retry}
    logged = {(d["decision_id"], d["segment_key"], d["action"]) for d in world.deletions()}
    assert ("dec_never_sent", never_claim, "orphan-claim") in logged
    assert ("dec_dead_lettered", dead_claim, "orphan-claim") in logged
    assert ("", dead_claim, "orphan-deleted") in logged

    lines = read_jsonl(world.log_path)
    assert not world.compactor().run().changed
    assert read_jsonl(world.log_path) == lines

    # released: the retry nobody ingested is an ordinary orphan now; the held decision's own claim
    # lives as long as its content does
    _holds(world).release("dec_held_big", reason="case closed")
    result = world.compactor().run()
    assert result.orphan_claims_deleted == 1
    assert set(blob_store.list("claims/")) == {live_claim, held_claim}


def test_legal_hold_keeps_a_quarantine_segment_past_quarantine_days(
    make_world: Callable[[BlobStore], World], local_store: BlobStore
) -> None:
    """A conflicting duplicate of a held decision: its quarantined bytes are evidence the hold keeps."""
    world = make_world(local_store)
    now = _now()
    world.clock.set(now)
    world.ingest([make_capture(world.signer, "dec_disputed", now - DAY)])
    _holds(world).hold("dec_disputed", reason="litigation 2031-02")
    other = make_capture(world.signer, "dec_disputed", now - DAY, consequential=True)
    segment, claim = _quarantine(world, other, received_at=now - DAY, offset=9, claim=True)

    result = world.compactor().run(as_of=now + 200 * DAY)
    assert result.quarantine_segments_deleted == 0 and result.orphan_claims_deleted == 0
    assert result.held >= 1
    assert local_store.exists(segment) and local_store.exists(claim)
    assert _quarantine_rows(world, "dec_disputed")[0]["segment_key"] == segment

    dry = world.compactor().run(as_of=now + 200 * DAY, dry_run=True)
    assert dry.quarantine_segments_deleted == 0

    _holds(world).release("dec_disputed", reason="settled")
    result = world.compactor().run(as_of=now + 200 * DAY)
    assert result.quarantine_segments_deleted == 1
    assert not local_store.exists(segment) and not local_store.exists(claim)


def test_dry_run_shows_the_sweep_and_changes_nothing(
    make_world: Callable[[BlobStore], World], local_store: BlobStore
) -> None:
    world = make_world(local_store)
    now = _now()
    world.clock.set(now)
    orphan = _killed_consumer_segment(world, [make_capture(world.signer, "dec_a", now)], first_offset=1)
    segment, claim = _quarantine(
        world, make_capture(world.signer, "dec_q", now), received_at=now, offset=2, claim=True
    )
    stray = encode_capture(make_capture(world.signer, "dec_stray", now))
    stray_claim = _claim(AGENT, "dec_stray", stray)
    local_store.put(stray_claim, stray)
    world.clock.advance(days=100)
    blobs = set(local_store.list(""))

    dry = world.compactor().run(dry_run=True)
    assert dry.dry_run
    assert (dry.orphan_segments_deleted, dry.orphan_claims_deleted, dry.quarantine_segments_deleted) == (
        1,
        1,
        1,
    )
    assert dry.claims_deleted == 1  # the quarantined capture's claim check
    assert set(local_store.list("")) == blobs
    assert world.deletions() == [] and not world.log_path.exists()
    assert _quarantine_rows(world, "dec_q")[0]["segment_key"] == segment

    real = world.compactor().run()
    assert (real.orphan_segments_deleted, real.orphan_claims_deleted, real.quarantine_segments_deleted) == (
        1,
        1,
        1,
    )
    assert set(local_store.list("")) == blobs - {orphan, segment, claim, stray_claim}


@pytest.mark.parametrize("point", SWEEP_HOOK_POINTS)
def test_sweep_crash_then_rerun_completes(
    make_world: Callable[[BlobStore], World], blob_store: BlobStore, point: str
) -> None:
    world = make_world(blob_store)
    now = _now()
    world.clock.set(now)
    world.ingest([make_capture(world.signer, "dec_live", now, consequential=True)])  # kept 365 days
    orphan = _killed_consumer_segment(world, [make_capture(world.signer, "dec_a", now)], first_offset=1)
    segment, claim = _quarantine(
        world, make_capture(world.signer, "dec_q", now), received_at=now, offset=2, claim=True
    )
    stray = encode_capture(make_capture(world.signer, "dec_stray", now))
    stray_claim = _claim(AGENT, "dec_stray", stray)
    blob_store.put(stray_claim, stray)
    world.clock.advance(days=100)

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
    for key in (orphan, segment, claim, stray_claim):
        assert not blob_store.exists(key), key
    assert world.read("dec_live")["decisionId"] == "dec_live"
    assert _quarantine_rows(world, "dec_q")[0]["segment_key"] == ""

    lines = read_jsonl(world.log_path)
    assert len({e["entry_id"] for e in lines}) == len(lines), "every entry logged once"
    actions = {(e["segment_key"], e["action"]) for e in lines}
    assert {(orphan, "orphan-segment"), (orphan, "orphan-deleted")} <= actions
    assert {(stray_claim, "orphan-claim"), (stray_claim, "orphan-deleted")} <= actions
    assert {
        (segment, "quarantine-expire"),
        (segment, "delete-segment"),
        (segment, "segment-deleted"),
    } <= actions
    assert {(claim, "delete-claim"), (claim, "claim-deleted")} <= actions

    third = world.compactor().run()
    assert not third.changed and third.log_entries == 0


# --- pure: plan_sweep and the policy keys -------------------------------------------------------------------
def _info(key: str, modified: datetime) -> BlobInfo:
    return BlobInfo(key, 10, modified)


def test_plan_sweep_rules() -> None:
    now = datetime(2030, 6, 1, tzinfo=UTC)
    policy = default_policy()
    q_old = QuarantineRow(
        decision_id="d1", agent_id="a", reason="r", segment_key="segments/quarantine/x.seg",
        content_sha256="sha256:" + "1" * 64, received_at=now - 91 * DAY,
    )  # fmt: skip
    q_young = QuarantineRow(
        decision_id="d2", agent_id="a", reason="r", segment_key="segments/quarantine/y.seg",
        content_sha256="sha256:" + "2" * 64, received_at=now - 10 * DAY,
    )  # fmt: skip
    plan = plan_sweep(
        policy=policy,
        as_of=now,
        now=now,
        segments=[
            _info("segments/routine/t/0000/a.seg", now - 30 * DAY),  # referenced
            _info("segments/routine/t/0000/b.seg", now - 25 * HOUR),  # orphan
            _info("segments/routine/t/0000/c.seg", now - 23 * HOUR),  # in grace
            _info(q_old.segment_key, now - 91 * DAY),
            _info(q_young.segment_key, now - 10 * DAY),
        ],
        claims=[_info(q_old.claim, now - 91 * DAY), _info(q_young.claim, now - 10 * DAY)],
        referenced_segments=["segments/routine/t/0000/a.seg", q_old.segment_key, q_young.segment_key],
        quarantine=[q_old, q_young],
        live_claims=[],
        held=[],
    )
    assert [o.key for o in plan.orphans] == ["segments/routine/t/0000/b.seg"]
    assert plan.in_grace == 1
    assert [(q.segment_key, q.claims) for q in plan.quarantine] == [(q_old.segment_key, (q_old.claim,))]

    held = plan_sweep(
        policy=policy,
        as_of=now,
        now=now,
        segments=[],
        claims=[_info(q_old.claim, now - 91 * DAY)],
        referenced_segments=[q_old.segment_key],
        quarantine=[q_old],
        live_claims=[],
        held=[("a", "d1")],
    )
    assert held.empty and held.held == ("d1",)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("quarantine_days = 0", "quarantine_days"),
        ("[compaction]\norphan_grace_hours = 0", "compaction.orphan_grace_hours"),
        ("[compaction]\norphan_claim_grace_hours = 1e9", "compaction.orphan_claim_grace_hours"),
    ],
)
def test_sweep_policy_keys_are_checked(tmp_path: Any, text: str, key: str) -> None:
    path = tmp_path / "policy.toml"
    path.write_text(text + "\n")
    with pytest.raises(RetentionPolicyError) as info:
        RetentionPolicy.from_toml(path)
    assert info.value.key == key


def test_sweep_policy_defaults() -> None:
    policy = default_policy()
    assert policy.quarantine_days == 90
    assert policy.compaction.orphan_grace_hours == 24
    assert policy.compaction.orphan_claim_grace_hours == 192  # > Kafka's default 7-day retention.ms

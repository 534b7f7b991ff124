"""The retention policy: TOML loading, errors naming the key, and the rules (pure, no services)."""

from __future__ import annotations

import copy
import json
import tomllib
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path

import pytest

from consumers.app.settings import load_service_settings
from consumers.retention.plan import Candidate, plan_compaction
from consumers.retention.policy import (
    MAX_EXPIRES_AT,
    RetentionPolicy,
    RetentionPolicyError,
    classify,
    content_expires_at,
    default_policy,
    expires_at,
    load_policy,
    policy_for_settings,
)
from schemas.errors import ContractError, RetentionError

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = json.loads((ROOT / "schemas" / "examples" / "capture.unsealed.json").read_text())
T0 = datetime(2030, 1, 1, tzinfo=UTC)
DAY = timedelta(days=1)


def capture(**changes: object) -> dict[str, object]:
    c = copy.deepcopy(EXAMPLE)
    c["capturedAt"] = "2030-01-01T00:00:00.000Z"
    c.update(changes)
    return c


def test_packaged_defaults_are_the_articles() -> None:
    policy = default_policy()
    assert policy == RetentionPolicy()  # the TOML and the model defaults agree
    assert policy.routine.content_days == 30 and policy.routine.retention_days == 365
    assert policy.sampled.content_days == 30
    assert policy.consequential.content_days is None and policy.consequential.retention_days == 365
    assert policy.structured.content_days == 30
    assert policy.honor_capture_retention_days
    text = resources.files("consumers.retention").joinpath("default_policy.toml").read_text()
    assert tomllib.loads(text)["name"] == "article-default"


def test_routine_capture_content_30_days_metadata_365() -> None:
    routine = capture(consequential={"flagged": False, "reason": None})
    assert classify(routine) == "routine"
    assert content_expires_at(routine) == T0 + 30 * DAY
    assert expires_at(routine) == T0 + 365 * DAY


def test_consequential_capture_kept_whole_for_its_retention_days() -> None:
    flagged = capture(replayPolicy={"retentionDays": 730})
    decision = default_policy().decide(flagged)
    assert (decision.retention_class, decision.rule, decision.retention_days) == (
        "consequential",
        "consequential",
        730,
    )
    assert decision.content_expires_at == decision.expires_at == T0 + 730 * DAY
    no_days = capture(replayPolicy={"piiRedacted": False})
    assert expires_at(no_days) == T0 + 365 * DAY


def test_capture_retention_days_never_lengthen_a_routine_content_window() -> None:
    routine = capture(consequential={"flagged": False}, replayPolicy={"retentionDays": 3650})
    decision = default_policy().decide(routine)
    assert decision.content_expires_at == T0 + 30 * DAY
    assert decision.expires_at == T0 + 3650 * DAY
    short = capture(consequential={"flagged": False}, replayPolicy={"retentionDays": 7})
    assert default_policy().decide(short).content_expires_at == T0 + 7 * DAY


def test_policy_can_ignore_or_cap_the_captures_retention_days() -> None:
    flagged = capture(replayPolicy={"retentionDays": 3650})
    ignore = RetentionPolicy.from_mapping({"honor_capture_retention_days": False})
    assert ignore.decide(flagged).retention_days == 365
    capped = RetentionPolicy.from_mapping({"max_retention_days": 1000})
    assert capped.decide(flagged).retention_days == 1000


def test_retention_beyond_a_date_clamps_to_the_documented_maximum() -> None:
    """Regression (issue 8): retentionDays=3,000,000 or capturedAt in 9999 raised OverflowError."""
    huge = capture(replayPolicy={"retentionDays": 3_000_000})
    decision = default_policy().decide(huge)
    assert decision.expires_at == decision.content_expires_at == MAX_EXPIRES_AT
    assert decision.retention_days == (MAX_EXPIRES_AT - T0).days  # what the row stores: fits UInt32
    routine = capture(consequential={"flagged": False}, replayPolicy={"retentionDays": 2**53 - 1})
    assert default_policy().decide(routine).content_expires_at == T0 + 30 * DAY  # content window kept
    assert default_policy().decide(routine).expires_at == MAX_EXPIRES_AT

    far = default_policy().decide(capture(capturedAt="9999-12-31T23:59:59.999Z"))
    assert far.retention_days == 0 and far.expires_at.year == 9999  # no overflow; ingest quarantines it
    row = {"decision_id": "d", "captured_at": T0, "capture_level": "full", "consequential": True}
    assert default_policy().decide({**row, "capture_retention_days": 3_000_000}).expires_at == MAX_EXPIRES_AT


def test_sampled_and_structured_rules() -> None:
    policy = RetentionPolicy.from_mapping(
        {
            "sampled": {"content_days": 60, "retention_days": 400},
            "structured": {"content_days": 0, "retention_days": 90},
        }
    )
    sampled = capture(consequential={"flagged": False}, captureLevel="sampled", replayPolicy={})
    structured = capture(consequential={"flagged": False}, captureLevel="structured-only", replayPolicy={})
    assert policy.decide(sampled).rule == "sampled"
    assert policy.retention_class(sampled) == "routine"  # same segments as routine turns
    assert policy.decide(sampled).content_expires_at == T0 + 60 * DAY
    assert policy.decide(structured).retention_class == "structured"
    assert policy.decide(structured).content_expires_at == T0
    assert policy.decide(structured).expires_at == T0 + 90 * DAY


def test_index_row_and_capture_classify_alike() -> None:
    row = {
        "decision_id": "d",
        "captured_at": T0,
        "capture_level": "full",
        "consequential": False,
        "manifest_json": json.dumps({"replayPolicy": {"retentionDays": 100}}),
    }
    c = capture(consequential={"flagged": False}, replayPolicy={"retentionDays": 100})
    assert default_policy().decide(row) == default_policy().decide(c)
    assert classify({**row, "capture_level": "structured-only"}) == "structured"


def test_flag_promotes_only_before_the_content_window_ends() -> None:
    policy = default_policy()
    routine = capture(consequential={"flagged": False, "reason": None})
    assert policy.promotes(routine, T0 + 29 * DAY)
    assert not policy.promotes(routine, T0 + 30 * DAY)
    assert not policy.promotes(capture(), T0)  # already consequential
    promoted = policy.decide(routine, promoted=True)
    assert promoted.retention_class == "consequential"
    assert promoted.content_expires_at == T0 + 365 * DAY


def test_file_overrides_only_what_it_names(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text('name = "short"\n[routine]\ncontent_days = 14\n')
    policy = load_policy(path)
    assert policy.name == "short"
    assert policy.routine.content_days == 14
    assert policy.routine.retention_days == 365
    assert policy.consequential == default_policy().consequential
    assert policy.fingerprint.startswith("short@sha256:")
    assert policy.fingerprint != default_policy().fingerprint
    assert policy_for_settings(load_service_settings(data_dir=tmp_path, retention_policy=path)) == policy
    assert policy_for_settings(load_service_settings(data_dir=tmp_path)) == default_policy()


@pytest.mark.parametrize(
    ("text", "key", "fragment"),
    [
        ("[routine]\ncontent_days = 400\n", "routine.content_days", "exceeds retention_days"),
        ('[routine]\ncontent_days = "30"\n', "routine.content_days", "valid integer"),
        ("[routine]\ncontent_days = -1\n", "routine.content_days", "greater than or equal to 0"),
        ("[routin]\ncontent_days = 3\n", "routin", "unknown key"),
        ("[consequential]\nretention_dayz = 3\n", "consequential.retention_dayz", "unknown key"),
        ("honor_capture_retention_days = 1\n", "honor_capture_retention_days", "valid boolean"),
        ("[compaction]\nbatch_decisions = 0\n", "compaction.batch_decisions", "greater than or equal to 1"),
    ],
)
def test_bad_policy_names_the_key(tmp_path: Path, text: str, key: str, fragment: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(RetentionPolicyError) as info:
        load_policy(path)
    assert info.value.key == key
    assert key in str(info.value) and fragment in str(info.value)
    assert str(path) in str(info.value)
    assert isinstance(info.value, RetentionError)


def test_unreadable_or_invalid_toml(tmp_path: Path) -> None:
    with pytest.raises(RetentionPolicyError, match="cannot read"):
        load_policy(tmp_path / "missing.toml")
    (tmp_path / "broken.toml").write_text("[routine\n")
    with pytest.raises(RetentionPolicyError, match="not valid TOML"):
        load_policy(tmp_path / "broken.toml")


def test_malformed_record_is_a_contract_error() -> None:
    with pytest.raises(ContractError) as info:
        default_policy().decide(capture(capturedAt="yesterday"))
    assert info.value.path == "capturedAt"
    with pytest.raises(ContractError) as info:
        default_policy().decide(capture(replayPolicy={"retentionDays": -3}))
    assert info.value.path == "replayPolicy.retentionDays"


# --- planning (pure) -------------------------------------------------------------------------------------
def cand(did: str, at: datetime, key: str = "segments/routine/t/0000/0-a.seg", **kw: object) -> Candidate:
    fields: dict[str, object] = {
        "decision_id": did,
        "agent_id": "agt",
        "captured_at": at,
        "capture_level": "full",
        "content_state": "full",
        "consequential": False,
        "segment_key": key,
    }
    fields.update(kw)
    return Candidate(**fields)  # type: ignore[arg-type]


def test_segment_waits_for_its_last_decision_within_the_grace() -> None:
    members = [cand("a", T0), cand("b", T0 + timedelta(hours=12))]
    policy = default_policy()
    assert not plan_compaction(members, policy=policy, as_of=T0 + 30 * DAY + timedelta(hours=1)).segments
    plan = plan_compaction(members, policy=policy, as_of=T0 + 30 * DAY + timedelta(hours=12))
    assert [s.action for s in plan.segments[0].steps] == ["compact", "compact"]


def test_segment_rewritten_after_the_grace_moves_later_decisions() -> None:
    members = [cand("early", T0), cand("late", T0 + 5 * DAY)]
    plan = plan_compaction(members, policy=default_policy(), as_of=T0 + 31 * DAY + timedelta(hours=1))
    (seg,) = plan.segments
    assert {s.decision_id: s.action for s in seg.steps} == {"early": "compact", "late": "move"}
    assert seg.copies[0].target_class == "routine"


def test_all_held_segment_is_never_due_and_counts_as_held() -> None:
    members = [cand("h", T0, legal_hold=True, hold_reason="case")]
    plan = plan_compaction(members, policy=default_policy(), as_of=T0 + 400 * DAY)
    assert plan.segments == () and plan.held == ("h",) and plan.segments_not_due == 1


def test_metadata_only_records_expire_unless_held() -> None:
    rows = [
        cand("m", T0, key="", content_state="metadata-only"),
        cand("h", T0, key="", content_state="metadata-only", legal_hold=True),
        cand("x", T0, key="", content_state="expired"),
    ]
    plan = plan_compaction(rows, policy=default_policy(), as_of=T0 + 366 * DAY)
    assert [(s.decision_id, s.action) for s in plan.expiries] == [("m", "expire")]
    assert plan.held == ("h",)
    assert not plan_compaction(rows, policy=default_policy(), as_of=T0 + 364 * DAY).expiries


def test_late_flag_does_not_promote_but_a_timely_one_does() -> None:
    rows = [
        cand("late", T0, first_flag_at=T0 + 30 * DAY + timedelta(seconds=1), flag_reason="late"),
        cand("timely", T0, first_flag_at=T0 + 29 * DAY, flag_reason="timely"),
    ]
    plan = plan_compaction(rows, policy=default_policy(), as_of=T0 + 31 * DAY)
    actions = {s.decision_id: s.action for s in plan.segments[0].steps}
    assert actions == {"late": "compact", "timely": "promote"}
    promote = next(s for s in plan.segments[0].steps if s.action == "promote")
    assert promote.target_class == "consequential" and "timely" in promote.reason


def test_plan_is_deterministic() -> None:
    rows = [
        cand(f"d{i}", T0 + timedelta(minutes=i), key=f"segments/routine/t/0000/{i % 3}-a.seg")
        for i in range(30)
    ]
    a = plan_compaction(rows, policy=default_policy(), as_of=T0 + 31 * DAY)
    b = plan_compaction(list(reversed(rows)), policy=default_policy(), as_of=T0 + 31 * DAY)
    assert a == b

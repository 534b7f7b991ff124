"""rows.py (capture JSON form -> index rows) and the engine-free helpers: DDL splitting, versions, trend SQL."""

from __future__ import annotations

import copy
import re
from datetime import UTC, datetime, timedelta

import pytest
from index_testkit import example_capture

from consumers.index import (
    TRENDS,
    RowBatch,
    decision_rows,
    flag_row,
    load_ddl,
    split_statements,
    state_version,
    trend_sql,
)
from consumers.index.rows import DECISION_COLUMNS, MEMORY_COLUMNS, TOOL_CALL_COLUMNS
from schemas.errors import ContractError, IndexError_


def test_rows_have_every_column_and_nothing_else() -> None:
    rows = decision_rows(example_capture())
    assert sorted(rows.decision) == sorted(DECISION_COLUMNS)
    assert all(sorted(r) == sorted(TOOL_CALL_COLUMNS) for r in rows.tool_calls)
    assert all(sorted(r) == sorted(MEMORY_COLUMNS) for r in rows.memory_entries)
    assert (len(rows.tool_calls), len(rows.memory_entries), rows.decision_id) == (
        2,
        2,
        "dec_01J9Z8K2V6XAMPLE",
    )


def test_defaults_follow_the_capture() -> None:
    d = decision_rows(example_capture()).decision
    assert d["captured_at"] == datetime(2026, 7, 23, 13, 0, 0, 456000, tzinfo=UTC)
    assert (d["retention_class"], d["retention_days"]) == ("consequential", 365)
    assert d["expires_at"] == d["captured_at"] + timedelta(days=365)
    assert (d["trust"], d["content_state"], d["version"], d["legal_hold"]) == ("verified", "full", 0, False)
    assert d["ingested_at"].tzinfo is not None

    routine = example_capture()
    routine["consequential"] = {"flagged": False, "reason": None}
    del routine["replayPolicy"]["retentionDays"]
    r = decision_rows(routine).decision
    assert (r["retention_class"], r["retention_days"]) == ("routine", 30)

    structured = example_capture()
    structured["captureLevel"] = "structured-only"
    structured["consequential"] = {"flagged": False, "reason": None}
    s = decision_rows(structured).decision
    assert (s["retention_class"], s["content_state"]) == ("structured", "structured-only")


def test_compacted_capture_is_metadata_only() -> None:
    capture = example_capture()
    capture["renderedContext"]["text"] = None
    capture["agentConfiguration"]["systemPromptText"] = None
    capture["executionTrace"]["finalOutputText"] = None
    for entry in capture["memoryState"]["workingSetEntries"]:
        entry["renderedContent"] = None
    rows = decision_rows(capture)
    assert rows.decision["content_state"] == "metadata-only"
    assert rows.decision["working_set_bytes"] is None
    assert [m["content_bytes"] for m in rows.memory_entries] == [None, None]


def test_caller_values_win() -> None:
    at = datetime(2026, 8, 1, tzinfo=UTC)
    d = decision_rows(
        example_capture(),
        trust="quarantined",
        quarantine_reason="signature",
        content_state="metadata-only",
        retention_class="routine",
        retention_days=30,
        expires_at=at,
        legal_hold=True,
        hold_reason="h",
        key_id="sha256:k",
        version=9,
        ingested_at=at,
    ).decision
    assert (d["trust"], d["quarantine_reason"], d["content_state"], d["retention_class"]) == (
        "quarantined",
        "signature",
        "metadata-only",
        "routine",
    )
    assert (d["expires_at"], d["legal_hold"], d["hold_reason"], d["key_id"], d["version"]) == (
        at,
        True,
        "h",
        "sha256:k",
        9,
    )


def test_key_id_from_public_key_ref() -> None:
    capture = example_capture()
    capture["signature"]["publicKeyRef"] = "did:armalo:agent:agt_1#sha256:abcd"
    assert decision_rows(capture).decision["key_id"] == "sha256:abcd"
    capture["signature"]["publicKeyRef"] = "sha256:ef01"
    assert decision_rows(capture).decision["key_id"] == "sha256:ef01"


def test_tool_errors_and_failure() -> None:
    capture = example_capture()
    capture["executionTrace"]["toolCalls"][0]["errorRef"] = "err:timeout"
    capture["outcome"] = {"status": "failure", "reason": "refund to wrong account"}
    rows = decision_rows(capture)
    assert [c["is_error"] for c in rows.tool_calls] == [True, False]
    assert (rows.decision["tool_error_count"], rows.decision["failed"], rows.decision["outcome_reason"]) == (
        1,
        True,
        "refund to wrong account",
    )


def test_sparse_capture_uses_neutral_values() -> None:
    minimal = {"decisionId": "d", "agentId": "a", "capturedAt": "2026-07-01T00:00:00Z"}
    d = decision_rows(minimal).decision
    assert (d["capture_level"], d["outcome_status"], d["temperature"], d["total_latency_ms"]) == (
        "full",
        "unknown",
        None,
        None,
    )
    assert (d["working_set_entries"], d["working_set_bytes"], d["tool_call_count"]) == (0, 0, 0)


@pytest.mark.parametrize(
    ("patch", "path"),
    [
        ({"decisionId": None}, "decisionId"),
        ({"agentId": ""}, "agentId"),
        ({"capturedAt": "yesterday"}, "capturedAt"),
    ],
)
def test_contract_errors_name_the_field(patch: dict[str, object], path: str) -> None:
    capture = {**example_capture(), **patch}
    with pytest.raises(ContractError) as info:
        decision_rows(capture)
    assert info.value.path == path
    missing = example_capture()
    del missing["capturedAt"]
    with pytest.raises(ContractError, match="capturedAt"):
        decision_rows(missing)


def test_rows_do_not_touch_the_capture() -> None:
    capture = example_capture()
    before = copy.deepcopy(capture)
    decision_rows(capture)
    assert capture == before


def test_row_batch_pivots_columns() -> None:
    a, b = example_capture(), example_capture()
    b["decisionId"] = "dec_2"
    b["executionTrace"]["toolCalls"] = []
    batch = RowBatch.of([decision_rows(a), decision_rows(b)])
    assert len(batch) == 2
    assert batch.columns("decisions")["decision_id"] == ["dec_01J9Z8K2V6XAMPLE", "dec_2"]
    assert batch.columns("tool_calls")["sequence"] == [1, 2]
    assert len(batch.columns("memory_entries")["entry_id"]) == 4
    assert RowBatch().columns("tool_calls") == {}


def test_flag_row() -> None:
    row = flag_row(
        {
            "decisionId": "d",
            "agentId": "a",
            "reason": "chargeback",
            "flaggedAt": "2026-07-02T10:00:00.5Z",
            "failure": True,
        }
    )
    assert (row["decision_id"], row["failure"], row["flagged_at"]) == (
        "d",
        True,
        datetime(2026, 7, 2, 10, 0, 0, 500000, tzinfo=UTC),
    )
    with pytest.raises(ContractError, match="flaggedAt"):
        flag_row({"decisionId": "d"})


def test_split_statements() -> None:
    sql = (
        "CREATE TABLE a (x String DEFAULT 'a;b') ENGINE = Memory; -- a comment; with a semicolon\n"
        "SELECT 'it\\'s;' AS `we;ird`;\n\n;SELECT \"q;\" -- trailing"
    )
    assert split_statements(sql) == [
        "CREATE TABLE a (x String DEFAULT 'a;b') ENGINE = Memory",
        "SELECT 'it\\'s;' AS `we;ird`",
        'SELECT "q;"',
    ]
    statements = split_statements(load_ddl())
    # one statement per CREATE / ALTER line of ddl.sql: the splitter neither merges nor cuts them
    assert len(statements) == len(re.findall(r"^(?:CREATE|ALTER) ", load_ddl(), flags=re.MULTILINE))
    assert all(
        s.startswith(("CREATE TABLE IF NOT EXISTS", "CREATE VIEW IF NOT EXISTS"))
        or (s.startswith("ALTER TABLE ") and " ADD COLUMN IF NOT EXISTS " in s)  # upgrades, idempotent
        for s in statements
    )


def test_state_version_is_strictly_increasing() -> None:
    at = datetime(2026, 7, 1, tzinfo=UTC)
    first = state_version(at)
    assert state_version(at) > first  # same instant, still higher
    assert state_version() > first > 0


def test_trend_sql_only_takes_whitelisted_dimensions() -> None:
    for name, trend in TRENDS.items():
        assert "{by_" not in trend_sql(name)
        for by in trend.allowed_by:
            assert by in trend_sql(name, by)
    with pytest.raises(IndexError_):
        trend_sql("failure_rate", "prompt_version")  # already a leading column
    with pytest.raises(IndexError_):
        trend_sql("volume", "1; DROP TABLE decisions")

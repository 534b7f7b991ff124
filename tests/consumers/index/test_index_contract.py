"""One contract suite, three engines: ChdbIndex, ClickHouseServerIndex over clickhouse-connect's
in-process chdb backend (the server code path, runnable here), and a real ClickHouse server when
BLACKBOX_CLICKHOUSE_URL is set.

The seam is the engine primitives (schema, column types, insert, query, EXPLAIN AST, command, close);
the rows and state changes ingest writes go through its store (``consumers.ingest.store``), so the
SQL every area runs is proven on every engine here too."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from index_testkit import (
    AGENTS,
    DAY0,
    Fleet,
    assert_rows_match,
    capture_bytes,
    example_capture,
    make_fleet,
    truth,
)

from consumers.index import (
    TABLES,
    TRENDS,
    ChdbIndex,
    ClickHouseServerIndex,
    Index,
    RowBatch,
    chdb_open_path,
    decision_rows,
    flag_row,
    insert_rows,
    run_trend,
    state_version,
)
from consumers.index.confined import QueryRefused, confine
from consumers.index.engine import QueryLimits
from consumers.ingest.store import (
    current_decisions,
    insert_captures,
    insert_flags,
    insert_quarantine,
    update_decisions,
)
from consumers.pacts.store import insert_violations
from schemas.errors import IndexError_

Factory = Callable[[str], Index]
SINCE, UNTIL = DAY0, DAY0 + timedelta(days=10)


@pytest.fixture(scope="session")
def chdb_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The process's one chdb path: reuse the path another test already holds open, if any."""
    return Path(chdb_open_path() or tmp_path_factory.mktemp("index-chdb"))


def _unique_db() -> str:
    return f"t_{uuid.uuid4().hex[:12]}"


def _drop_and_close(index: Index) -> None:
    try:
        index.command(f"DROP DATABASE IF EXISTS {index.database} SYNC")
    finally:
        index.close()


def current(index: Index, decision_id: str) -> dict[str, Any] | None:
    """The current version of one decision as the views see it (``failed_any`` folds in flags)."""
    rows = index.query(
        "SELECT * FROM decisions_current WHERE decision_id = {id:String} LIMIT 1", {"id": decision_id}
    )
    return rows[0] if rows else None


def load_fleet(index: Index, fleet: Fleet) -> None:
    """Insert the fleet the way ingest would, plus the twists trends must survive:
    flags before and after their capture, quarantined captures (at insert and by a later update),
    a re-inserted batch, and state-change versions that must not double count."""
    early = sorted(fleet.failure_flags)[::2]
    late = sorted(fleet.failure_flags)[1::2]
    at = DAY0 + timedelta(days=20)
    insert_flags(
        index,
        [
            flag_row(
                {
                    "decisionId": d,
                    "agentId": "x",
                    "reason": "complaint",
                    "flaggedAt": at.isoformat(),
                    "failure": True,
                }
            )
            for d in early
        ],
    )
    quarantined_at_insert = set(sorted(fleet.quarantined)[::2])
    batches: list[RowBatch] = [RowBatch(), RowBatch()]
    for i, c in enumerate(fleet.captures):
        did = c["decisionId"]
        rows = decision_rows(
            c,
            trust="quarantined" if did in quarantined_at_insert else "verified",
            quarantine_reason="signature" if did in quarantined_at_insert else "",
            segment_key=f"seg/{i // 150}",
            segment_offset=i * 100,
            segment_length=100,
            capture_bytes=capture_bytes(c),
            content_sha256=f"{i:064x}",
            source=f"blackbox.captures.v1/0/{i}",
        )
        batches[i // 150 if i < 300 else 1].add(rows)
    for batch in batches:
        insert_captures(index, batch)
    insert_captures(index, batches[0])  # redelivered batch: same rows again
    pact_rows = [
        {
            "decision_id": c["decisionId"],
            "agent_id": c["agentId"],
            "captured_at": c["capturedAt"],
            "rule": rule,
            "kind": kind,
            "detail": "",
            "evaluated_at": at,
        }
        for c in fleet.captures
        for rule, kind in fleet.pact_results.get(c["decisionId"], ())
    ]
    insert_violations(index, pact_rows)
    insert_violations(index, pact_rows[:40])  # a batch ingest ran again: the same rows once more
    insert_flags(
        index,
        [
            flag_row(
                {
                    "decisionId": d,
                    "agentId": "x",
                    "reason": "complaint",
                    "flaggedAt": at.isoformat(),
                    "failure": True,
                }
            )
            for d in late
        ]
        + [
            flag_row(
                {
                    "decisionId": d,
                    "agentId": "x",
                    "reason": "vip",
                    "flaggedAt": at.isoformat(),
                    "failure": False,
                }
            )
            for d in fleet.other_flags
        ],
    )
    update_decisions(
        index,
        sorted(fleet.quarantined - quarantined_at_insert),
        {"trust": "quarantined", "quarantine_reason": "tampered"},
    )
    held = [c["decisionId"] for c in fleet.captures[::7]]
    update_decisions(index, held, {"legal_hold": True, "hold_reason": "case-1"})
    update_decisions(index, held[::2], {"legal_hold": False, "hold_reason": ""})


class IndexContract:
    """Every engine must pass this. Subclasses provide a class-scoped ``factory(database) -> Index``."""

    @pytest.fixture
    def index(self, factory: Factory) -> Iterator[Index]:
        handle = factory(_unique_db())
        handle.ensure_schema()
        yield handle
        _drop_and_close(handle)

    @pytest.fixture(scope="class")
    @classmethod
    def fleet(cls) -> Fleet:
        return make_fleet(300)

    @pytest.fixture(scope="class")
    @classmethod
    def fleet_index(cls, factory: Factory, fleet: Fleet) -> Iterator[Index]:
        handle = factory(_unique_db())
        handle.ensure_schema()
        load_fleet(handle, fleet)
        yield handle
        _drop_and_close(handle)

    # --- schema ---------------------------------------------------------------------------------------
    def test_schema_applies_twice(self, index: Index) -> None:
        index.ensure_schema()
        index.ensure_schema()
        names = {
            r["name"]
            for r in index.query("SELECT name FROM system.tables WHERE database = currentDatabase()")
        }
        assert names == {*TABLES, "decisions_current", "decisions_versions"}
        assert index.column_types("decisions")["captured_at"] == "DateTime64(3, 'UTC')"
        assert index.column_types("decisions")["agent_id"] == "LowCardinality(String)"

    def test_fidelity_column_upgrades_an_older_index_and_splits_trends(self, index: Index) -> None:
        fresh = list(index.column_types("decisions"))
        assert fresh[fresh.index("capture_level") + 1] == "fidelity"
        # An index created before capture/v2 (no fidelity column) holding one decision.
        index.command("ALTER TABLE decisions DROP COLUMN fidelity")
        old = example_capture()
        old["decisionId"] = "dec_before_v2"
        row = dict(decision_rows(old).decision)
        del row["fidelity"]
        index.insert("decisions", {name: [value] for name, value in row.items()})
        index.ensure_schema()
        index.ensure_schema()  # idempotent
        assert list(index.column_types("decisions")) == fresh  # same position as a fresh index
        assert current(index, "dec_before_v2")["fidelity"] == "sdk"

        wire = example_capture()
        wire["decisionId"], wire["fidelity"] = "dec_wire", "wire"
        insert_captures(index, [decision_rows(wire)])
        assert current(index, "dec_wire")["fidelity"] == "wire"
        day = datetime(2026, 7, 23, tzinfo=UTC)
        split = run_trend(index, "failure_rate", since=day, until=day + timedelta(days=1), by="fidelity")
        assert sorted((r["fidelity"], r["decisions"]) for r in split) == [("sdk", 1), ("wire", 1)]

    # --- rows in, rows out -----------------------------------------------------------------------------
    def test_example_capture_round_trip(self, index: Index) -> None:
        capture = example_capture()
        ingested = datetime(2026, 7, 23, 13, 0, 1, 5000, tzinfo=UTC)
        rows = decision_rows(
            capture,
            segment_key="seg/a",
            segment_offset=10,
            segment_length=99,
            capture_bytes=4321,
            content_sha256="ab" * 32,
            source="t/0/5",
            ingested_at=ingested,
            manifest_json='{"m": 1}',
        )
        assert insert_captures(index, [rows]) == 1
        got = current(index, "dec_01J9Z8K2V6XAMPLE")
        assert got is not None
        assert got["captured_at"] == datetime(2026, 7, 23, 13, 0, 0, 456000, tzinfo=UTC)
        assert got["ingested_at"] == datetime(2026, 7, 23, 13, 0, 1, 5000, tzinfo=UTC)
        assert got["expires_at"] == got["captured_at"] + timedelta(days=365)
        expected = {
            "agent_id": "agt_support_1",
            "runtime_id": "rt_eu1_7",
            "origin_user_id": "usr_42",
            "capture_level": "full",
            "content_state": "full",
            "trust": "verified",
            "consequential": True,
            "consequential_reason": "issues refunds",
            "failed": False,
            "failed_any": False,
            "outcome_status": "unknown",
            "stop_reason": "end_turn",
            "prompt_version": "v4.7",
            "tool_schema_version": "tools-2026-07",
            "model_id": "acme-chat",
            "model_version": "2026-06-01",
            "model_endpoint": "http://127.0.0.1:8000/v1",
            "temperature": 0.2,
            "top_p": 0.95,
            "max_tokens": 4096,
            "seed": 7,
            "total_context_tokens": 12483,
            "working_set_entries": 2,
            "reasoning_token_count": 1240,
            "tool_call_count": 2,
            "tool_error_count": 0,
            "total_latency_ms": 1840,
            "retention_class": "consequential",
            "retention_days": 365,
            "legal_hold": False,
            "access_scope": "operator",
            "pii_redacted": False,
            "segment_key": "seg/a",
            "segment_offset": 10,
            "segment_length": 99,
            "capture_bytes": 4321,
            "content_sha256": "ab" * 32,
            "manifest_json": '{"m": 1}',
            "key_id": "",
            "source": "t/0/5",
            "version": 0,
            "working_set_bytes": len(
                example_capture()["memoryState"]["workingSetEntries"][0]["renderedContent"].encode()
            )
            + len(example_capture()["memoryState"]["workingSetEntries"][1]["renderedContent"].encode()),
        }
        assert {k: got[k] for k in expected} == expected
        calls = index.query(
            "SELECT * FROM tool_calls FINAL WHERE decision_id = {d:String} ORDER BY sequence",
            {"d": "dec_01J9Z8K2V6XAMPLE"},
        )
        assert [(c["sequence"], c["tool_name"], c["latency_ms"], c["is_error"]) for c in calls] == [
            (1, "get_balance", 142, False),
            (2, "issue_refund", 230, False),
        ]
        mem = index.query("SELECT * FROM memory_entries FINAL ORDER BY context_position")
        assert [
            (m["entry_id"], m["tier"], m["writer_id"], m["retrieval_score"], m["embedding_model"])
            for m in mem
        ] == [
            ("mem_01", "hot", "wrt_crm_sync", 0.84, "text-embedding-3-small"),
            ("mem_02", "warm", "wrt_agent", 0.5, ""),
        ]
        assert mem[0]["written_at"] == datetime(2026, 7, 20, 9, 12, tzinfo=UTC)
        assert mem[1]["content_bytes"] == len("Note: customer prefers email. 日本語 ✓ 𝄞".encode())

    def test_sealed_capture_keeps_hashes_and_key_id(self, index: Index, tmp_path: Path) -> None:
        from producers.evidence import seal
        from producers.evidence.keys import Signer

        signer = Signer.from_seed(bytes(range(32)), name="did:armalo:agent:agt_1")
        sealed = seal(example_capture(), signer)
        insert_captures(index, [decision_rows(sealed)])
        got = current(index, sealed["decisionId"])
        assert got is not None
        assert got["key_id"] == signer.key_id
        for column, value in (
            ("prompt_hash", sealed["agentConfiguration"]["systemPromptHash"]),
            ("tool_schema_hash", sealed["agentConfiguration"]["toolSchemaHash"]),
            ("context_set_hash", sealed["memoryState"]["contextSetHash"]),
            ("rendered_context_hash", sealed["renderedContext"]["hash"]),
            ("final_output_hash", sealed["executionTrace"]["finalOutputHash"]),
            ("request_payload_hash", sealed["input"]["requestPayloadHash"]),
        ):
            assert got[column] == value and value.startswith("sha256:"), column
        hashes = index.query("SELECT input_hash, output_hash FROM tool_calls FINAL ORDER BY sequence")
        assert [h["input_hash"] for h in hashes] == [
            c["inputHash"] for c in sealed["executionTrace"]["toolCalls"]
        ]

    def test_structured_only_capture_without_content(self, index: Index) -> None:
        capture = example_capture()
        capture["captureLevel"] = "structured-only"
        capture["consequential"] = {"flagged": False, "reason": None}
        capture["outcome"] = {"status": "failure", "reason": "wrong refund"}
        for entry in capture["memoryState"]["workingSetEntries"]:
            entry["renderedContent"] = None
            entry["renderedContentHash"] = "sha256:" + "1" * 64
        capture["executionTrace"]["toolCalls"][1]["errorRef"] = "err:declined"
        insert_captures(index, [decision_rows(capture)])
        got = current(index, capture["decisionId"])
        assert got is not None
        assert (got["content_state"], got["retention_class"], got["working_set_bytes"]) == (
            "structured-only",
            "structured",
            None,
        )
        assert (got["failed"], got["failed_any"], got["tool_error_count"]) == (True, True, 1)
        assert [
            r["content_bytes"] for r in index.query("SELECT content_bytes FROM memory_entries FINAL")
        ] == [None, None]

    def test_reinserted_batch_is_one_logical_row(self, index: Index) -> None:
        fleet = make_fleet(40, seed=3)
        rows = [decision_rows(c) for c in fleet.captures]
        insert_captures(index, RowBatch.of(rows))
        insert_captures(index, RowBatch.of(rows))  # the same batch again (a redelivery)
        again = [
            decision_rows(c, ingested_at=datetime.now(UTC) + timedelta(seconds=5)) for c in fleet.captures
        ]
        insert_captures(index, RowBatch.of(again))  # redelivered later: rows differ in ingested_at only
        calls = sum(len(c["executionTrace"]["toolCalls"]) for c in fleet.captures)
        assert index.query("SELECT count() AS n FROM decisions FINAL") == [{"n": 40}]
        assert index.query("SELECT count() AS n FROM decisions_current") == [{"n": 40}]
        assert index.query("SELECT count() AS n FROM tool_calls FINAL") == [{"n": calls}]
        index.command("OPTIMIZE TABLE decisions FINAL")
        assert index.query("SELECT count() AS n FROM decisions") == [{"n": 40}]

    def test_final_sees_latest_version(self, index: Index) -> None:
        capture = example_capture()
        did = capture["decisionId"]
        insert_captures(index, [decision_rows(capture)])
        v1 = state_version()
        update_decisions(index, [did], {"legal_hold": True, "hold_reason": "litigation 7"}, version=v1)
        got = current(index, did)
        assert got is not None and (got["legal_hold"], got["hold_reason"], got["version"]) == (
            True,
            "litigation 7",
            v1,
        )
        assert got["prompt_version"] == "v4.7"  # unchanged columns are carried over
        update_decisions(
            index, [did], {"content_state": "metadata-only"}, version=v1 - 5
        )  # late, older update
        insert_captures(index, [decision_rows(capture)])  # redelivered capture (version 0)
        got = current(index, did)
        assert got is not None and (got["legal_hold"], got["content_state"], got["version"]) == (
            True,
            "full",
            v1,
        )
        update_decisions(index, [did], {"content_state": "metadata-only", "working_set_bytes": None})
        got = current(index, did)
        assert got is not None and (got["content_state"], got["working_set_bytes"], got["legal_hold"]) == (
            "metadata-only",
            None,
            True,
        )
        assert index.query("SELECT count() AS n FROM decisions FINAL") == [{"n": 1}]
        with pytest.raises(IndexError_):
            update_decisions(index, [did], {"decision_id": "other"})

    def test_dedup_token_drops_a_retried_batch(self, index: Index) -> None:
        flags = [
            flag_row(
                {
                    "decisionId": "d1",
                    "agentId": "a",
                    "reason": "r",
                    "flaggedAt": "2026-07-01T00:00:00Z",
                    "failure": True,
                }
            )
        ]
        index.insert("flags", {k: [v] for k, v in flags[0].items()}, dedup_token="seg/1:flags")
        other = {**flags[0], "decision_id": "d2"}
        index.insert("flags", {k: [v] for k, v in other.items()}, dedup_token="seg/1:flags")
        assert [r["decision_id"] for r in index.query("SELECT decision_id FROM flags")] == ["d1"]

    def test_current_decisions(self, index: Index) -> None:
        fleet = make_fleet(5, seed=5)
        insert_captures(
            index, [decision_rows(c, content_sha256=f"h{i}") for i, c in enumerate(fleet.captures)]
        )
        found = current_decisions(
            index, ["dec_00001", "dec_00003", "nope"], columns=("content_sha256", "consequential")
        )
        assert set(found) == {"dec_00001", "dec_00003"}
        assert found["dec_00003"]["content_sha256"] == "h3" and isinstance(
            found["dec_00003"]["consequential"], bool
        )
        assert set(current_decisions(index, ["dec_00004", "dec_99999"])) == {"dec_00004"}
        assert current(index, "nope") is None

    def test_failure_flag_before_and_after_capture(self, index: Index) -> None:
        fleet = make_fleet(3, seed=9)
        for c in fleet.captures:
            c["outcome"] = {"status": "success", "reason": None}
        flag = {"agentId": "a", "reason": "chargeback", "flaggedAt": "2026-07-02T00:00:00Z", "failure": True}
        insert_flags(index, [flag_row({**flag, "decisionId": "dec_00000"})])  # before its capture
        insert_captures(index, [decision_rows(c) for c in fleet.captures])
        insert_flags(index, [flag_row({**flag, "decisionId": "dec_00001"})])  # after
        not_a_failure = flag_row({**flag, "decisionId": "dec_00002", "failure": False})
        insert_flags(index, [not_a_failure])
        got = {
            r["decision_id"]: r["failed_any"]
            for r in index.query("SELECT decision_id, failed_any FROM decisions_current")
        }
        assert got == {"dec_00000": True, "dec_00001": True, "dec_00002": False}

    def test_delete_decisions(self, index: Index) -> None:
        fleet = make_fleet(4, seed=2)
        insert_captures(index, [decision_rows(c) for c in fleet.captures])
        for table in ("tool_calls", "memory_entries", "decisions"):  # lightweight DELETE, bound ids
            index.command(
                f"DELETE FROM {table} WHERE decision_id IN {{ids:Array(String)}}",
                {"ids": ["dec_00001", "dec_00002"]},
            )
        assert [
            r["decision_id"]
            for r in index.query("SELECT decision_id FROM decisions FINAL ORDER BY decision_id")
        ] == ["dec_00000", "dec_00003"]
        left = {
            r["decision_id"]
            for r in index.query(
                "SELECT DISTINCT decision_id FROM tool_calls UNION ALL SELECT DISTINCT decision_id FROM memory_entries"
            )
        }
        assert left <= {"dec_00000", "dec_00003"}

    def test_parameters_are_bound_not_spliced(self, index: Index) -> None:
        nasty = "it's a \\ test'; DROP TABLE decisions; --\n\t 日本 𝄞"
        capture = example_capture()
        capture["decisionId"] = nasty
        capture["executionTrace"]["stopReason"] = nasty
        insert_captures(index, [decision_rows(capture)])
        got = index.query(
            "SELECT decision_id, stop_reason FROM decisions FINAL WHERE decision_id = {d:String} AND has({ids:Array(String)}, decision_id) AND captured_at < {t:DateTime64(3, 'UTC')}",
            {"d": nasty, "ids": [nasty, "x'y"], "t": datetime(2027, 1, 1, tzinfo=UTC)},
        )
        assert got == [{"decision_id": nasty, "stop_reason": nasty}]
        assert current(index, nasty) is not None

    def test_read_only_queries_refuse_writes(self, index: Index) -> None:
        assert index.query("SELECT 1 AS one", read_only=True) == [{"one": 1}]
        for sql in (
            "INSERT INTO flags (decision_id) VALUES ('x')",
            "DROP TABLE flags",
            "SELECT 1 SETTINGS readonly = 0",
        ):
            with pytest.raises(IndexError_):
                index.query(sql, read_only=True)
        assert index.query("SELECT count() AS n FROM flags") == [{"n": 0}]

    def test_confined_queries(self, index: Index, tmp_path: Path) -> None:
        """``blackbox query``'s engine side: the parser's tree (no FORMAT of the client's in it), the
        readonly = 1 connection and its row limit, the same on every engine."""
        limits = QueryLimits(max_rows=3, timeout_s=10)
        assert confine(index, "SELECT count() AS n FROM decisions_current", limits=limits)
        for sql, why in (
            (f"SELECT * FROM file('{tmp_path}/k', 'LineAsString')", "table function file()"),
            (f"SELECT 1 INTO OUTFILE '{tmp_path}/o'", "INTO OUTFILE"),
            ("SELECT 1 FORMAT JSON", "FORMAT"),
            ("SELECT * FROM system.tables", "system.tables"),
        ):
            with pytest.raises(QueryRefused, match=re.escape(why)):
                confine(index, sql, limits=limits)
        assert not (tmp_path / "o").exists()
        with pytest.raises(IndexError_):
            index.query("INSERT INTO flags (decision_id) VALUES ('x')", limits=limits)
        rows = index.query("SELECT number FROM system.numbers", limits=limits)  # endless, cut by the engine
        assert 3 < len(rows) <= 1_000_000
        assert index.query("SELECT count() AS n FROM flags") == [{"n": 0}]

    def test_other_tables_round_trip(self, index: Index) -> None:
        at = datetime(2026, 7, 5, 1, 2, 3, 4000, tzinfo=UTC)
        access = {
            "at": at,
            "caller": "ops",
            "scope": "operator",
            "decision_id": "d",
            "agent_id": "a",
            "action": "show",
            "reason": "incident 9",
            "outcome": "allowed",
            "detail": "",
        }
        insert_rows(index, "access_log", [access, access])  # two identical reads are two audit rows
        rows = index.query("SELECT * FROM access_log ORDER BY event_id")
        assert len(rows) == 2 and rows[0]["event_id"] != rows[1]["event_id"] and rows[0]["at"] == at
        insert_rows(
            index,
            "replay_runs",
            [
                {
                    "run_id": "r1",
                    "at": at,
                    "decision_id": "d",
                    "agent_id": "a",
                    "kind": "variation",
                    "variable": "model",
                    "variation_value": "m2",
                    "model_used": "m2",
                    "final_output_equal": False,
                    "tool_sequence_equal": True,
                    "first_divergent_step": 3,
                    "stop_reason": "end_turn",
                    "verdict": "diverged",
                    "outcome_changed": True,
                },
                {
                    "run_id": "r1",
                    "at": at,
                    "decision_id": "d",
                    "agent_id": "a",
                    "kind": "replay",
                    "first_divergent_step": None,
                },
            ],
        )
        runs = index.query(
            "SELECT kind, first_divergent_step, outcome_changed, substitute_model FROM replay_runs FINAL ORDER BY kind"
        )
        assert runs == [
            {
                "kind": "replay",
                "first_divergent_step": None,
                "outcome_changed": False,
                "substitute_model": "",
            },
            {"kind": "variation", "first_divergent_step": 3, "outcome_changed": True, "substitute_model": ""},
        ]
        insert_quarantine(
            index,
            [
                {
                    "decision_id": "d",
                    "agent_id": "a",
                    "reason": "conflicting duplicate",
                    "part": "content",
                    "source": "t/0/9",
                    "segment_key": "q/1",
                    "segment_offset": 0,
                    "segment_length": 5,
                    "received_at": "2026-07-05T00:00:00Z",
                    "content_sha256": "ff",
                }
            ],
        )
        insert_rows(
            index,
            "deletions",
            [
                {
                    "at": at,
                    "decision_id": "d",
                    "segment_key": "s/1",
                    "action": "compact",
                    "reason": "30d",
                    "policy": "default",
                }
            ],
        )
        assert index.query("SELECT received_at FROM quarantine") == [
            {"received_at": datetime(2026, 7, 5, tzinfo=UTC)}
        ]
        assert index.query("SELECT action FROM deletions") == [{"action": "compact"}]

    def test_insert_errors_name_the_problem(self, index: Index) -> None:
        with pytest.raises(IndexError_, match="unknown column"):
            index.insert("flags", {"decision_id": ["x"], "bogus": [1]})
        with pytest.raises(IndexError_, match="different lengths"):
            index.insert("flags", {"decision_id": ["x", "y"], "reason": ["r"]})
        with pytest.raises(IndexError_):
            index.insert("tool_calls", {"decision_id": ["x"], "sequence": ["not a number"]})
        with pytest.raises(IndexError_):
            index.query("SELECT * FROM no_such_table")
        assert index.insert("flags", {"decision_id": []}) == 0

    def test_ttl_only_collects_rows_without_stored_bytes(self, index: Index) -> None:
        past = "2026-01-31T00:00:00Z"  # expired long ago (+ the 7-day grace)
        base = {
            "agent_id": "a",
            "captured_at": "2026-01-01T00:00:00Z",
            "trust": "verified",
            "expires_at": past,
        }
        insert_rows(
            index,
            "decisions",
            [
                {**base, "decision_id": "bytes-kept", "segment_key": "seg/1"},  # retention job has not run
                {**base, "decision_id": "held", "legal_hold": True},
                {**base, "decision_id": "tombstone", "content_state": "expired"},
                {**base, "decision_id": "fresh", "expires_at": "2099-01-01T00:00:00Z"},
            ],
        )
        index.command("OPTIMIZE TABLE decisions FINAL")  # a merge applies the TTL
        left = [
            r["decision_id"] for r in index.query("SELECT decision_id FROM decisions ORDER BY decision_id")
        ]
        assert left == ["bytes-kept", "fresh", "held"]

    def test_latency_day_without_measurements(self, index: Index) -> None:
        capture = example_capture()
        capture["executionTrace"]["totalLatencyMs"] = None
        insert_captures(index, [decision_rows(capture)])
        day = datetime(2026, 7, 23, tzinfo=UTC)
        assert run_trend(index, "latency", since=day, until=day + timedelta(days=1)) == [
            {
                "day": date(2026, 7, 23),
                "decisions": 1,
                "measured": 0,
                "p50_ms": None,
                "p90_ms": None,
                "p99_ms": None,
            }
        ]

    # --- trends against ground truth ----------------------------------------------------------------
    @pytest.mark.parametrize("name", sorted(TRENDS))
    def test_trend_matches_ground_truth(self, fleet_index: Index, fleet: Fleet, name: str) -> None:
        got = run_trend(fleet_index, name, since=SINCE, until=UNTIL)
        assert got, name
        assert_rows_match(got, truth(fleet, name, SINCE, UNTIL))
        assert list(got[0]) == list(TRENDS[name].columns)

    @pytest.mark.parametrize("name", sorted(TRENDS))
    def test_trend_window_and_agent_filter(self, fleet_index: Index, fleet: Fleet, name: str) -> None:
        since, until = DAY0 + timedelta(days=3), DAY0 + timedelta(days=6)
        got = run_trend(fleet_index, name, since=since, until=until, agent=AGENTS[1])
        assert_rows_match(got, truth(fleet, name, since, until, AGENTS[1]))
        if "day" in TRENDS[name].columns:
            assert {r["day"] for r in got} == {date(2026, 7, 4), date(2026, 7, 5), date(2026, 7, 6)}

    def test_failure_cluster_stands_out(self, fleet_index: Index) -> None:
        rows = run_trend(fleet_index, "failure_rate", since=SINCE, until=UNTIL)
        cluster = [
            r
            for r in rows
            if r["prompt_version"] == "v4.7"
            and r["model_version"] == "2026-06-01"
            and r["day"] >= date(2026, 7, 6)
        ]
        rest = [r for r in rows if r not in cluster]
        rate = sum(r["failures"] for r in cluster) / sum(r["decisions"] for r in cluster)
        base = sum(r["failures"] for r in rest) / sum(r["decisions"] for r in rest)
        assert rate > 0.5 > 0.25 > base

    def test_trend_by_dimension(self, fleet_index: Index, fleet: Fleet) -> None:
        plain = run_trend(fleet_index, "failure_rate", since=SINCE, until=UNTIL)
        split = run_trend(fleet_index, "failure_rate", since=SINCE, until=UNTIL, by="agent_id")
        assert list(split[0]) == [
            "day",
            "prompt_version",
            "model_version",
            "agent_id",
            "decisions",
            "failures",
            "failure_rate",
        ]
        assert sum(r["decisions"] for r in split) == sum(r["decisions"] for r in plain)
        assert sum(r["failures"] for r in split) == sum(r["failures"] for r in plain)
        for agent in AGENTS:
            mine = [{k: v for k, v in r.items() if k != "agent_id"} for r in split if r["agent_id"] == agent]
            assert_rows_match(mine, truth(fleet, "failure_rate", SINCE, UNTIL, agent))
        per_day = run_trend(fleet_index, "stop_reasons", since=SINCE, until=UNTIL, by="day")
        assert list(per_day[0])[:2] == ["day", "stop_reason"]
        for day in {r["day"] for r in per_day}:
            assert abs(sum(r["share"] for r in per_day if r["day"] == day) - 1) < 1e-3
        tools = run_trend(fleet_index, "tool_errors", since=SINCE, until=UNTIL, by="day")
        assert sum(r["calls"] for r in tools) == sum(
            r["calls"] for r in truth(fleet, "tool_errors", SINCE, UNTIL)
        )
        latency = run_trend(fleet_index, "latency", since=SINCE, until=UNTIL, by="prompt_version")
        assert list(latency[0])[:2] == ["day", "prompt_version"]
        with pytest.raises(IndexError_, match="cannot be split"):
            run_trend(fleet_index, "tool_errors", since=SINCE, until=UNTIL, by="prompt_version; DROP TABLE x")
        with pytest.raises(IndexError_, match="unknown trend"):
            run_trend(fleet_index, "nope", since=SINCE, until=UNTIL)

    def test_trends_see_one_row_per_decision(self, fleet_index: Index, fleet: Fleet) -> None:
        volume = run_trend(fleet_index, "volume", since=SINCE, until=UNTIL)
        trusted = len(fleet.captures) - len(fleet.quarantined)
        assert sum(r["captures"] for r in volume) == trusted


# --- the engines ------------------------------------------------------------------------------------------
class TestChdbIndex(IndexContract):
    @pytest.fixture(scope="class")
    @classmethod
    def factory(cls, chdb_dir: Path) -> Factory:
        return lambda database: ChdbIndex(chdb_dir, database=database)


class TestClickHouseConnectOverChdb(IndexContract):
    """ClickHouseServerIndex's exact code path (clickhouse-connect Native inserts, server-side parameter
    binding, named_results) against clickhouse-connect's in-process chdb backend."""

    @pytest.fixture(scope="class")
    @classmethod
    def factory(cls, chdb_dir: Path) -> Factory:
        return lambda database: ClickHouseServerIndex(f"chdb://{chdb_dir}", database=database)


@pytest.mark.clickhouse_server
class TestClickHouseServer(IndexContract):
    @pytest.fixture(scope="class")
    @classmethod
    def factory(cls) -> Factory:
        url = os.environ.get("BLACKBOX_CLICKHOUSE_URL")
        if not url:
            pytest.skip(
                "BLACKBOX_CLICKHOUSE_URL is not set: a ClickHouse server cannot be installed on this machine; "
                "the same contract suite runs above on chdb and on clickhouse-connect's chdb backend"
            )
        return lambda database: ClickHouseServerIndex(url, database=database)


# --- engine-independent ---------------------------------------------------------------------------------
def test_one_chdb_path_per_process(chdb_dir: Path, tmp_path: Path) -> None:
    first = ChdbIndex(chdb_dir, database=_unique_db())
    try:
        with pytest.raises(IndexError_, match="one chdb data path per process") as info:
            ChdbIndex(tmp_path / "other")
        assert str(chdb_dir.resolve()) in str(info.value)
        second = ChdbIndex(chdb_dir, database=_unique_db())  # the same path is fine
        second.close()
        second.close()  # idempotent
    finally:
        first.close()
    with pytest.raises(IndexError_, match="closed"):
        first.query("SELECT 1")


def test_server_index_reports_unreachable_server() -> None:
    with pytest.raises(IndexError_, match="cannot connect") as info:
        ClickHouseServerIndex("http://user:secret@127.0.0.1:9/blackbox")
    assert "secret" not in str(info.value)

"""A late flag within the flight recorder's window gives a replayable full capture downstream.

The Recorder sends a routine decision structured-only, then - flagged later - its full capture
under the same decision id. Ingest upgrades the structured-only record (same signed structure and
hashes, content added) instead of quarantining it as a conflicting duplicate; ``show`` shows the
content, ``verify`` passes, replay runs, trends count the decision once. A forged "upgrade" whose
structured parts differ is still a conflict. End to end through the real pipeline: the local spool
and the real Kafka broker, ``blackbox consume``/``show``/``verify`` as a user runs them.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from ingest_testdata import (
    chdb_index,
    create_topics,
    current_row,
    encoded,
    make_capture,
    new_signer,
    sealed,
    trust_for,
)
from typer.testing import CliRunner, Result

from consumers.access import AccessGate, Caller, IndexAccessLog
from consumers.cli import app
from consumers.index import ChdbIndex, run_trend
from consumers.ingest import manifest_json
from consumers.ingest.batch import BatchProcessor
from consumers.ingest.store import update_decisions
from consumers.ingest.upgrade import relation
from consumers.replay import CallableModelClient, EvidenceVerifier, IndexedCaptureSource, Replayer
from producers.blobstore import LocalBlobStore
from producers.evidence import Signer, TrustStore
from producers.policy import CapturePolicy, strip_content
from producers.recorder import CaptureFailure, Recorder
from producers.transports.base import SourceMessage
from producers.transports.spool.dead_letter import LocalDeadLetters
from producers.transports.spool.sender import SpoolTransport
from schemas.codec import encode_capture
from schemas.errors import ContentNotHeld

AGENT = "agt_support_1"
SYSTEM_PROMPT = "You are the support agent for Acme Bank. Refunds within 30 days."
ANSWER = "I've refunded $120.00 to your account (refund rf_1)."


class ManualClock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


def _decide(rec: Recorder, *, customer: str, balance_error: str | None = None) -> str:
    """One support turn as a runtime records it: context, two tool calls, an answer."""
    with rec.decision(request={"message": f"refund {customer}"}, origin_user_id=customer) as d:
        d.configure(
            model="acme-support",
            model_version="2026-06-01",
            system_prompt=SYSTEM_PROMPT,
            system_prompt_version="v4.7",
            tool_schema={"tools": [{"type": "function", "function": {"name": "get_balance"}}]},
            sampling={"temperature": 0.0},
        )
        d.add_memory(entry_id=f"mem_{customer}", tier="hot", content=f"{customer} was charged twice")
        d.render_context(user_message=f"Please refund the double charge, I am {customer}.")
        d.add_tool_call(
            name="get_balance",
            input={"customer_id": customer},
            output={"balance": 880.0},
            latency_ms=40,
            error_ref=balance_error,
        )
        d.add_tool_call(
            name="issue_refund", input={"customer_id": customer, "amount": 120.0}, output={"id": "rf_1"}
        )
        d.observe_external(key="customer.balance", value={"amount": 880.0})
        d.finish(output=ANSWER, outcome="success")
    return d.decision_id


def _scripted_model(payload: dict[str, Any]) -> dict[str, Any]:
    """The model as it behaved: look the balance up, refund, answer."""
    tools_answered = sum(1 for m in payload["messages"] if m.get("role") == "tool")
    user = next(m["content"] for m in payload["messages"] if m.get("role") == "user")
    customer = user.rsplit(" ", 1)[-1].rstrip(".")
    if tools_answered < 2:
        name, args = (
            ("get_balance", {"customer_id": customer})
            if tools_answered == 0
            else ("issue_refund", {"customer_id": customer, "amount": 120.0})
        )
        call = {
            "id": f"call_{tools_answered}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(args)},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        return {"choices": [{"message": message, "finish_reason": "tool_calls"}]}
    return {"choices": [{"message": {"role": "assistant", "content": ANSWER}, "finish_reason": "stop"}]}


def _cli(env: dict[str, str], *args: str) -> Result:
    return CliRunner().invoke(app, list(args), env=env)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("transport", ["spool", pytest.param("kafka", marks=pytest.mark.kafka)])
def test_a_late_flag_within_the_window_gives_a_replayable_full_capture(
    transport: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    data = tmp_path / "bb"
    signer = new_signer()
    trust_for(signer).save(data / "trust.toml")
    env = {"BLACKBOX_DATA_DIR": str(data), "BLACKBOX_TRANSPORT": transport, "BLACKBOX_BLOB": "local"}
    if transport == "kafka":
        bootstrap = request.getfixturevalue("kafka_bootstrap")
        topic = f"bbtest.flight.{uuid.uuid4().hex[:10]}"
        create_topics(bootstrap, topic, partitions=1)
        create_topics(bootstrap, f"{topic}.dlq", partitions=1)
        env |= {
            "BLACKBOX_KAFKA_BOOTSTRAP": bootstrap,
            "BLACKBOX_TOPIC": topic,
            "BLACKBOX_DLQ_TOPIC": f"{topic}.dlq",
            "BLACKBOX_CONSUMER_GROUP": f"g-{uuid.uuid4().hex[:8]}",
        }
        from producers.transports.kafka.sender import KafkaTransport

        sender: Any = KafkaTransport(bootstrap=bootstrap, topic=topic)
    else:
        sender = SpoolTransport(data / "spool", linger_ms=1)

    clock = ManualClock(datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1))
    failures: list[CaptureFailure] = []
    rec = Recorder(
        agent_id=AGENT,
        transport=sender,
        signer=signer,
        policy=CapturePolicy(sample_one_in=0),
        clock=clock,
        on_error=failures.append,
    )
    late = _decide(rec, customer="cus_1")  # flagged 10 minutes later: within the window
    gone = _decide(rec, customer="cus_2")  # flagged 20 minutes later: after it
    failed = _decide(rec, customer="cus_3", balance_error="err:ledger-timeout")  # fires by itself
    routine = _decide(rec, customer="cus_4")
    assert rec.flush(10)
    clock.advance(minutes=10)
    assert rec.flag_consequential(late, "customer disputes the refund")
    clock.advance(minutes=10)
    assert rec.flag_consequential(gone, "auditor, the next day")
    assert rec.close(30)
    [not_held] = failures
    assert not_held.decision_id == gone and isinstance(not_held.error, ContentNotHeld)
    assert rec.stats.flight.upgraded == 1 and rec.stats.flight.fired == 1

    consumed = _cli(env, "consume", "--drain", "--max-wait", "0.2")
    assert consumed.exit_code == 0, consumed.output
    assert "indexed=4" in consumed.output and "content_upgrades=1" in consumed.output
    assert "conflicts=0" in consumed.output and "quarantined=0" in consumed.output

    # show: the content is there, verified at read time
    shown = _cli(env, "show", late, "--json")
    assert shown.exit_code == 0, shown.output
    view = json.loads(shown.stdout)
    assert view["verification"]["verdict"] == "verified"
    capture = view["capture"]
    assert capture["captureLevel"] == "full"
    assert capture["consequential"] == {"flagged": True, "reason": "customer disputes the refund"}
    assert capture["executionTrace"]["finalOutputText"] == ANSWER
    assert capture["agentConfiguration"]["systemPromptText"] == SYSTEM_PROMPT
    assert _cli(env, "verify", late).exit_code == 0
    # after the window: still structured-only, and show says so
    still = _cli(env, "show", gone)
    assert still.exit_code == 0 and "structured-only: content not captured" in still.output, still.output
    assert json.loads(_cli(env, "show", failed, "--json").stdout)["capture"]["consequential"] == {
        "flagged": True,
        "reason": "failure indicator: tool error in get_balance",
    }

    with chdb_index(data / "index", database="blackbox") as index:
        rows = {did: current_row(index, did) for did in (late, gone, failed, routine)}
        assert {did: (r["capture_level"], r["content_state"]) for did, r in rows.items() if r} == {
            late: ("full", "full"),
            gone: ("structured-only", "structured-only"),
            failed: ("full", "full"),
            routine: ("structured-only", "structured-only"),
        }
        upgraded = rows[late]
        assert upgraded is not None and upgraded["retention_class"] == "consequential"
        assert upgraded["failed_any"]  # the flag (failure=True) still counts
        assert index.query("SELECT count() AS n FROM quarantine")[0]["n"] == 0
        # trends count the decision once
        since, until = clock.now - timedelta(days=1), clock.now + timedelta(days=1)
        assert sum(r["captures"] for r in run_trend(index, "volume", since=since, until=until)) == 4

        # replay: the in-process model, the real gate, the evidence verifier
        replayer = Replayer(
            source=IndexedCaptureSource(index, LocalBlobStore(data / "blobs")),
            client=CallableModelClient(_scripted_model),
            gate=AccessGate(log=IndexAccessLog(index)),
            caller=Caller(identity="sre-oncall", scope="operator", reason="INC-12 disputed refund"),
            verifier=EvidenceVerifier(TrustStore.load(data / "trust.toml")),
        )
        result = replayer.replay(late)
        assert result.verified and result.final_output == ANSWER
        comparison = result.compared_to_original()
        assert comparison is not None and not comparison.changed, comparison
        index.command("DROP DATABASE IF EXISTS blackbox SYNC")


# --- the batch rules, without services --------------------------------------------------------------------


@pytest.fixture
def signer() -> Signer:
    return new_signer()


@pytest.fixture
def index(tmp_path: Path) -> Iterator[ChdbIndex]:
    with chdb_index(tmp_path / "chdb") as idx:
        yield idx


@pytest.fixture
def processor(index: ChdbIndex, signer: Signer, tmp_path: Path) -> BatchProcessor:
    return BatchProcessor(
        store=LocalBlobStore(tmp_path / "blobs"),
        index=index,
        trust=trust_for(signer),
        dead_letters=LocalDeadLetters(tmp_path / "dlq"),
    )


def _messages(values: list[bytes], start: int) -> list[SourceMessage]:
    return [
        SourceMessage("blackbox.captures.v1", 0, start + i, AGENT.encode(), v) for i, v in enumerate(values)
    ]


def _pair(signer: Signer, i: int = 1) -> tuple[bytes, bytes, dict[str, Any]]:
    """A decision's structured-only capture and the flight recorder's full one (same content, flagged)."""
    capture = make_capture(i, tag="fl", level="structured-only")
    structured = strip_content(sealed(capture, signer))
    full = dict(capture, captureLevel="full", consequential={"flagged": True, "reason": "late flag"})
    return encode_capture(structured), encoded(full, signer), full


def test_an_upgrade_replaces_the_structured_row_and_a_redelivery_is_a_duplicate(
    processor: BatchProcessor, index: ChdbIndex, signer: Signer
) -> None:
    structured, full, _ = _pair(signer)
    assert processor.process(_messages([structured], 0)).indexed == 1
    update_decisions(index, ["dec_fl_000001"], {"legal_hold": True, "hold_reason": "case 7"})

    upgraded = processor.process(_messages([full], 1))
    assert upgraded.content_upgrades == 1 and upgraded.indexed == 0 and upgraded.conflicts == ()
    row = current_row(index, "dec_fl_000001")
    assert row is not None and (row["capture_level"], row["content_state"]) == ("full", "full")
    assert row["consequential"] and row["retention_class"] == "consequential"
    assert row["legal_hold"] and row["hold_reason"] == "case 7"  # decided since, stays decided

    again = processor.process(_messages([structured, full], 0))  # the whole stream redelivered
    assert again.duplicates == 2 and again.conflicts == () and again.quarantined == 0
    assert index.query("SELECT count() AS n FROM decisions_current")[0]["n"] == 1


def test_a_structured_capture_and_its_upgrade_in_one_batch(
    processor: BatchProcessor, index: ChdbIndex, signer: Signer
) -> None:
    structured, full, _ = _pair(signer, 2)
    result = processor.process(_messages([structured, full], 0))
    assert result.indexed == 1 and result.content_upgrades == 1 and result.conflicts == ()
    row = current_row(index, "dec_fl_000002")
    assert row is not None and row["content_state"] == "full"


@pytest.mark.parametrize(
    "forge",
    [
        pytest.param(
            lambda c: c["executionTrace"]["toolCalls"][0]["output"].update(balance=1e9), id="tool-output"
        ),
        pytest.param(lambda c: c["outcome"].update(status="failure"), id="outcome"),
        pytest.param(lambda c: c["memoryState"]["workingSetEntries"].pop(), id="working-set"),
    ],
)
def test_a_forged_upgrade_with_other_structured_parts_is_still_a_conflict(
    processor: BatchProcessor, index: ChdbIndex, signer: Signer, forge: Any
) -> None:
    structured, _, full = _pair(signer, 3)
    processor.process(_messages([structured], 0))
    forged = json.loads(json.dumps(full))
    forge(forged)
    result = processor.process(_messages([encoded(forged, signer)], 1))  # validly signed, other structure
    assert result.conflicts == ("dec_fl_000003",) and result.content_upgrades == 0
    row = current_row(index, "dec_fl_000003")
    assert row is not None and row["content_state"] == "structured-only"
    [q] = index.query("SELECT reason FROM quarantine FINAL")
    assert q["reason"] == "ConflictingDuplicate"


def test_only_content_for_a_structured_only_decision_upgrades_it(signer: Signer) -> None:
    capture = make_capture(4, tag="fl", level="structured-only")
    structured = strip_content(sealed(capture, signer))
    flagged = strip_content(sealed(dict(capture, consequential={"flagged": True, "reason": "x"}), signer))
    full = sealed(dict(capture, captureLevel="full", consequential={"flagged": True, "reason": "x"}), signer)

    def row(c: dict[str, Any], state: str | None = None) -> dict[str, Any]:
        level = c["captureLevel"]
        return {"manifest_json": manifest_json(c), "capture_level": level, "content_state": state or level}

    assert relation(stored=row(structured), arriving=row(full, "full")) == "upgrade"
    assert relation(stored=row(full, "full"), arriving=row(structured)) == "subsumed"
    # content for a decision retention already expired is kept in quarantine, not revived or dropped
    assert relation(stored=row(structured, "expired"), arriving=row(full, "full")) == "conflict"
    # two structured-only captures that differ (here: the flag) are not an upgrade of one another
    assert relation(stored=row(structured), arriving=row(flagged)) == "conflict"

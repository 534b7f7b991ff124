"""Keys bound to agents (issue 8, item 4): a key that signs outside its agents is quarantined, and its
forgeries never displace or conflict-quarantine the genuine capture, whichever arrives first."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest
from ingest_testdata import chdb_index, encoded, flag_bytes, make_capture, new_signer, sealed

from consumers.index import ChdbIndex
from consumers.ingest.batch import BatchProcessor
from consumers.storage.reader import load_capture
from producers.blobstore import LocalBlobStore
from producers.evidence import Signer, TrustStore, verify_capture
from producers.transports.base import SourceMessage
from producers.transports.spool.dead_letter import LocalDeadLetters

TOPIC = "blackbox.captures.v1"
SUPPORT = "agt_support_1"
BILLING = "billing-eu-1"
EPOCH = datetime(2000, 1, 1, tzinfo=UTC)


@pytest.fixture
def support_key() -> Signer:
    return new_signer("did:test:support")


@pytest.fixture
def billing_key() -> Signer:
    return new_signer("did:test:billing")


@pytest.fixture
def trust(support_key: Signer, billing_key: Signer) -> TrustStore:
    store = TrustStore()
    store.add(support_key.public_raw, not_before=EPOCH, agents=["agt_support_*"])
    store.add(billing_key.public_raw, not_before=EPOCH, agents=["billing-*"])
    return store


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


def _msgs(values: Sequence[bytes], *, start: int = 0) -> list[SourceMessage]:
    return [SourceMessage(TOPIC, 0, start + i, SUPPORT.encode(), v) for i, v in enumerate(values)]


def _forgery(billing_key: Signer) -> bytes:
    """The billing key signs a capture under the support agent's id and decision id."""
    forged = make_capture(7, agent=SUPPORT)
    forged["executionTrace"]["finalOutputText"] = "Refund approved: $9,999 (forged)"
    return encoded(forged, billing_key)


def _quarantine(index: ChdbIndex) -> list[dict[str, object]]:
    return index.query("SELECT decision_id, agent_id, reason, part FROM quarantine FINAL")


def _assert_forgery_quarantined(index: ChdbIndex, billing_key: Signer) -> None:
    rows = _quarantine(index)
    assert len(rows) == 1, rows
    row = rows[0]
    assert row["decision_id"] == "dec_t_000007" and row["agent_id"] == SUPPORT
    reason = str(row["reason"])
    assert reason.startswith("KeyNotAuthorizedForAgent")
    assert billing_key.key_id in reason and SUPPORT in reason
    assert row["part"] == "agentId"


def _assert_genuine_indexed(
    index: ChdbIndex, store: LocalBlobStore, trust: TrustStore, genuine: dict[str, object]
) -> None:
    shown = load_capture("dec_t_000007", index=index, store=store)
    assert shown.content_state == "full" and shown.row["trust"] == "verified"
    assert shown.capture == genuine
    verify_capture(shown.capture, trust)


@pytest.mark.parametrize("forgery_first", [True, False], ids=["forgery-first", "genuine-first"])
def test_a_key_signing_for_another_agent_is_quarantined_and_never_displaces_the_genuine_capture(
    processor: BatchProcessor,
    index: ChdbIndex,
    store: LocalBlobStore,
    trust: TrustStore,
    support_key: Signer,
    billing_key: Signer,
    forgery_first: bool,
) -> None:
    genuine = sealed(make_capture(7, agent=SUPPORT), support_key)
    from schemas.codec import encode_capture

    order = [_forgery(billing_key), encode_capture(genuine)]
    if not forgery_first:
        order.reverse()
    first = processor.process(_msgs(order[:1]))
    second = processor.process(_msgs(order[1:], start=1))

    assert first.indexed + second.indexed == 1
    assert first.conflicts == second.conflicts == ()
    assert first.quarantined + second.quarantined == 1
    _assert_forgery_quarantined(index, billing_key)
    _assert_genuine_indexed(index, store, trust, genuine)


def test_forgery_and_genuine_in_one_batch(
    processor: BatchProcessor,
    index: ChdbIndex,
    store: LocalBlobStore,
    trust: TrustStore,
    support_key: Signer,
    billing_key: Signer,
) -> None:
    genuine = sealed(make_capture(7, agent=SUPPORT), support_key)
    from schemas.codec import encode_capture

    result = processor.process(_msgs([_forgery(billing_key), encode_capture(genuine)]))
    assert (result.indexed, result.quarantined, result.conflicts) == (1, 1, ())
    _assert_forgery_quarantined(index, billing_key)
    _assert_genuine_indexed(index, store, trust, genuine)
    # the forgery redelivered: still quarantined once, still no conflict
    again = processor.process(_msgs([_forgery(billing_key)], start=2))
    assert (again.indexed, again.quarantined, again.conflicts) == (0, 0, ())


def test_a_key_signing_inside_its_agents_is_indexed(
    processor: BatchProcessor, billing_key: Signer, support_key: Signer
) -> None:
    result = processor.process(
        _msgs(
            [
                encoded(make_capture(1, agent="billing-eu-1", tag="b"), billing_key),
                encoded(make_capture(2, agent="agt_support_2"), support_key),
            ]
        )
    )
    assert (result.indexed, result.quarantined) == (2, 0)


def test_a_flag_signed_for_another_agent_is_quarantined_and_not_applied(
    processor: BatchProcessor, index: ChdbIndex, support_key: Signer, billing_key: Signer
) -> None:
    assert processor.process(_msgs([encoded(make_capture(7, agent=SUPPORT), support_key)])).indexed == 1
    result = processor.process(_msgs([flag_bytes("dec_t_000007", billing_key, agent=SUPPORT)], start=1))
    assert (result.flags, result.upgraded, result.quarantined) == (0, 0, 1)
    (row,) = _quarantine(index)
    assert str(row["reason"]).startswith("flag KeyNotAuthorizedForAgent")
    assert billing_key.key_id in str(row["reason"]) and SUPPORT in str(row["reason"])
    current = index.query("SELECT consequential, failed_any FROM decisions_current")
    assert current == [{"consequential": False, "failed_any": False}]


def test_a_flag_naming_its_own_agent_but_another_agents_decision_is_not_applied(
    processor: BatchProcessor, index: ChdbIndex, support_key: Signer, billing_key: Signer
) -> None:
    """The billing key may sign flags for billing agents, not upgrade the support agent's decisions."""
    assert processor.process(_msgs([encoded(make_capture(7, agent=SUPPORT), support_key)])).indexed == 1
    result = processor.process(_msgs([flag_bytes("dec_t_000007", billing_key, agent=BILLING)], start=1))
    assert (result.flags, result.upgraded, result.quarantined) == (0, 0, 1)
    (row,) = _quarantine(index)
    assert str(row["reason"]).startswith("flag AgentMismatch") and row["part"] == "agentId"
    current = index.query("SELECT consequential, failed_any FROM decisions_current")
    assert current == [{"consequential": False, "failed_any": False}]


def test_a_pending_flag_applies_only_to_a_capture_of_its_agent(
    processor: BatchProcessor, index: ChdbIndex, support_key: Signer, billing_key: Signer
) -> None:
    """A flag that arrives before its capture waits; it upgrades the capture only if the agents match."""
    assert processor.process(_msgs([flag_bytes("dec_t_000007", billing_key, agent=BILLING)])).flags == 1
    assert (
        processor.process(_msgs([flag_bytes("dec_t_000008", support_key, agent=SUPPORT)], start=1)).flags == 1
    )
    result = processor.process(
        _msgs(
            [
                encoded(make_capture(7, agent=SUPPORT), support_key),
                encoded(make_capture(8, agent=SUPPORT), support_key),
            ],
            start=2,
        )
    )
    assert result.indexed == 2
    rows = {
        r["decision_id"]: r
        for r in index.query("SELECT decision_id, consequential, retention_class FROM decisions_current")
    }
    assert not rows["dec_t_000007"]["consequential"]
    assert (
        rows["dec_t_000008"]["consequential"] and rows["dec_t_000008"]["retention_class"] == "consequential"
    )

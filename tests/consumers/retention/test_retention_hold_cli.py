"""Legal hold (audited), the CLI commands, and show/verify of a compacted decision."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from retention_world import T0, World, make_capture, standard_captures
from typer.testing import CliRunner

from consumers.app.settings import load_service_settings
from consumers.cli import app
from consumers.index import open_index
from consumers.retention.hold import LegalHolds
from consumers.retention.log import read_jsonl
from consumers.retention.status import content_status, manifest_capture
from consumers.storage.reader import load_capture
from consumers.verify.stored import verify_stored
from producers.blobstore import BlobStore, LocalBlobStore
from producers.evidence import (
    FLAG_PAYLOAD_TYPE,
    Signer,
    TrustStore,
    canonical_json,
    verify_capture,
    verify_event,
)
from producers.evidence.dsse import b64decode, make_envelope
from producers.transports.spool.files import read_spool
from schemas.codec import decode
from schemas.errors import CaptureNotFound, RetentionError

DAY = timedelta(days=1)


def _holds(world: World) -> LegalHolds:
    base = world.tmp / "data" / "retention"
    return LegalHolds(
        index=world.index,
        audit_path=base / "holds.jsonl",
        lock_path=base / "retention.lock",
        caller="counsel@example",
        scope="regulator",
        clock=world.clock,
    )


def test_hold_and_release_are_audited(
    make_world: Callable[[BlobStore], World], local_store: BlobStore
) -> None:
    world = make_world(local_store)
    world.ingest([make_capture(world.signer, "dec_a", T0)])
    holds = _holds(world)

    first = holds.hold("dec_a", reason="litigation 17")
    again = holds.hold("dec_a", reason="litigation 17")
    assert first.changed and not again.changed
    assert world.row("dec_a")["legal_hold"] is True
    assert world.row("dec_a")["hold_reason"] == "litigation 17"
    assert [r["decision_id"] for r in holds.held()] == ["dec_a"]

    released = holds.release("dec_a", reason="settled")
    assert released.changed and world.row("dec_a")["legal_hold"] is False
    assert not holds.release("dec_a", reason="again").changed

    audit = read_jsonl(world.tmp / "data" / "retention" / "holds.jsonl")
    assert [(a["action"], a["changed"]) for a in audit] == [
        ("legal-hold", True),
        ("legal-hold", False),
        ("legal-release", True),
        ("legal-release", False),
    ]
    assert audit[0]["caller"] == "counsel@example" and audit[0]["reason"] == "litigation 17"
    logged = world.index.query(
        "SELECT action, caller, scope, reason FROM access_log WHERE decision_id = 'dec_a' ORDER BY at, action"
    )
    assert {(r["action"], r["reason"]) for r in logged} == {
        ("legal-hold", "litigation 17"),
        ("legal-release", "settled"),
        ("legal-release", "again"),
    }
    assert all(r["caller"] == "counsel@example" and r["scope"] == "regulator" for r in logged)


def test_hold_needs_a_reason_a_known_decision_and_content_left(
    make_world: Callable[[BlobStore], World], local_store: BlobStore
) -> None:
    world = make_world(local_store)
    world.ingest([make_capture(world.signer, "dec_a", T0, consequential=True)])
    holds = _holds(world)
    with pytest.raises(RetentionError, match="needs a reason"):
        holds.hold("dec_a", reason="  ")
    with pytest.raises(CaptureNotFound):
        holds.hold("dec_missing", reason="x")
    world.clock.set(T0 + 400 * DAY)
    world.compactor().run()
    assert world.row("dec_a")["content_state"] == "expired"
    with pytest.raises(RetentionError, match="expired"):
        holds.hold("dec_a", reason="too late")


def test_show_and_verify_a_compacted_decision(
    make_world: Callable[[BlobStore], World], local_store: BlobStore
) -> None:
    world = make_world(local_store)
    world.ingest(list(standard_captures(world.signer).values()))
    world.flag("dec_promoted", T0 + 2 * DAY)
    _holds(world).hold("dec_held", reason="audit")
    world.clock.set(T0 + 31 * DAY)
    world.compactor().run()

    # rows rewritten by compaction (promoted, held copy) still agree with their verified captures
    for did in ("dec_promoted", "dec_held"):
        moved = verify_stored(
            did, index=world.index, store=local_store, trust=world.trust, at=world.clock.now()
        )
        assert moved.content_state == "full" and moved.checked_parts > 0
        assert moved.segment_key != world.segments[did]

    shown = load_capture("dec_routine_1", index=world.index, store=local_store)
    assert shown.content_state == "metadata-only"
    assert shown.capture["renderedContext"].get("text") is None
    assert shown.capture["renderedContext"]["hash"].startswith("sha256:")
    checked = verify_stored(
        "dec_routine_1", index=world.index, store=local_store, trust=world.trust, at=world.clock.now()
    )
    assert checked.content_state == "metadata-only"
    assert "executionTrace.finalOutputText" in checked.absent_parts
    full = verify_stored(
        "dec_conseq_1", index=world.index, store=local_store, trust=world.trust, at=world.clock.now()
    )
    assert full.checked_parts > 0

    row = world.row("dec_routine_1")
    status = content_status(row)
    assert (status.state, status.present, status.verifiable) == ("metadata-only", False, True)
    assert "Content gone" in status.message
    manifest = manifest_capture(row)
    assert manifest is not None
    assert verify_capture(manifest, world.trust, at=world.clock.now()).decision_id == "dec_routine_1"
    assert content_status(world.row("dec_conseq_1")).present


# --- CLI -------------------------------------------------------------------------------------------------
@pytest.fixture
def cli_env(tmp_path: Path, signer: Signer, chdb_dir: Path) -> dict[str, str]:
    return {
        "BLACKBOX_DATA_DIR": str(tmp_path / "cli"),
        "BLACKBOX_CHDB_PATH": str(chdb_dir),  # the process's one chdb path; database "blackbox"
        "BLACKBOX_SIGNING_KEY_B64": base64.b64encode(signer.seed()).decode(),
        "BLACKBOX_CALLER": "ops@example",
    }


@pytest.fixture
def cli_world(cli_env: dict[str, str], signer: Signer, trust: TrustStore, tmp_path: Path) -> Iterator[World]:
    from retention_world import FixedClock

    settings = load_service_settings(
        data_dir=Path(cli_env["BLACKBOX_DATA_DIR"]), chdb_path=Path(cli_env["BLACKBOX_CHDB_PATH"])
    )
    index = open_index(settings)
    index.command("DROP DATABASE IF EXISTS blackbox SYNC")
    index.ensure_schema()
    world = World(
        index=index,  # type: ignore[arg-type]
        store=LocalBlobStore(settings.resolved_blob_dir),
        signer=signer,
        trust=trust,
        tmp=tmp_path,
        clock=FixedClock(T0),
    )
    world.ingest(list(standard_captures(signer).values()))
    try:
        yield world
    finally:
        try:
            index.command("DROP DATABASE IF EXISTS blackbox SYNC")
        finally:
            index.close()


def test_cli_compact_hold_release(cli_env: dict[str, str], cli_world: World) -> None:
    runner = CliRunner()
    held = runner.invoke(app, ["hold", "dec_held", "--reason", "subpoena 9"], env=cli_env)
    assert held.exit_code == 0, held.output
    assert "held: dec_held" in held.output

    dry = runner.invoke(
        app, ["compact", "--as-of", "2030-02-01T00:00:00Z", "--dry-run", "--json"], env=cli_env
    )
    assert dry.exit_code == 0, dry.output
    summary = json.loads(dry.output)
    assert summary["dry_run"] and summary["compacted"] == 6 and summary["hold_copied"] == 1
    assert cli_world.row("dec_routine_1")["content_state"] == "full"

    run = runner.invoke(app, ["compact", "--as-of", "2030-02-01T00:00:00Z"], env=cli_env)
    assert run.exit_code == 0, run.output
    assert "compacted to metadata-only" in run.output
    assert cli_world.row("dec_routine_1")["content_state"] == "metadata-only"
    assert cli_world.row("dec_held")["content_state"] == "full"
    log = Path(cli_env["BLACKBOX_DATA_DIR"]) / "retention" / "deletions.jsonl"
    assert any(e["decision_id"] == "dec_routine_1" and e["action"] == "compact" for e in read_jsonl(log))

    again = runner.invoke(app, ["compact", "--as-of", "2030-02-01T00:00:00Z", "--json"], env=cli_env)
    assert json.loads(again.output)["log_entries"] == 0

    released = runner.invoke(app, ["release", "dec_held", "--reason", "closed"], env=cli_env)
    assert released.exit_code == 0 and "released: dec_held" in released.output

    bad = runner.invoke(app, ["compact", "--as-of", "next tuesday"], env=cli_env)
    assert bad.exit_code != 0 and "--as-of" in str(bad.exception)


def test_cli_flag_sends_a_signed_event(
    cli_env: dict[str, str], cli_world: World, signer: Signer, trust: TrustStore
) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["flag", "dec_routine_2", "--reason", "chargeback", "--failure"], env=cli_env)
    assert result.exit_code == 0, result.output
    assert "flag sent (signed, spool)" in result.output
    records = list(read_spool(Path(cli_env["BLACKBOX_DATA_DIR"]) / "spool"))
    assert len(records) == 1
    decoded = decode(records[0].value)
    assert decoded.kind == "flag"
    value = decoded.value
    assert (value["decisionId"], value["agentId"], value["reason"], value["failure"]) == (
        "dec_routine_2",
        "agt_support_1",
        "chargeback",
        True,
    )
    assert value["signature"]["publicKeyRef"] == signer.public_key_ref
    assert records[0].key == b"agt_support_1"
    # ingest's check: the DSSE envelope rebuilt from the inline block verifies against the trust store
    unsigned = {k: v for k, v in value.items() if k != "signature"}
    raw = b64decode(value["signature"]["signatureBytes"].removeprefix("base64:"))
    envelope = make_envelope(
        canonical_json(unsigned, path="flag"), FLAG_PAYLOAD_TYPE, raw, value["signature"]["publicKeyRef"]
    )
    assert verify_event(envelope, trust)["decisionId"] == "dec_routine_2"

    unknown = runner.invoke(app, ["flag", "dec_nope", "--reason", "x"], env=cli_env)
    assert isinstance(unknown.exception, CaptureNotFound)

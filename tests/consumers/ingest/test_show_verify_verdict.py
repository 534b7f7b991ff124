"""``show`` and ``verify DECISION_ID`` judge the stored capture at read time, and exit by the verdict.

Exit codes: 0 verified, 1 NOT VERIFIED (tampered, segment missing or corrupt, key revoked, unsigned,
quarantined), 2 usage or operational error, 3 expired. Embedded mode through the CLI, as a user runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from ingest_testdata import chdb_index, current_row, make_capture, new_signer, sealed, sha, trust_for
from typer.testing import CliRunner, Result

from consumers.cli import app
from consumers.index import ChdbIndex
from consumers.ingest.store import update_decisions
from consumers.storage.segments import SegmentWriter
from producers.blobstore import LocalBlobStore
from producers.evidence import Signer, TrustStore
from producers.policy import strip_content
from producers.transports.spool.files import SpoolWriter
from schemas.codec import encode_capture
from schemas.errors import BlobStoreError, VerificationError

FULL, STRUCTURED, OTHER = "dec_t_000001", "dec_t_000002", "dec_t_000003"
FORGED_TEXT = "Refund approved in full, no review needed."


@dataclass
class World:
    data: Path
    env: dict[str, str]
    signer: Signer
    captures: dict[str, dict[str, Any]]

    def run(self, *args: str) -> Result:
        return CliRunner().invoke(app, list(args), env=self.env)

    def index(self) -> Any:
        return chdb_index(self.data / "index", database="blackbox")

    @property
    def store(self) -> LocalBlobStore:
        return LocalBlobStore(self.data / "blobs")

    def row(self, decision_id: str) -> dict[str, Any]:
        with self.index() as idx:
            row = current_row(idx, decision_id)
        assert row is not None
        return row

    def update(self, decision_id: str, values: dict[str, Any]) -> None:
        with self.index() as idx:
            update_decisions(idx, [decision_id], values)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    signer = new_signer()
    data = tmp_path / "bb"
    trust_for(signer).save(data / "trust.toml")
    captures = {
        FULL: sealed(make_capture(1, size=3000), signer),
        STRUCTURED: strip_content(sealed(make_capture(2, level="structured-only"), signer)),
        OTHER: sealed(make_capture(3), signer),
    }
    writer = SpoolWriter(data / "spool")
    for capture in captures.values():
        writer.append(b"agt_support_1", encode_capture(capture))
    writer.publish()
    env = {"BLACKBOX_DATA_DIR": str(data), "BLACKBOX_TRANSPORT": "spool", "BLACKBOX_BLOB": "local"}
    w = World(data, env, signer, captures)
    consumed = w.run("consume", "--drain", "--max-wait", "0.1")
    assert consumed.exit_code == 0 and "indexed=3" in consumed.output, consumed.output
    yield w
    with w.index() as idx:
        idx.command("DROP DATABASE IF EXISTS blackbox SYNC")


def _json(result: Result) -> dict[str, Any]:
    value = json.loads(result.stdout)
    assert isinstance(value, dict)
    return value


def _reforge(w: World, decision_id: str) -> None:
    """A frame recompressed with different text, the row pointed at it and its content_sha256 adjusted."""
    edited = json.loads(json.dumps(w.captures[decision_id]))
    edited["executionTrace"]["finalOutputText"] = FORGED_TEXT
    data = encode_capture(edited)
    writer = SegmentWriter(retention_class="routine", topic="x", partition=0, first_offset=0)
    writer.append(data)
    key, body = writer.finish()
    w.store.put(key, body)
    loc = writer.locations()[0]
    w.update(
        decision_id,
        {
            "segment_key": key,
            "segment_offset": loc.offset,
            "segment_length": loc.length,
            "content_sha256": sha(data),
        },
    )


# --- a verified capture, and what verified does not cover ---------------------------------------------------


def test_show_verifies_at_read_time(world: World) -> None:
    shown = world.run("show", FULL)
    assert shown.exit_code == 0, shown.output
    assert "trust      verified key=sha256:" in shown.output and "NOT VERIFIED" not in shown.output
    view = _json(world.run("show", FULL, "--json"))
    assert view["verification"]["verdict"] == "verified" and view["verification"]["exitCode"] == 0
    assert view["capture"] == world.captures[FULL]

    structured = world.run("show", STRUCTURED)
    assert structured.exit_code == 0, structured.output
    assert "structured-only: content not captured" in structured.output
    assert (
        "executionTrace.finalOutputText"
        in _json(world.run("show", STRUCTURED, "--json"))["verification"]["absentParts"]
    )


# --- item 3: show prints tampered content as trust=verified ----------------------------------------------


def test_show_marks_a_reforged_frame_not_verified_and_exits_1(world: World) -> None:
    _reforge(world, FULL)
    assert world.row(FULL)["trust"] == "verified"  # the ingest-time column still says so

    shown = world.run("show", FULL)
    assert shown.exit_code == 1, shown.output
    first = shown.output.splitlines()[0]
    assert first.startswith(f"NOT VERIFIED: {FULL} part=executionTrace.finalOutputText (ContentHashMismatch)")
    assert "trust      NOT VERIFIED part=executionTrace.finalOutputText" in shown.output
    assert "untrusted" in shown.output and FORGED_TEXT in shown.output  # still shown, marked
    assert "trust=verified" not in shown.output and "trust      verified" not in shown.output

    as_json = world.run("show", FULL, "--json")
    assert as_json.exit_code == 1
    view = _json(as_json)
    assert view["verification"]["verdict"] == "not-verified"
    assert view["verification"]["part"] == "executionTrace.finalOutputText"
    assert view["capture"]["executionTrace"]["finalOutputText"] == FORGED_TEXT

    verified = world.run("verify", FULL)
    assert verified.exit_code == 1 and "part=executionTrace.finalOutputText" in verified.output


def test_show_and_verify_say_revoked_after_the_key_is_revoked(world: World) -> None:
    assert world.run("show", FULL).exit_code == 0
    trust = TrustStore.load(world.data / "trust.toml")
    trust.revoke(world.signer.key_id, datetime(2026, 8, 1, tzinfo=UTC))
    trust.save(world.data / "trust.toml")

    shown = world.run("show", FULL)
    assert shown.exit_code == 1, shown.output
    assert shown.output.startswith(f"NOT VERIFIED: {FULL} part=key (KeyNotTrusted)")
    assert "revoked at 2026-08-01T00:00:00Z" in shown.output and "trust      verified" not in shown.output
    assert _json(world.run("show", FULL, "--json"))["verification"]["part"] == "key"

    verified = world.run("verify", FULL)
    assert verified.exit_code == 1 and "revoked at 2026-08-01T00:00:00Z" in verified.output


# --- item 5: missing or corrupt evidence is a verdict, not an operational error ---------------------------


def test_verify_and_show_a_missing_segment_are_not_verified(world: World) -> None:
    key = world.row(FULL)["segment_key"]
    world.store.delete(key)

    verified = world.run("verify", FULL)
    assert verified.exit_code == 1, verified.output
    assert f"NOT VERIFIED: {FULL} part=segment (SegmentMissing): segment {key} is missing" in verified.output
    assert not verified.output.startswith("error:")

    shown = world.run("show", FULL)
    assert shown.exit_code == 1 and "part=segment (SegmentMissing)" in shown.output, shown.output
    view = _json(world.run("show", FULL, "--json"))
    assert view["verification"]["part"] == "segment" and view["capture"] is None


def test_verify_and_show_corrupt_segment_bytes_are_not_verified(world: World) -> None:
    row = world.row(FULL)
    body = bytearray(world.store.get(row["segment_key"]))
    body[row["segment_offset"] + row["segment_length"] // 2] ^= 0x01
    world.store.put(row["segment_key"], bytes(body))

    verified = world.run("verify", FULL)
    assert verified.exit_code == 1, verified.output
    assert "part=segment (FrameUnreadable)" in verified.output
    assert f"the frame at offset {row['segment_offset']} does not decompress" in verified.output
    assert not verified.output.startswith("error:")
    shown = world.run("show", FULL)
    assert shown.exit_code == 1 and "(FrameUnreadable)" in shown.output, shown.output


def test_a_truncated_segment_is_not_verified(world: World) -> None:
    row = world.row(OTHER)  # the last frame of its segment
    body = world.store.get(row["segment_key"])
    world.store.put(row["segment_key"], body[: row["segment_offset"]])

    verified = world.run("verify", OTHER)
    assert verified.exit_code == 1, verified.output
    assert "part=segment (SegmentTruncated)" in verified.output and not verified.output.startswith("error:")


def test_an_expired_decision_exits_3(world: World) -> None:
    world.update(OTHER, {"content_state": "expired"})
    verified = world.run("verify", OTHER)
    assert verified.exit_code == 3 and verified.output.startswith(f"EXPIRED: {OTHER}"), verified.output
    shown = world.run("show", OTHER)
    assert shown.exit_code == 3 and "EXPIRED" in shown.output, shown.output


def test_an_unsigned_quarantined_capture_is_shown_as_unsigned(world: World) -> None:
    unsigned = sealed(make_capture(9), world.signer)
    unsigned["signature"]["signatureBytes"] = ""
    writer = SpoolWriter(world.data / "spool")
    writer.append(b"agt_support_1", encode_capture(unsigned))
    writer.publish()
    assert "quarantined=1" in world.run("consume", "--drain", "--max-wait", "0.1").output

    shown = world.run("show", "dec_t_000009")
    assert shown.exit_code == 1, shown.output
    assert "part=signature (Unsigned): quarantined at ingest; unsigned:" in shown.output
    assert "QUARANTINED" in shown.output


def _blackbox(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The real entry point in a subprocess: ``main`` is what maps an error to ``error: ...``, exit 2."""
    return subprocess.run(
        [sys.executable, "-c", "from consumers.cli import main; main()", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_broken_setup_still_exits_2(world: World, tmp_path: Path) -> None:
    # a blob store that does not answer is not missing evidence: nothing can be said about the capture
    down = {**world.env, "BLACKBOX_BLOB": "s3", "BLACKBOX_S3_ENDPOINT": "127.0.0.1:1"}
    for command in ("verify", "show"):
        result = _blackbox([command, FULL], down)
        assert result.returncode == 2 and result.stderr.startswith("error: "), result
        assert "NOT VERIFIED" not in result.stdout and "Traceback" not in result.stderr
    unreachable_index = {**world.env, "BLACKBOX_CLICKHOUSE_URL": "http://127.0.0.1:1"}
    result = _blackbox(["verify", FULL], unreachable_index)
    assert result.returncode == 2 and "error: cannot connect to ClickHouse" in result.stderr, result
    result = _blackbox(["show", FULL, "--trust-store", str(tmp_path / "missing.toml")], world.env)
    assert result.returncode == 2 and "no trust store" in result.stderr, result


def test_a_blob_store_that_fails_is_an_error_not_a_verdict(world: World) -> None:
    from consumers.verify.stored import stored_verdict

    class Down(LocalBlobStore):
        def get(self, key: str, *, offset: int = 0, length: int | None = None) -> bytes:
            raise BlobStoreError(f"get {key}: connection refused")

    with world.index() as idx, pytest.raises(BlobStoreError, match="connection refused") as raised:
        stored_verdict(FULL, index=idx, store=Down(world.data / "blobs"), trust=trust_for(world.signer))
    assert not isinstance(raised.value, VerificationError)


def test_help_documents_the_exit_codes(world: World) -> None:
    for command in ("verify", "show"):
        text = world.run(command, "--help").output
        assert "Exit codes: 0 verified; 1 NOT VERIFIED" in " ".join(text.split()), text


def test_the_library_raises_a_verdict_for_a_missing_segment(tmp_path: Path) -> None:
    from consumers.ingest.batch import BatchProcessor
    from consumers.storage.reader import SegmentMissing
    from consumers.verify.stored import stored_verdict, verify_stored
    from producers.transports.base import SourceMessage
    from producers.transports.spool.dead_letter import LocalDeadLetters

    signer = new_signer()
    trust = trust_for(signer)
    store = LocalBlobStore(tmp_path / "blobs")
    with chdb_index(tmp_path / "chdb") as index:
        idx: ChdbIndex = index
        processor = BatchProcessor(
            store=store, index=idx, trust=trust, dead_letters=LocalDeadLetters(tmp_path / "dlq")
        )
        message = SourceMessage("t", 0, 0, b"a", encode_capture(sealed(make_capture(1), signer)))
        store.delete(processor.process([message]).segments[0])
        with pytest.raises(SegmentMissing) as missing:
            verify_stored(FULL, index=idx, store=store, trust=trust)
        assert missing.value.part == "segment"
        verdict = stored_verdict(FULL, index=idx, store=store, trust=trust)
        assert (verdict.status, verdict.part, verdict.exit_code) == ("not-verified", "segment", 1)

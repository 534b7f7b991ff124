"""Compaction and expiry never remove the log's leaves or tiles, and the ``blackbox log`` commands:
checkpoint, key, prove, verify --since (embedded: spool, local blobs, chdb)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from ingest_testdata import chdb_index, make_capture, new_signer, sealed, trust_for
from typer.testing import CliRunner

from consumers.cli import app
from consumers.retention.clock import FixedClock
from consumers.retention.compaction import Compactor
from consumers.retention.log import DeletionEntry
from consumers.retention.plan import OrphanBlob, SweepPlan
from consumers.retention.policy import default_policy
from consumers.retention.sweep import Sweeper
from consumers.tlog.frontier import object_key
from producers.blobstore import LocalBlobStore
from producers.evidence.tlog import capture_leaf, verify_inclusion
from producers.transports.spool.files import SpoolWriter
from schemas.codec import encode_capture
from schemas.errors import SettingsInvalid, TransparencyLogError

PREFIX = "tlog/blackbox.captures.v1"  # the default: tlog/<topic>


def _ingested(tmp_path: Path, n: int = 12) -> tuple[dict[str, str], list[dict[str, Any]], CliRunner]:
    data = tmp_path / "bb"
    signer = new_signer()
    trust_for(signer).save(data / "trust.toml")
    captures = [sealed(make_capture(i, size=300, flagged=i % 4 == 0), signer) for i in range(n)]
    writer = SpoolWriter(data / "spool")
    for capture in captures:
        writer.append(b"agt_support_1", encode_capture(capture))
    writer.publish()
    env = {"BLACKBOX_DATA_DIR": str(data), "BLACKBOX_TRANSPORT": "spool", "BLACKBOX_BLOB": "local"}
    runner = CliRunner()
    result = runner.invoke(app, ["consume", "--drain", "--max-wait", "0.1"], env=env)
    assert result.exit_code == 0, result.output
    return env, captures, runner


def test_log_commands_checkpoint_prove_and_verify_since(tmp_path: Path) -> None:
    env, captures, runner = _ingested(tmp_path)
    checkpoint = runner.invoke(app, ["log", "checkpoint"], env=env)
    assert checkpoint.exit_code == 0 and checkpoint.output.startswith("blackbox.local/log\n12\n"), (
        checkpoint.output
    )
    saved = tmp_path / "checkpoint.txt"
    saved.write_text(checkpoint.output)
    key = runner.invoke(app, ["log", "key"], env=env).output.strip()
    assert key.startswith("blackbox.local/log+")

    proved = runner.invoke(app, ["log", "prove", captures[5]["decisionId"]], env=env)
    assert proved.exit_code == 0, proved.output
    assert verify_inclusion(capture_leaf(captures[5]), json.loads(proved.output), key).size == 12
    missing = runner.invoke(app, ["log", "prove", "dec_nope"], env=env)
    assert isinstance(missing.exception, TransparencyLogError) and "not in the transparency log" in str(
        missing.exception
    )

    verified = runner.invoke(app, ["log", "verify", "--since", str(saved)], env=env)
    assert verified.exit_code == 0 and "verified:" in verified.output, verified.output

    tile = object_key(PREFIX, "0/0.p/12")
    store = LocalBlobStore(Path(env["BLACKBOX_DATA_DIR"]) / "blobs")
    body = bytearray(store.get(tile))
    body[-1] ^= 0xFF
    store.put(tile, bytes(body))
    broken = runner.invoke(app, ["log", "verify", "--since", str(saved)], env=env)
    assert broken.exit_code == 1 and "FINDING tile" in broken.output, broken.output

    saved.write_text(checkpoint.output.replace("\n12\n", "\n13\n"))
    forged = runner.invoke(app, ["log", "verify", "--since", str(saved)], env=env)
    assert isinstance(forged.exception, TransparencyLogError) and "not one of this log's" in str(
        forged.exception
    )


def test_compaction_and_expiry_leave_every_leaf_and_tile(tmp_path: Path) -> None:
    env, captures, _ = _ingested(tmp_path)
    data = Path(env["BLACKBOX_DATA_DIR"])
    store = LocalBlobStore(data / "blobs")
    before = {k: store.get(k) for k in store.list(PREFIX + "/")}
    assert any("/tile/entries/" in k for k in before) and f"{PREFIX}/checkpoint" in before
    with chdb_index(data / "index", database="blackbox") as index:
        clock = FixedClock(dt.datetime.now(dt.UTC) + dt.timedelta(days=3 * 365))  # everything expired
        result = Compactor.in_data_dir(
            data, index=index, store=store, policy=default_policy(), clock=clock
        ).run()
        assert result.expired + result.compacted >= len(captures) and result.segments_deleted
        leaves = index.query("SELECT count() AS n FROM tlog_leaves FINAL")[0]["n"]
    assert leaves == len(captures)
    assert {k: store.get(k) for k in store.list(PREFIX + "/")} == before


def test_the_sweep_never_deletes_outside_segments_and_claims(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path)
    store.put(f"{PREFIX}/tile/0/000.p/3", b"x" * 96)
    now = dt.datetime.now(dt.UTC) + dt.timedelta(days=30)
    forged = SweepPlan(
        as_of=now,
        now=now,
        segment_grace=dt.timedelta(hours=1),
        claim_grace=dt.timedelta(hours=1),
        orphans=(
            OrphanBlob(f"{PREFIX}/tile/0/000.p/3", "orphan-segment", now, "", "a plan that names a tile"),
        ),
    )
    recorded: list[DeletionEntry] = []
    with chdb_index(tmp_path / "chdb") as index:
        Sweeper(
            index=index,
            store=store,
            entry=lambda **kw: DeletionEntry(at=now, as_of=now, policy="test", **kw),
            record=recorded.extend,
            hook=lambda point: None,
        ).run(forged)
    assert store.exists(f"{PREFIX}/tile/0/000.p/3") and not recorded


def test_a_log_prefix_under_a_swept_prefix_is_refused() -> None:
    from consumers.app.settings import load_service_settings

    for bad in ("segments/tlog", "claims", "/"):
        try:
            load_service_settings(tlog_prefix=bad)
        except SettingsInvalid as exc:
            assert "BLACKBOX_TLOG_PREFIX" in str(exc)
        else:
            raise AssertionError(f"{bad!r} was accepted")

"""Read what was sealed (issue 24, item 7), on the real MinIO with Object Lock (governance): a delete
marker or a newer version over a segment is named as tampering with the object, and the capture still
verifies from the version ingest recorded when it wrote the segment."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from typer.testing import CliRunner, Result

from consumers.cli import app
from consumers.index import ChdbIndex, chdb_open_path
from producers.blobstore import S3BlobStore
from producers.claimcheck import ClaimChecker, resolve_claim_check
from producers.evidence import Signer, TrustStore, seal
from producers.transports.spool.files import SpoolWriter
from schemas.codec import encode_capture
from schemas.errors import BlobNotFound

pytestmark = pytest.mark.minio

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = json.loads((ROOT / "schemas" / "examples" / "capture.unsealed.json").read_text("utf-8"))


@pytest.fixture(scope="module")
def own_chdb_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("versions-chdb")


@pytest.fixture
def index(own_chdb_dir: Path) -> Iterator[ChdbIndex]:
    """Database ``blackbox`` on the process's one chdb path (another module's, else ours), fresh."""
    index = ChdbIndex(Path(chdb_open_path() or own_chdb_dir), database="blackbox")
    index.command("DROP DATABASE IF EXISTS blackbox SYNC")
    index.ensure_schema()
    yield index
    index.command("DROP DATABASE IF EXISTS blackbox SYNC")
    index.close()


def _capture(signer: Signer, decision_id: str, minute: int) -> dict[str, Any]:
    c = copy.deepcopy(EXAMPLE)
    c["decisionId"] = decision_id
    c["capturedAt"] = (datetime.now(UTC) - timedelta(minutes=minute)).isoformat(timespec="milliseconds")
    c["capturedAt"] = c["capturedAt"].replace("+00:00", "Z")
    c["consequential"] = {"flagged": True, "reason": "refund"}  # kept, and locked, for its retention
    return seal(c, signer)


def _cli(env: dict[str, str], *args: str) -> Result:
    return CliRunner().invoke(app, list(args), env=env)


def _spool_and_consume(data: Path, env: dict[str, str], capture: dict[str, Any]) -> str:
    """One capture through the spool and ingest into its own segment; returns the segment key."""
    writer = SpoolWriter(data / "spool")
    writer.append(capture["agentId"].encode(), encode_capture(capture))
    writer.publish()
    consumed = _cli(env, "consume", "--drain", "--max-wait", "0.2")
    assert consumed.exit_code == 0 and "indexed=1" in consumed.output, consumed.output
    shown = _cli(env, "show", capture["decisionId"], "--json")
    assert shown.exit_code == 0, shown.output
    view = json.loads(shown.stdout)
    assert view["verification"]["verdict"] == "verified" and view["tampering"] == []
    return str(view["stored"]["segment_key"])


@pytest.mark.timeout(300)
def test_a_delete_marker_or_an_overwrite_is_named_and_the_sealed_version_still_verifies(
    tmp_path: Path, index: ChdbIndex, object_lock_store: S3BlobStore, minio_config: dict[str, Any]
) -> None:
    signer = Signer(Ed25519PrivateKey.generate(), name="did:test:versions")
    data = tmp_path / "bb"
    trust = TrustStore()
    trust.add(signer.public_raw, not_before=datetime(2000, 1, 1, tzinfo=UTC))
    trust.save(data / "trust.toml")
    env = {
        "BLACKBOX_DATA_DIR": str(data),
        "BLACKBOX_CHDB_PATH": str(chdb_open_path()),
        "BLACKBOX_TRANSPORT": "spool",
        "BLACKBOX_BLOB": "s3",
        "BLACKBOX_S3_ENDPOINT": minio_config["endpoint"],
        "BLACKBOX_S3_ACCESS_KEY": minio_config["access_key"],
        "BLACKBOX_S3_SECRET_KEY": minio_config["secret_key"],
        "BLACKBOX_S3_BUCKET": object_lock_store.bucket,
        "BLACKBOX_S3_OBJECT_LOCK": "governance",
    }
    deleted, overwritten = _capture(signer, "dec_deleted", 2), _capture(signer, "dec_overwritten", 1)
    marked = _spool_and_consume(data, env, deleted)
    replaced = _spool_and_consume(data, env, overwritten)
    assert marked != replaced
    client = object_lock_store._client

    # a plain DELETE on a locking bucket: refused for the locked version, but a delete marker hides it
    client.remove_object(object_lock_store.bucket, marked)
    assert not object_lock_store.exists(marked)  # what an ordinary read finds now: nothing
    verified = _cli(env, "verify", "dec_deleted")
    assert verified.exit_code == 0, verified.output
    assert verified.output.startswith("verified: dec_deleted"), verified.output
    assert f"TAMPERING with {marked}: a delete marker (version " in verified.output, verified.output
    assert "hides the sealed version" in verified.output

    # a PUT of other bytes under the same key: a newer version over the sealed one
    object_lock_store.put(replaced, b"not the segment that was sealed")
    assert object_lock_store.get(replaced) == b"not the segment that was sealed"
    verified = _cli(env, "verify", "dec_overwritten")
    assert verified.exit_code == 0 and verified.output.startswith("verified: dec_overwritten"), (
        verified.output
    )
    assert f"TAMPERING with {replaced}: a newer version " in verified.output, verified.output
    assert "was written over the sealed version" in verified.output

    # show says the same, in its JSON and in its summary, beside the capture read from the sealed version
    view = json.loads(_cli(env, "show", "dec_overwritten", "--json").stdout)
    assert view["verification"]["verdict"] == "verified"
    assert view["capture"]["decisionId"] == "dec_overwritten"
    assert [t.split(":")[0] for t in view["tampering"]] == [f"TAMPERING with {replaced}"]
    assert view["verification"]["tampering"] == view["tampering"]
    summary = _cli(env, "show", "dec_deleted")
    assert summary.exit_code == 0 and f"TAMPERING with {marked}" in summary.output, summary.output


def test_a_claim_check_is_read_from_the_version_the_producer_wrote(
    object_lock_store: S3BlobStore, caplog: pytest.LogCaptureFixture
) -> None:
    body = b"the encoded capture, too large for the broker" * 100
    claim = ClaimChecker(store=object_lock_store, max_message_bytes=10).check_in(
        body, capture={"agentId": "agt_1", "decisionId": "dec_big"}
    )
    key = claim["blobKey"]
    assert resolve_claim_check(object_lock_store, claim) == body and "TAMPERING" not in caplog.text

    object_lock_store.put(key, b"other bytes under the same key")
    assert resolve_claim_check(object_lock_store, claim) == body
    assert f"TAMPERING with {key}: a newer version " in caplog.text

    caplog.clear()
    object_lock_store._client.remove_object(object_lock_store.bucket, key)  # a delete marker
    assert resolve_claim_check(object_lock_store, claim) == body
    assert f"TAMPERING with {key}: a delete marker (version " in caplog.text

    forged = {**claim, "sha256": "sha256:" + "0" * 64}  # no version holds the announced bytes: refused
    with pytest.raises(BlobNotFound):
        resolve_claim_check(object_lock_store, forged)

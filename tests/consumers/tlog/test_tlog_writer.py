"""The fenced writer on the real MinIO (DESIGN 23): one holder at a time, a stalled holder that wakes
writes nothing, a crash between the swap and the tiles is finished by the next holder, a tile with other
bytes stops the writer naming it, and a stale checkpoint never rolls the public one back."""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from consumers.tlog.checkpoints import LogSigner, checkpoint_key, latest, load_log_signer
from consumers.tlog.frontier import object_key
from consumers.tlog.state import StateStore
from consumers.tlog.tiles import TreeReader
from consumers.tlog.writer import LogWriter
from producers.blobstore import S3BlobStore
from producers.evidence.merkle import merkle_root
from schemas.errors import LeaseHeld, TileConflict, WriterFenced

pytestmark = pytest.mark.minio


@pytest.fixture
def store(minio_config: dict[str, Any]) -> S3BlobStore:
    cfg = minio_config
    return S3BlobStore(cfg["endpoint"], cfg["access_key"], cfg["secret_key"], cfg["bucket"], cfg["secure"])


@pytest.fixture
def prefix() -> str:
    return f"tlog-writer-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def log_signer(tmp_path: Path) -> LogSigner:
    return load_log_signer(tmp_path / "tlog.key", "blackbox.test/writer")


def _writer(store: S3BlobStore, prefix: str, signer: LogSigner, name: str, **kw: Any) -> LogWriter:
    return LogWriter(store=store, prefix=prefix, signer=signer, writer=name, **kw)


def _leaves(start: int, n: int) -> list[bytes]:
    return [f'{{"leaf":{i}}}'.encode() for i in range(start, start + n)]


def _objects(store: S3BlobStore, prefix: str) -> dict[str, str]:
    """Every object under the log's prefix and its ETag (what a writer may have changed)."""
    return {key: store.get_tagged(key).etag for key in store.list(prefix + "/")}


def test_one_holder_at_a_time_and_the_next_takes_over_after_release(
    store: S3BlobStore, prefix: str, log_signer: LogSigner
) -> None:
    a = _writer(store, prefix, log_signer, "a")
    b = _writer(store, prefix, log_signer, "b")
    a.hold()
    with pytest.raises(LeaseHeld, match="held by a"):
        b.hold()
    done = a.integrate(_leaves(0, 300))
    assert (done.first, done.state.size) == (0, 300)
    a.release()
    state = b.hold()
    assert state.size == 300 and state.token == 2 and state.writer == "b"
    assert b.integrate(_leaves(300, 5)).first == 300
    assert b.publish() is not None
    assert TreeReader(store, prefix, 305).root() == merkle_root(_leaves(0, 305))


def test_a_stalled_holder_that_wakes_after_its_lease_writes_nothing(
    store: S3BlobStore, prefix: str, log_signer: LogSigner
) -> None:
    a = _writer(store, prefix, log_signer, "a", lease=1.0)
    a.hold()
    a.integrate(_leaves(0, 10))
    assert a.publish() is not None
    time.sleep(1.2)  # a is stopped past its lease (SIGSTOP, a long pause) ...
    b = _writer(store, prefix, log_signer, "b", lease=30.0)
    b.hold()
    b.integrate(_leaves(10, 20))
    assert b.publish() is not None
    before = _objects(store, prefix)
    # ... and wakes: it writes no staged bundle, state, tile or checkpoint
    with pytest.raises(WriterFenced, match="lease"):
        a.integrate(_leaves(100, 3))
    assert a.publish() is None
    assert _objects(store, prefix) == before
    current = latest(store, prefix, log_signer.key)
    assert current is not None and current[1].size == 30


def test_a_holder_whose_swap_fails_stops_and_reloads(
    store: S3BlobStore, prefix: str, log_signer: LogSigner
) -> None:
    """Two writers that both believe they hold (clocks, a bug): the compare-and-swap lets one through."""
    a = _writer(store, prefix, log_signer, "a")
    a.hold()
    a.integrate(_leaves(0, 4))
    states = StateStore(store, prefix)
    state, etag = states.read()
    states.swap(state.next(writer="intruder"), etag)  # someone swapped behind a's back
    staged_before = set(store.list(prefix + "/staging/"))
    with pytest.raises(WriterFenced, match="changed since this writer read it"):
        a.integrate(_leaves(4, 4))
    assert set(store.list(prefix + "/staging/")) == staged_before  # its own bundle deleted
    assert not store.exists(object_key(prefix, "0/0.p/8"))
    state, _ = states.read()
    assert state.size == 4
    state, etag = states.read()
    states.swap(state.next(lease_until=0.0), etag)
    assert a.hold().size == 4  # reloaded


def test_a_crash_between_the_swap_and_the_tiles_is_finished_by_the_next_holder(
    store: S3BlobStore, prefix: str, log_signer: LogSigner, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = _writer(store, prefix, log_signer, "a", lease=0.5)
    a.hold()
    a.integrate(_leaves(0, 256))

    def crash(*args: Any, **kw: Any) -> None:
        raise SystemExit("killed after the swap")

    monkeypatch.setattr(a, "_upload", crash)
    with pytest.raises(SystemExit):
        a.integrate(_leaves(256, 300))
    assert not store.exists(object_key(prefix, "entries/1"))  # the swap happened, no tile did
    time.sleep(0.6)
    b = _writer(store, prefix, log_signer, "b")
    assert b.hold().size == 556  # applied a's staged bundle, loaded the frontier, checked the root
    assert b.integrate(_leaves(556, 1)).first == 556
    assert TreeReader(store, prefix, 557).root() == merkle_root(_leaves(0, 557))


def test_a_tile_holding_other_bytes_stops_the_writer_and_names_it(
    store: S3BlobStore, prefix: str, log_signer: LogSigner
) -> None:
    a = _writer(store, prefix, log_signer, "a")
    a.hold()
    forged = object_key(prefix, "entries/0.p/3")
    store.put(forged, b"\x00\x01x")  # planted, or a forked writer's
    with pytest.raises(TileConflict, match=re.escape(forged)):
        a.integrate(_leaves(0, 3))
    with pytest.raises(TileConflict):  # stopped for good
        a.hold()


def test_a_stale_checkpoint_never_rolls_the_public_one_back(
    store: S3BlobStore, prefix: str, log_signer: LogSigner
) -> None:
    a = _writer(store, prefix, log_signer, "a")
    a.hold()
    a.integrate(_leaves(0, 10))
    a.release()
    b = _writer(store, prefix, log_signer, "b")
    b.hold()
    b.integrate(_leaves(10, 10))
    assert b.publish() is not None
    a._replace_latest(10, log_signer.sign(10, merkle_root(_leaves(0, 10))))  # a late publication
    note = store.get(checkpoint_key(prefix)).decode()
    assert note.split("\n")[1] == "20"


def test_the_writer_role_moves_one_lease_after_its_holder_dies(
    store: S3BlobStore, prefix: str, log_signer: LogSigner
) -> None:
    dead = _writer(store, prefix, log_signer, "dead", lease=1.5)
    dead.hold()
    dead.integrate(_leaves(0, 5))  # ... and the process dies holding the log (no release)
    died = time.monotonic()
    heir = _writer(store, prefix, log_signer, "heir", lease=30.0)
    while True:
        try:
            state = heir.hold()
            break
        except LeaseHeld:
            time.sleep(0.05)
    moved = time.monotonic() - died
    print(f"the writer role moved {moved:.2f}s after its holder died (lease 1.5s)")
    assert 1.2 <= moved < 3.0
    assert state.size == 5 and state.token == 2

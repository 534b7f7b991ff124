"""The retention lease across hosts on the real MinIO (DESIGN 23): one retention writer at a time, a
second waits or exits with a clear message, a holder stalled past its lease changes nothing when it
wakes, and two `blackbox compact` processes (separate data directories, as on two hosts) started
together run one after the other."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from consumers.retention.lease import LeaseLost, RetentionLease
from producers.blobstore import S3BlobStore
from schemas.errors import RetentionError

pytestmark = pytest.mark.minio

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def store(minio_config: dict[str, Any]) -> S3BlobStore:
    cfg = minio_config
    return S3BlobStore(cfg["endpoint"], cfg["access_key"], cfg["secret_key"], cfg["bucket"], cfg["secure"])


@pytest.fixture
def key() -> str:
    return f"lease-test-{uuid.uuid4().hex[:10]}/retention"


def test_a_second_writer_exits_with_a_clear_message_or_waits(store: S3BlobStore, key: str) -> None:
    a = RetentionLease(store, what="compaction", key=key, holder="a")
    b = RetentionLease(store, what="compaction", key=key, holder="b")
    assert a.acquire() == 1
    with pytest.raises(RetentionError, match=r"another retention writer holds the lease \(a, token 1\)"):
        b.acquire(wait=0)
    threading.Timer(0.5, a.release).start()
    started = time.monotonic()
    assert b.acquire(wait=10) == 2  # waited for a's release
    assert time.monotonic() - started >= 0.4
    b.check("a step")
    b.release()


def test_a_stalled_holder_that_wakes_after_its_lease_changes_nothing(store: S3BlobStore, key: str) -> None:
    a = RetentionLease(store, what="compaction", key=key, holder="a", ttl=1.0)
    a.acquire()
    a.check("step 1")
    time.sleep(1.2)  # stopped past its lease
    b = RetentionLease(store, what="compaction", key=key, holder="b", ttl=30.0)
    assert b.acquire() == 2  # expired: taken over with the next token
    lease_object = store.get_tagged(key)
    with pytest.raises(LeaseLost, match="ran out"):
        a.check("step 2")
    a.release()  # no longer held: writes nothing
    assert store.get_tagged(key).etag == lease_object.etag
    b.check("its step")


def test_a_holder_renews_past_half_its_term_and_keeps_the_lease(store: S3BlobStore, key: str) -> None:
    a = RetentionLease(store, what="compaction", key=key, holder="a", ttl=1.0)
    a.acquire()
    for _ in range(4):  # 1.6 s of steps, each within half a term of the last renewal
        time.sleep(0.4)
        a.check("a step")
    with pytest.raises(RetentionError, match="holds the lease"):
        RetentionLease(store, what="compaction", key=key, holder="b").acquire()
    a.release()


def test_a_guarded_step_hook_stops_a_stalled_compactor_before_its_next_step(
    store: S3BlobStore, key: str
) -> None:
    a = RetentionLease(store, what="compaction", key=key, holder="a", ttl=0.5)
    a.acquire()
    steps: list[str] = []
    hook = a.guard(steps.append)
    hook("after_copy")
    time.sleep(0.6)
    RetentionLease(store, what="compaction", key=key, holder="b").acquire()
    with pytest.raises(LeaseLost):
        hook("after_log")
    assert steps == ["after_copy"]


def _env(data_dir: Path, minio: dict[str, Any], bucket: str, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        PYTHONPATH=str(ROOT),
        BLACKBOX_DATA_DIR=str(data_dir),
        BLACKBOX_BLOB="s3",
        BLACKBOX_S3_ENDPOINT=minio["endpoint"],
        BLACKBOX_S3_ACCESS_KEY=minio["access_key"],
        BLACKBOX_S3_SECRET_KEY=minio["secret_key"],
        BLACKBOX_S3_BUCKET=bucket,
        **extra,
    )
    return env


def _cli(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", "from consumers.entry import main; main()", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.fixture
def bucket(minio_config: dict[str, Any]) -> Iterator[str]:
    """A fresh bucket for two hosts' compactors, emptied and removed after."""
    from minio import Minio

    name = f"bb-lease-{uuid.uuid4().hex[:8]}"
    yield name
    cfg = minio_config
    client = Minio(cfg["endpoint"], access_key=cfg["access_key"], secret_key=cfg["secret_key"], secure=False)
    if client.bucket_exists(name):
        for obj in client.list_objects(name, recursive=True):
            if obj.object_name:
                client.remove_object(name, obj.object_name)
        client.remove_bucket(name)


def test_two_compactors_started_together_run_one_at_a_time(
    minio_config: dict[str, Any], tmp_path: Path, bucket: str
) -> None:
    dirs = [tmp_path / "host-a", tmp_path / "host-b"]
    for d in dirs:  # an (empty) index in each host's data directory
        done = _cli("consume", "--drain", env=_env(d, minio_config, bucket))
        out, _ = done.communicate(timeout=120)
        assert done.returncode == 0, out
    cfg = minio_config
    store = S3BlobStore(cfg["endpoint"], cfg["access_key"], cfg["secret_key"], bucket, False)
    third = RetentionLease(store, what="hold", holder="third", ttl=60.0)
    third.acquire()  # both start while another host's hold runs

    refused = [_cli("compact", env=_env(d, minio_config, bucket)) for d in dirs]
    for proc in refused:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 2, out
        assert "another retention writer holds the lease (third, token 1)" in out

    waiting = [
        _cli("compact", "--json", env=_env(d, minio_config, bucket, BLACKBOX_RETENTION_LEASE_WAIT="60"))
        for d in dirs
    ]
    time.sleep(1.0)
    third.release()
    for proc in waiting:
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0, out
    held = json.loads(store.get_tagged("leases/retention").data)
    assert held["token"] == 3 and held["until"] == 0.0  # two more holdings, each released
    assert held["holder"].startswith("compaction@")

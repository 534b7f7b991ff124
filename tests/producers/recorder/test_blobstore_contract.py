"""One contract suite for every BlobStore: a local directory and a real MinIO (S3 API)."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from producers.blobstore import BlobStore, LocalBlobStore, S3BlobStore, open_blob_store
from producers.settings import load_settings
from schemas.errors import BlobLocked, BlobNotFound, BlobStoreError


@pytest.fixture(
    params=[
        "local",
        pytest.param("s3", marks=pytest.mark.minio),
        pytest.param("s3-object-lock", marks=pytest.mark.minio),
    ]
)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BlobStore]:
    if request.param == "local":
        yield LocalBlobStore(tmp_path / "blobs")
        return
    if request.param == "s3-object-lock":  # a versioned bucket: delete must remove every version
        yield request.getfixturevalue("object_lock_store")
        return
    cfg: dict[str, Any] = request.getfixturevalue("minio_config")
    yield S3BlobStore(cfg["endpoint"], cfg["access_key"], cfg["secret_key"], cfg["bucket"], cfg["secure"])


@pytest.fixture
def prefix() -> str:
    """A fresh key prefix per test, so tests never see each other's objects in the shared bucket."""
    return f"contract-{uuid.uuid4().hex[:12]}"


def test_put_get_roundtrip(store: BlobStore, prefix: str) -> None:
    data = os.urandom(100_000)
    store.put(f"{prefix}/a/b.bin", data)
    assert store.get(f"{prefix}/a/b.bin") == data
    assert store.exists(f"{prefix}/a/b.bin")


def test_versions_what_was_sealed_stays_readable_where_the_store_keeps_versions(
    store: BlobStore, prefix: str
) -> None:
    """``put`` returns the version it wrote (None without versions); that version is read by its id
    whatever lies over it, and ``covering`` names what does."""
    key = f"{prefix}/sealed"
    sealed = store.put(key, b"sealed bytes")
    if not store.versioned:
        assert sealed is None and store.versions(key) == [] and store.covering(key, "v1") is None
        assert store.get(key, version_id="ignored") == b"sealed bytes"
        return
    assert sealed and store.versions(key) == [sealed] and store.covering(key, sealed) is None
    newer = store.put(key, b"other bytes")
    assert newer and newer != sealed and store.versions(key) == [newer, sealed]
    assert store.get(key, version_id=sealed) == b"sealed bytes"
    assert store.get(key, offset=7, length=5, version_id=sealed) == b"bytes"
    assert f"a newer version {newer} (11 bytes, " in (store.covering(key, sealed) or "")


def test_put_overwrites(store: BlobStore, prefix: str) -> None:
    store.put(f"{prefix}/k", b"one")
    store.put(f"{prefix}/k", b"two-two")
    assert store.get(f"{prefix}/k") == b"two-two"


@pytest.mark.parametrize(
    ("offset", "length", "expected"),
    [
        (0, None, slice(0, None)),
        (10, 5, slice(10, 15)),
        (95, None, slice(95, None)),
        (90, 50, slice(90, 100)),
        (0, 0, slice(0, 0)),
    ],
)
def test_range_get(store: BlobStore, prefix: str, offset: int, length: int | None, expected: slice) -> None:
    data = bytes(range(100))
    store.put(f"{prefix}/r", data)
    assert store.get(f"{prefix}/r", offset=offset, length=length) == data[expected]


def test_range_past_end_raises(store: BlobStore, prefix: str) -> None:
    store.put(f"{prefix}/r", b"0123456789")
    with pytest.raises(BlobStoreError) as info:
        store.get(f"{prefix}/r", offset=10, length=2)
    assert not isinstance(info.value, BlobNotFound)


def test_empty_blob(store: BlobStore, prefix: str) -> None:
    store.put(f"{prefix}/empty", b"")
    assert store.get(f"{prefix}/empty") == b""
    assert store.get(f"{prefix}/empty", offset=0, length=10) == b""
    assert store.exists(f"{prefix}/empty")


def test_missing_key(store: BlobStore, prefix: str) -> None:
    with pytest.raises(BlobNotFound):
        store.get(f"{prefix}/nope")
    with pytest.raises(BlobNotFound):
        store.get(f"{prefix}/nope", offset=3, length=0)
    assert not store.exists(f"{prefix}/nope")


def test_delete_is_idempotent(store: BlobStore, prefix: str) -> None:
    store.put(f"{prefix}/d", b"x")
    store.delete(f"{prefix}/d")
    store.delete(f"{prefix}/d")
    store.delete(f"{prefix}/never-existed")
    assert not store.exists(f"{prefix}/d")
    with pytest.raises(BlobNotFound):
        store.get(f"{prefix}/d")


def test_list_is_string_prefix_and_sorted(store: BlobStore, prefix: str) -> None:
    keys = [
        f"{prefix}/agt_1/x",
        f"{prefix}/agt_10/y",
        f"{prefix}/agt_1/sub/z",
        f"{prefix}/agt_2/w",
        f"{prefix}/top",
    ]
    for key in keys:
        store.put(key, b"1")
    assert list(store.list(f"{prefix}/agt_1")) == sorted([keys[0], keys[1], keys[2]])
    assert list(store.list(f"{prefix}/agt_1/")) == sorted([keys[0], keys[2]])
    assert list(store.list(f"{prefix}/")) == sorted(keys)
    assert list(store.list(f"{prefix}/nothing-here")) == []


def test_stat_and_list_info(store: BlobStore, prefix: str) -> None:
    before = datetime.now(UTC) - timedelta(seconds=5)  # HTTP dates have whole seconds
    store.put(f"{prefix}/a/one", b"x" * 10)
    store.put(f"{prefix}/a/two", b"")
    store.put(f"{prefix}/b", b"yy")
    info = store.stat(f"{prefix}/a/one")
    assert (info.key, info.size) == (f"{prefix}/a/one", 10)
    assert info.modified.tzinfo is not None
    assert before <= info.modified <= datetime.now(UTC) + timedelta(seconds=5)
    listed = list(store.list_info(f"{prefix}/a"))
    assert (
        [i.key for i in listed] == list(store.list(f"{prefix}/a")) == [f"{prefix}/a/one", f"{prefix}/a/two"]
    )
    assert [i.size for i in listed] == [10, 0]
    assert all(before <= i.modified <= datetime.now(UTC) + timedelta(seconds=5) for i in listed)
    assert list(store.list_info(f"{prefix}/nothing-here")) == []
    with pytest.raises(BlobNotFound):
        store.stat(f"{prefix}/nope")
    with pytest.raises(BlobNotFound):
        store.stat(f"{prefix}/a")  # a "directory" is not a blob


def test_put_renews_modified(store: BlobStore, prefix: str) -> None:
    """Retention's orphan sweep leaves a blob that is being written again alone: a put renews its age."""
    key = f"{prefix}/k"
    store.put(key, b"one")
    first = store.stat(key).modified
    time.sleep(1.1)  # S3 reports Last-Modified in whole seconds
    store.put(key, b"one")
    assert store.stat(key).modified > first
    assert next(iter(store.list_info(key))).modified > first


@pytest.mark.parametrize("key", ["", "/abs", "a//b", "a/../b", "./a", "a\\b", "a/.tmp-x"])
def test_invalid_keys_refused(store: BlobStore, key: str) -> None:
    with pytest.raises(BlobStoreError):
        store.put(key, b"x")


def test_concurrent_overwrites_are_atomic(store: BlobStore, prefix: str) -> None:
    """Readers racing writers see one whole version, never a mix or a truncated object."""
    versions = [bytes([i]) * 200_000 for i in range(4)]
    key = f"{prefix}/hot"
    store.put(key, versions[0])
    stop = threading.Event()
    seen: list[bytes] = []

    def writer(i: int) -> None:
        while not stop.is_set():
            store.put(key, versions[i])

    threads = [threading.Thread(target=writer, args=(i,)) for i in (1, 2)]
    for t in threads:
        t.start()
    try:
        for _ in range(20):
            seen.append(store.get(key))
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert all(blob in versions for blob in seen)
    assert not [p for p in store.list(prefix) if p != key]  # no temp objects left visible


def test_open_blob_store_local(tmp_path: Path) -> None:
    store = open_blob_store(load_settings(data_dir=tmp_path / "bb"))
    assert isinstance(store, LocalBlobStore)
    assert store.root == tmp_path / "bb" / "blobs"


@pytest.mark.minio
def test_open_blob_store_s3_creates_bucket(minio_config: dict[str, Any]) -> None:
    bucket = f"bb-contract-{uuid.uuid4().hex[:10]}"
    settings = load_settings(
        blob="s3",
        s3_endpoint=minio_config["endpoint"],
        s3_access_key=minio_config["access_key"],
        s3_secret_key=minio_config["secret_key"],
        s3_bucket=bucket,
    )
    store = open_blob_store(settings)
    assert isinstance(store, S3BlobStore)
    store.put("k", b"v")
    assert store.get("k") == b"v"
    store.delete("k")
    from minio import Minio

    client = Minio(
        minio_config["endpoint"],
        access_key=minio_config["access_key"],
        secret_key=minio_config["secret_key"],
        secure=False,
    )
    assert client.bucket_exists(bucket)
    client.remove_bucket(bucket)


def test_s3_unreachable_is_blobstore_error() -> None:
    store = S3BlobStore("127.0.0.1:1", "k", "s", "b", connect_timeout=0.5, retries=0)
    with pytest.raises(BlobStoreError):
        store.put("k", b"v")


@pytest.mark.parametrize("kind", ["local", pytest.param("s3", marks=pytest.mark.minio)])
def test_retain_until_and_legal_hold_without_a_lock_are_no_ops(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path, prefix: str
) -> None:
    """Unlocked stores accept ``retain_until`` and say a legal hold was not set; delete still works."""
    store: BlobStore = LocalBlobStore(tmp_path / "blobs")
    if kind == "s3":
        cfg: dict[str, Any] = request.getfixturevalue("minio_config")
        store = S3BlobStore(
            cfg["endpoint"], cfg["access_key"], cfg["secret_key"], cfg["bucket"], cfg["secure"]
        )
    until = datetime.now(UTC) + timedelta(days=1)
    store.put(f"{prefix}/r", b"kept", retain_until=until)
    assert store.set_legal_hold(f"{prefix}/r", True) is False
    assert store.lock_reason(f"{prefix}/r") is None
    store.delete(f"{prefix}/r")
    assert not store.exists(f"{prefix}/r")


@pytest.mark.minio
def test_object_lock_retention_blocks_delete_until_its_date(object_lock_store: S3BlobStore) -> None:
    store = object_lock_store
    until = datetime.now(UTC) + timedelta(seconds=3)
    store.put("segments/locked.seg", b"evidence", retain_until=until)
    reason = store.lock_reason("segments/locked.seg")
    assert reason is not None and reason.startswith("retained (governance) until"), reason
    with pytest.raises(BlobLocked, match="retained"):
        store.delete("segments/locked.seg")
    assert store.get("segments/locked.seg") == b"evidence"
    time.sleep(max(0.0, (until - datetime.now(UTC)).total_seconds()) + 1.0)
    assert store.lock_reason("segments/locked.seg") is None
    store.delete("segments/locked.seg")
    assert not store.exists("segments/locked.seg")
    assert list(store.list("segments/")) == []


@pytest.mark.minio
def test_object_lock_legal_hold_blocks_delete_until_released(object_lock_store: S3BlobStore) -> None:
    store = object_lock_store
    store.put("segments/held.seg", b"evidence")
    assert store.lock_reason("segments/held.seg") is None
    assert store.set_legal_hold("segments/held.seg", True) is True
    assert store.lock_reason("segments/held.seg") == "under S3 legal hold"
    with pytest.raises(BlobLocked, match="legal hold"):
        store.delete("segments/held.seg")
    assert store.get("segments/held.seg") == b"evidence"
    store.set_legal_hold("segments/held.seg", False)
    store.delete("segments/held.seg")
    assert not store.exists("segments/held.seg")

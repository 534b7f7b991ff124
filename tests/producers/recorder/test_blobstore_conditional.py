"""Conditional writes (DESIGN 23) on every BlobStore: create-only, compare-and-swap on the ETag, and a
race of two writers where exactly one wins each round (the pinned MinIO must refuse ``If-Match`` on a
missing key: releases before 2025-09-06 wrongly accepted it)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from producers.blobstore import BlobStore, LocalBlobStore, S3BlobStore
from schemas.errors import BlobConflict, BlobNotFound


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
    if request.param == "s3-object-lock":
        yield request.getfixturevalue("object_lock_store")
        return
    cfg: dict[str, Any] = request.getfixturevalue("minio_config")
    yield S3BlobStore(cfg["endpoint"], cfg["access_key"], cfg["secret_key"], cfg["bucket"], cfg["secure"])


@pytest.fixture
def key() -> str:
    return f"conditional-{uuid.uuid4().hex[:12]}/state"


def test_create_only_refuses_an_existing_key(store: BlobStore, key: str) -> None:
    first = store.put_if(key, b"one", etag=None)
    assert first.etag
    with pytest.raises(BlobConflict, match="already exists"):
        store.put_if(key, b"two", etag=None)
    assert store.get(key) == b"one"


def test_compare_and_swap_needs_the_current_etag(store: BlobStore, key: str) -> None:
    first = store.put_if(key, b"one", etag=None)
    read = store.get_tagged(key)
    assert (read.data, read.etag) == (b"one", first.etag)
    second = store.put_if(key, b"two", etag=first.etag)
    assert second.etag != first.etag
    with pytest.raises(BlobConflict):
        store.put_if(key, b"three", etag=first.etag)  # stale: someone replaced it
    assert store.get(key) == b"two"
    assert store.get_tagged(key).etag == second.etag


def test_if_match_on_a_missing_key_fails(store: BlobStore, key: str) -> None:
    """MinIO before RELEASE.2025-09-06 wrote the object here; a fenced writer would then win anyway."""
    with pytest.raises(BlobConflict):
        store.put_if(key, b"x", etag="0123456789abcdef0123456789abcdef")
    with pytest.raises(BlobNotFound):
        store.get(key)


def test_get_tagged_of_a_missing_key(store: BlobStore, key: str) -> None:
    with pytest.raises(BlobNotFound):
        store.get_tagged(key)


def test_versioned_store_names_the_version(object_lock_store: S3BlobStore, key: str) -> None:
    written = object_lock_store.put_if(key, b"sealed", etag=None)
    assert written.version
    assert object_lock_store.get_tagged(key).version == written.version


@pytest.mark.parametrize("rounds", [60])
def test_two_writers_race_and_exactly_one_wins_each_round(store: BlobStore, key: str, rounds: int) -> None:
    """Each round both writers read the same ETag and swap at once (a barrier); one must win, one lose."""
    first = store.put_if(key, b"round 0", etag=None)
    barrier = threading.Barrier(2)
    wins: dict[int, list[str]] = {r: [] for r in range(1, rounds + 1)}
    tags: dict[int, str] = {0: first.etag}
    errors: list[BaseException] = []

    def writer(name: str) -> None:
        try:
            for r in range(1, rounds + 1):
                barrier.wait(30)
                seen = store.get_tagged(key).etag
                barrier.wait(30)  # both hold the same ETag before either writes
                try:
                    new = store.put_if(key, f"round {r} by {name}".encode(), etag=seen)
                except BlobConflict:
                    continue
                wins[r].append(name)
                tags[r] = new.etag
        except BaseException as exc:  # surfaced below
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=writer, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert all(len(w) == 1 for w in wins.values()), {r: w for r, w in wins.items() if len(w) != 1}
    winner = wins[rounds][0]
    assert store.get(key) == f"round {rounds} by {winner}".encode()
    # both writers won some rounds: the race was real, not one thread always first
    assert {w[0] for w in wins.values()} == {"a", "b"}


@pytest.mark.minio
def test_s3_keeps_who_wrote_an_object_as_user_metadata(minio_config: dict[str, Any], key: str) -> None:
    from minio import Minio

    cfg = minio_config
    store = S3BlobStore(cfg["endpoint"], cfg["access_key"], cfg["secret_key"], cfg["bucket"], cfg["secure"])
    store.put_if(key, b"x", etag=None, metadata={"blackbox-writer": "host-a:1", "blackbox-token": "7"})
    client = Minio(cfg["endpoint"], access_key=cfg["access_key"], secret_key=cfg["secret_key"], secure=False)
    meta = {k.lower(): v for k, v in (client.stat_object(cfg["bucket"], key).metadata or {}).items()}
    assert meta["x-amz-meta-blackbox-writer"] == "host-a:1" and meta["x-amz-meta-blackbox-token"] == "7"

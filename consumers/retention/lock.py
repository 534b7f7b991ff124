"""One retention writer at a time on this host.

Compaction, legal hold and release each write full replacement versions of ``decisions`` rows; two
of them interleaving could roll each other's change back (a hold written from a row read before
compaction flipped it). They take an exclusive ``flock`` on ``<data_dir>/retention/retention.lock``.

Scope: processes sharing the data directory (the embedded setup, or one retention host). Across
hosts, the retention commands also take the lease in the blob store (:mod:`.lease`).
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from schemas.errors import RetentionError

__all__ = ["RetentionBusy", "retention_lock"]


class RetentionBusy(RetentionError):
    """Another compaction, hold or release holds the retention lock."""


@contextmanager
def retention_lock(path: Path, *, timeout: float = 30.0) -> Iterator[None]:
    """Hold the exclusive retention lock at ``path`` (waiting up to ``timeout`` seconds)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise RetentionBusy(
                        f"another compaction, hold or release is running (lock {path}); try again later"
                    ) from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)

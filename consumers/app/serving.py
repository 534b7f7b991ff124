"""Who holds the embedded index: ``blackbox serve`` leaves a note in the data directory while it runs,
so another command that finds the index locked can say so and point to the running service instead of
a bare lock error.

The note (``<data_dir>/serve.json``: pid and URLs) is advisory: it is believed only while its pid is a
live process, and the lock itself is what keeps a second process out.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

from schemas.errors import IndexError_

__all__ = ["IndexHeldByServe", "ServingNote", "held_by_serve"]

NOTE = "serve.json"


class IndexHeldByServe(IndexError_):
    """The embedded index is open in a running ``blackbox serve``."""


class ServingNote:
    """The note of this process serving (:meth:`write` once it listens, :meth:`remove` when it stops)."""

    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / NOTE

    def write(self, urls: Sequence[str]) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self._path.with_suffix(".tmp")
        temporary.write_text(json.dumps({"pid": os.getpid(), "urls": list(urls)}), encoding="utf-8")
        temporary.replace(self._path)

    def remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._path.unlink()


def held_by_serve(data_dir: Path, error: IndexError_) -> IndexError_:
    """``error`` (the index could not be opened) restated when a live ``blackbox serve`` holds it."""
    try:
        note = json.loads((data_dir / NOTE).read_text(encoding="utf-8"))
        pid, urls = int(note["pid"]), [str(u) for u in note.get("urls", [])]
    except (OSError, ValueError, KeyError, TypeError):
        return error
    if pid == os.getpid() or not _alive(pid):
        return error
    where = urls[0] if urls else "its address"
    return IndexHeldByServe(
        f"the embedded index is held by `blackbox serve` (pid {pid}, {where}), which runs ingest itself: "
        f"read through it (GET {where}/v1/decisions/ID with a token from `blackbox access token create`), "
        "or stop it (Ctrl-C / SIGTERM) to run this command; a ClickHouse server (BLACKBOX_CLICKHOUSE_URL) "
        "lets several processes share the index"
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True

"""A small JSON document on disk, shared by processes: read when it changed, rewritten atomically
under a lock. Tokens and access requests live in such files under ``<data_dir>/access/`` so that
``blackbox access …`` works while ``blackbox serve`` holds the embedded index."""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from consumers.access.grants import file_lock
from schemas.errors import ContractError

_DURATION = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@:+-]{0,127}$")


MAX_DURATION = timedelta(days=36_500)


def parse_duration(text: str, *, what: str = "--expires") -> timedelta:
    """``90m`` / ``12h`` / ``30d`` / ``2w``, at most 100 years (``now +`` it must stay a date: an
    ``expires`` of ``999999999d`` was an OverflowError, a 500); :class:`ContractError` naming ``what``
    otherwise. The CLI and the audit API both parse with it."""
    match = _DURATION.match(text)
    if not match or int(match.group(1)) == 0:
        raise ContractError(f"{text!r} is not a duration like 30m, 12h, 30d or 2w", path=what)
    amount, unit = int(match.group(1)), _UNITS[match.group(2)]
    if amount > MAX_DURATION / timedelta(**{unit: 1}):
        raise ContractError(f"{text.strip()!r} is longer than 100 years (36500d)", path=what)
    return timedelta(**{unit: amount})


def check_name(value: str, *, what: str) -> str:
    """A caller or subject name: letters, digits and ``._@:+-`` (no glob characters, so a name
    written into a grant matches only itself)."""
    if not NAME.match(value):
        raise ContractError(
            f"{value!r} is not a name (letters, digits and . _ @ : + -; at most 128)", path=what
        )
    return value


class JsonFile:
    """``path`` holding one JSON object; :meth:`read` caches by mtime, :meth:`update` locks, reads,
    applies a change and replaces the file (temporary file, fsync, rename)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._value: dict[str, Any] = {}

    def read(self) -> dict[str, Any]:
        try:
            info = self.path.stat()
        except FileNotFoundError:
            return {}
        stamp = (info.st_mtime_ns, info.st_size)
        with self._lock:
            if stamp != self._stamp:
                self._value = self._load()
                self._stamp = stamp
            return self._value

    def update(self, change: Callable[[dict[str, Any]], Any]) -> Any:
        with file_lock(self.path.with_name(f".{self.path.name}.lock")):
            value = self._load() if self.path.exists() else {}
            result = change(value)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(value, handle, ensure_ascii=False, indent=2, default=_default)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temporary, self.path)
            return result

    def _load(self) -> dict[str, Any]:
        try:
            value = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ContractError(f"cannot read {self.path}: {exc}", path=str(self.path)) from exc
        if not isinstance(value, dict):
            raise ContractError("expected a JSON object", path=str(self.path))
        return value


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    raise TypeError(f"{type(value).__name__} is not JSON")

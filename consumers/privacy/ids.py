"""Identifiers in the index as keyed hashes: trends and the index never hold an original.

``origin_user_id`` and ``origin_session_id`` name people. Ingest stores them in the index as
``hmac:`` + HMAC-SHA256 under a key of the service (``BLACKBOX_INDEX_ID_KEY_FILE``, default
``<data_dir>/index_id.key``, 32 random bytes created 0600 on first use), so equal ids still group and
join inside blackbox while the index alone never reveals who. The capture keeps the raw id (it is
signed, and the counterparty gate matches it); ``BLACKBOX_INDEX_RAW_IDS=true`` stores raw ids instead.

The trade-off: a join with another system needs the key (hash its ids the same way), and raw SQL
(``blackbox query``) sees only the hashes. Anything that looks an id up in the index (``erase
--subject``) hashes it with :meth:`IndexIds.lookup`.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from producers.privacy.keys import read_or_create_key_file
from schemas.errors import BlackboxError

__all__ = ["HMAC_PREFIX", "IndexIdKeyError", "IndexIds", "index_ids"]

HMAC_PREFIX = "hmac:"
"""What a keyed-hash id in the index starts with, so a reader can tell it from a raw one."""


class IdSettings(Protocol):
    """The two settings this reads (``consumers.app.settings.ServiceSettings`` has them)."""

    @property
    def index_raw_ids(self) -> bool: ...

    @property
    def resolved_index_id_key_file(self) -> Path: ...


class IndexIdKeyError(BlackboxError):
    """The index id key file cannot be read or created, or is not a 256-bit key."""


@dataclass(frozen=True, slots=True)
class IndexIds:
    """How identifiers are written to the index: keyed hashes under ``key``, or raw when it is None."""

    key: bytes | None

    def of(self, value: str) -> str:
        """The index form of one id (an empty id stays empty: nothing to hide, and it groups as none)."""
        if self.key is None or not value:
            return value
        return HMAC_PREFIX + hmac.new(self.key, value.encode("utf-8"), hashlib.sha256).hexdigest()

    def lookup(self, value: str) -> tuple[str, ...]:
        """Every form ``value`` may have in the index: hashed, and raw (rows from before, or opted out)."""
        return tuple(dict.fromkeys((self.of(value), value)))


def index_ids(settings: IdSettings) -> IndexIds:
    """The configured :class:`IndexIds` (the key file is created on first use)."""
    if settings.index_raw_ids:
        return IndexIds(None)
    return IndexIds(_read_or_create(settings.resolved_index_id_key_file))


def _read_or_create(path: Path) -> bytes:
    try:
        key = read_or_create_key_file(path)
    except OSError as exc:
        raise IndexIdKeyError(f"cannot read the index id key {path}: {exc}") from exc
    if len(key) != 32:
        raise IndexIdKeyError(f"the index id key {path} is not a 256-bit key ({len(key)} bytes)")
    return key

"""Read what was sealed: the version id of each segment, kept in the index, and what lies over it.

On a versioned store (S3 with Object Lock, ``BLACKBOX_S3_OBJECT_LOCK``) the lock keeps the bytes a
segment was written with, but not the key: a plain DELETE adds a delete marker over them and a PUT of
other bytes a newer version, and an ordinary read then finds nothing, or the wrong bytes. So every
segment written there (ingest, compaction's copies) has its version id recorded in ``blob_versions``
with the rows that point at it, and a read (:func:`covered`) asks for exactly that version and, when something
lies over it, names the object and what was done to it (:class:`Tampering`) while the capture is still
read, checked against its hash and verified from the sealed version.

A store without versions records nothing and reads as before; so does a segment written before
versions were recorded (nothing to compare with: it is read as it is now).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from .store import insert_blob_versions, sealed_version

if TYPE_CHECKING:
    from consumers.index import Index
    from producers.blobstore import BlobStore

__all__ = ["Tampering", "covered", "record_versions", "sealed_version", "tampering_lines"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Tampering:
    """Something lies over the sealed version of ``key`` (what: the store's own words)."""

    key: str
    version_id: str
    what: str

    def line(self) -> str:
        return f"TAMPERING with {self.key}: {self.what}; read and verified from the sealed version"


def record_versions(
    index: Index, written: Iterable[tuple[str, str | None]], *, at: datetime | None = None
) -> int:
    """Record ``(key, version id)`` of blobs just written (None ids, from a store without versions, are
    skipped); returns how many rows. Call it before the rows that point at the blobs are inserted."""
    moment = at or datetime.now(UTC)
    rows = [
        {"blob_key": key, "version_id": version, "written_at": moment} for key, version in written if version
    ]
    return insert_blob_versions(index, rows) if rows else 0


def covered(
    store: BlobStore, index: Index | None, key: str, *, found: list[Tampering] | None = None
) -> tuple[str | None, Tampering | None]:
    """The version of ``key`` to read (None: the current one - no version recorded, or a store without
    versions) and what lies over it now (see the module docstring); a tampering is logged and appended
    to ``found``."""
    if index is None or not store.versioned:
        return None, None
    version = sealed_version(index, key)
    if version is None:
        return None, None
    what = store.covering(key, version)
    if what is None:
        return version, None
    tampering = Tampering(key, version, what)
    logger.warning("%s", tampering.line())
    if found is not None:
        found.append(tampering)
    return version, tampering


def tampering_lines(found: Sequence[Tampering]) -> list[str]:
    """One line per distinct tampered object, for ``verify`` and ``show``."""
    return list(dict.fromkeys(t.line() for t in found))

"""The spool's dead-letter paths, both on disk and both kept with why and where from.

- A *message* ingest cannot use goes to ``<data_dir>/dlq/<partition>/<offset:019d>.msg`` (the original
  bytes) beside ``.json`` (the reason, the detail, the original topic/partition/offset and the key);
  a redelivered letter overwrites itself. :func:`read_dead_letters` reads them back.
- A spool *file* that is not a readable spool file is moved to ``<spool>/dead-letter/<name>`` beside
  ``<name>.reason.json`` by :func:`dead_letter_file` (see :mod:`.source` for when).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

from producers.transports.base import DeadLetter, SourceMessage, parse_partition, partition_label
from schemas.errors import TransportError

from .files import SpoolFileCorrupt

__all__ = [
    "DEAD_FILE_REASON",
    "DEAD_LETTER_DIR",
    "LocalDeadLetters",
    "dead_letter_file",
    "read_dead_letters",
]

logger = logging.getLogger(__name__)

DEAD_LETTER_DIR = "dead-letter"
DEAD_FILE_REASON = "corrupt_spool_file"


class LocalDeadLetters:
    """Embedded mode: one ``.msg`` file (the original bytes) and one ``.json`` file (headers) per letter.

    Paths are ``<dir>/<partition>/<offset:019d>.{msg,json}``, so a redelivered letter overwrites itself.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def send(self, letters: Sequence[DeadLetter]) -> None:
        for letter in letters:
            m = letter.message
            folder = self.directory / partition_label(m.partition)
            folder.mkdir(parents=True, exist_ok=True)
            stem = folder / f"{m.offset:019d}"
            meta: dict[str, str | None] = {
                name: value.decode("utf-8", "replace") if isinstance(value, bytes) else value
                for name, value in letter.headers()
            }
            meta["key"] = m.key.decode("utf-8", "replace") if m.key is not None else None
            _write_atomic(stem.with_suffix(".msg"), m.value)
            _write_atomic(stem.with_suffix(".json"), json.dumps(meta, indent=2).encode())

    def flush(self) -> None:
        """Nothing buffered: :meth:`send` fsyncs each file before renaming it into place."""

    def close(self) -> None:
        """Nothing to release."""


def read_dead_letters(directory: Path) -> Iterator[DeadLetter]:
    """The letters :class:`LocalDeadLetters` wrote under ``directory``, by partition then offset."""
    for meta_path in sorted(Path(directory).glob("*/*.json")):
        try:
            meta = json.loads(meta_path.read_text("utf-8"))
            value = meta_path.with_suffix(".msg").read_bytes()
        except (OSError, ValueError) as exc:
            raise TransportError(f"unreadable dead letter {meta_path}: {exc}") from exc
        key = meta.get("key")
        original = SourceMessage(
            topic=meta["original_topic"],
            partition=parse_partition(meta["original_partition"]),
            offset=int(meta["original_offset"]),
            key=key.encode() if key is not None else None,
            value=value,
        )
        yield DeadLetter(original, meta["reason"], meta["detail"])


def dead_letter_file(spool: Path, name: str, exc: SpoolFileCorrupt, *, read: int) -> bool:
    """Move unreadable spool file ``name`` to ``<spool>/dead-letter/`` beside its reason.

    ``read``: how many of its records were delivered before the damage. Idempotent and never deletes:
    returns False when the file was already moved (a re-read after a crash between move and commit).
    """
    dead_dir = spool / DEAD_LETTER_DIR
    reason = {
        "file": name,
        "reason": DEAD_FILE_REASON,
        "error": str(exc),
        "records_read": read,
        "note": f"records 0..{read - 1} were delivered; the rest of the file could not be read"
        if read
        else "no record of the file could be read",
        "dead_lettered_at": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
    }
    try:
        dead_dir.mkdir(exist_ok=True)
        _write_atomic(dead_dir / f"{name}.reason.json", json.dumps(reason, indent=2).encode())
        os.replace(spool / name, dead_dir / name)
        _fsync_dir(dead_dir)
        _fsync_dir(spool)
    except FileNotFoundError:
        return False
    except OSError as exc2:
        raise TransportError(f"cannot move unreadable spool file {name} aside: {exc2}") from exc2
    logger.warning("dead-lettered spool file %s to %s after %d records: %s", name, dead_dir, read, exc)
    return True


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

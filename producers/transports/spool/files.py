"""The local spool: Kafka's stand-in in embedded mode, as Avro object container files on disk.

A spool directory holds *published* files, each complete and immutable, named so that name order
is publication order for one writer (``<ms since epoch:013d>-<writer id>-<seq:08d>.avro``). Every
record is ``{key: bytes, value: bytes, timestamp: long (ms)}`` — the same key and value bytes the
Kafka transport would send. A writer appends to a hidden temp file (``.tmp-...part``), and
*publishes* it by flushing, fsync-ing, renaming it to its final name and fsync-ing the directory.
Only then are its records delivered; a reader never sees a partial file.

Consumers track progress like a Kafka partition offset: a :class:`SpoolPosition` is (file, index
of the next record). :func:`read_spool` yields :class:`SpoolRecord` values from a position on;
once a file is fully processed and the progress committed (:class:`SpoolCheckpoint`), the consumer
calls :func:`mark_consumed` so the file leaves the spool: deleted, because its records now live in
segments that retention and erasure reach (a copy kept in ``consumed/`` would outlive both). Files
still in the spool are always read in full, whatever their name, so a file published late by a
second writer is never skipped; the price is at-least-once delivery if a consumer dies between
committing and marking, which idempotent ingest absorbs.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastavro

from producers.owner_only import create_private, private_dirs
from schemas.errors import TransportError

__all__ = [
    "SPOOL_RECORD_SCHEMA",
    "SpoolCheckpoint",
    "SpoolFileCorrupt",
    "SpoolPosition",
    "SpoolRecord",
    "SpoolWriter",
    "mark_consumed",
    "read_spool",
    "read_spool_file",
    "recover_partials",
    "spool_files",
]

SPOOL_RECORD_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "SpoolRecord",
    "namespace": "blackbox.spool.v1",
    "doc": "One transport message: the Kafka key and value bytes, and when it was appended.",
    "fields": [
        {"name": "key", "type": "bytes"},
        {"name": "value", "type": "bytes"},
        {"name": "timestamp", "type": "long", "doc": "Milliseconds since the Unix epoch, UTC."},
    ],
}
_PARSED_SCHEMA = fastavro.parse_schema(SPOOL_RECORD_SCHEMA)
_SUFFIX = ".avro"
_PART_PREFIX = ".tmp-"
_PART_SUFFIX = ".avro.part"
CONSUMED_DIR = "consumed"
"""Where releases before this one moved consumed files (``keep=True`` still does); ``blackbox compact``
deletes what is left there (:mod:`consumers.retention.spool_sweep`)."""


class SpoolFileCorrupt(TransportError):
    """A published spool file is not a readable spool file (truncated, foreign, damaged).

    Raised by :func:`read_spool_file` once every record before the damage has been yielded. Unlike
    an unreadable *directory* (plain :class:`TransportError`), reading again will not help.
    """


@dataclass(frozen=True, slots=True)
class SpoolPosition:
    """The next record a consumer reads: record ``index`` (0-based) of published ``file``."""

    file: str
    index: int


@dataclass(frozen=True, slots=True)
class SpoolRecord:
    """One spooled message. Unpacks as ``(file, index, value)``; ``key`` and ``timestamp_ms`` too."""

    file: str
    index: int
    value: bytes
    key: bytes
    timestamp_ms: int

    def __iter__(self) -> Iterator[Any]:
        return iter((self.file, self.index, self.value))

    @property
    def next_position(self) -> SpoolPosition:
        """The position to commit once this record is durably processed."""
        return SpoolPosition(self.file, self.index + 1)


def spool_files(directory: str | os.PathLike[str]) -> list[str]:
    """Names of the published files in ``directory``, in name (publication) order."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(n for n in names if n.endswith(_SUFFIX) and not n.startswith("."))


def read_spool_file(path: str | os.PathLike[str], *, start: int = 0) -> Iterator[SpoolRecord]:
    """Records of one published spool file from record ``start`` on.

    Raises :class:`SpoolFileCorrupt` where the file stops being a valid spool file (any decoding
    error of fastavro's: they come in many types), :class:`TransportError` when it cannot be read.
    """
    name = os.path.basename(path)
    try:
        with open(path, "rb") as fh:
            for index, rec in enumerate(fastavro.reader(fh, reader_schema=_PARSED_SCHEMA)):
                if index < start:
                    continue
                assert isinstance(rec, dict)
                yield SpoolRecord(
                    file=name, index=index, value=rec["value"], key=rec["key"], timestamp_ms=rec["timestamp"]
                )
    except OSError as exc:
        raise TransportError(f"cannot read spool file {path}: {exc}") from exc
    except Exception as exc:  # fastavro's corrupt-file errors: ValueError, EOFError, KeyError, ...
        detail = " ".join(str(exc).split())[:300]  # fastavro may quote whole schemas
        raise SpoolFileCorrupt(f"corrupt spool file {path}: {type(exc).__name__}: {detail}") from exc


def read_spool(
    directory: str | os.PathLike[str], *, start: SpoolPosition | None = None
) -> Iterator[SpoolRecord]:
    """All records of the published files in ``directory``, in order.

    With ``start``, records of ``start.file`` before ``start.index`` are skipped. Other files still
    in the spool are read in full (see the module docstring): mark files consumed to drop them.
    """
    directory = Path(directory)
    for name in spool_files(directory):
        first = start.index if start is not None and name == start.file else 0
        with contextlib.suppress(FileNotFoundError):  # marked consumed by someone else meanwhile
            yield from read_spool_file(directory / name, start=first)


def mark_consumed(directory: str | os.PathLike[str], file: str, *, keep: bool = False) -> None:
    """Take a fully processed file out of the spool: delete it (or, ``keep``, move it to ``consumed/``,
    where nothing but ``compact`` removes it again). Idempotent."""
    directory = Path(directory)
    src = directory / os.path.basename(file)
    try:
        if keep:
            (directory / CONSUMED_DIR).mkdir(exist_ok=True)
            os.replace(src, directory / CONSUMED_DIR / src.name)
        else:
            src.unlink()
        _fsync_dir(directory)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise TransportError(f"cannot mark {src} consumed: {exc}") from exc


class SpoolCheckpoint:
    """A consumer's committed :class:`SpoolPosition`, kept in a small JSON file written atomically."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def load(self) -> SpoolPosition | None:
        try:
            data = json.loads(self.path.read_text("utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise TransportError(f"unreadable spool checkpoint {self.path}: {exc}") from exc
        return SpoolPosition(file=str(data["file"]), index=int(data["index"]))

    def commit(self, position: SpoolPosition) -> None:
        tmp = self.path.with_name(f"{_PART_PREFIX}{self.path.name}.{uuid.uuid4().hex}")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump({"file": position.file, "index": position.index}, fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
            _fsync_dir(self.path.parent)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise TransportError(f"cannot commit spool checkpoint {self.path}: {exc}") from exc


class SpoolWriter:
    """Appends records to a temp file and publishes it (fsync + rename) on demand or when full.

    Not thread-safe on its own; :class:`producers.transports.spool.sender.SpoolTransport` serialises access.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        max_file_bytes: int = 64 * 1024 * 1024,
        max_file_records: int = 10_000,
        codec: str = "null",
    ) -> None:
        self.directory = Path(directory)
        self.max_file_bytes = max_file_bytes
        self.max_file_records = max_file_records
        self.codec = codec
        host = socket.gethostname().split(".")[0].replace("-", "_")[:16] or "host"
        self.writer_id = f"{host}_{os.getpid()}_{uuid.uuid4().hex[:6]}"
        self._seq = 0
        self._last_ms = 0
        self._fh: Any = None
        self._writer: Any = None
        self._part: Path | None = None
        self._records = 0
        self._bytes = 0
        try:  # owner-only whatever the agent's umask (producers.owner_only)
            private_dirs(self.directory)
        except OSError as exc:
            raise TransportError(f"cannot create spool directory {self.directory}: {exc}") from exc

    @property
    def pending(self) -> int:
        """Records appended to the current file and not yet published."""
        return self._records

    @property
    def full(self) -> bool:
        return self._records >= self.max_file_records or self._bytes >= self.max_file_bytes

    def append(self, key: bytes, value: bytes, timestamp_ms: int | None = None) -> None:
        if self._writer is None:
            self._open()
        ts = time.time_ns() // 1_000_000 if timestamp_ms is None else timestamp_ms
        try:
            self._writer.write({"key": key, "value": value, "timestamp": ts})
        except OSError as exc:
            raise TransportError(f"spool write failed: {exc}") from exc
        self._records += 1
        self._bytes += len(key) + len(value) + 16

    def _open(self) -> None:
        self._seq += 1
        self._part = self.directory / f"{_PART_PREFIX}{self.writer_id}-{self._seq:08d}{_PART_SUFFIX}"
        try:
            # 0600 whatever the agent's umask; closed in publish()/discard()
            self._fh = os.fdopen(create_private(self._part, os.O_WRONLY | os.O_CREAT | os.O_EXCL), "wb")
            # sync_interval large: blocks are cut by flush() at publish time, one block per batch.
            self._writer = fastavro.write.Writer(
                self._fh, _PARSED_SCHEMA, codec=self.codec, sync_interval=4 * 1024 * 1024
            )
        except OSError as exc:
            raise TransportError(f"cannot open spool file {self._part}: {exc}") from exc

    def publish(self) -> int:
        """Make the current file durable and visible; return how many records it delivered."""
        if self._writer is None or self._part is None:
            return 0
        count = self._records
        now = max(time.time_ns() // 1_000_000, self._last_ms)
        self._last_ms = now
        final = self.directory / f"{now:013d}-{self.writer_id}-{self._seq:08d}{_SUFFIX}"
        try:
            self._writer.flush()
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()
            os.replace(self._part, final)
            _fsync_dir(self.directory)
        except OSError as exc:
            self.discard()
            raise TransportError(f"cannot publish spool file {final.name}: {exc}") from exc
        self._reset()
        return count

    def discard(self) -> None:
        """Drop the unpublished file (its records were never delivered)."""
        if self._fh is not None:
            with contextlib.suppress(OSError):
                self._fh.close()
        if self._part is not None:
            with contextlib.suppress(OSError):
                self._part.unlink()
        self._reset()

    def _reset(self) -> None:
        self._fh = self._writer = self._part = None
        self._records = self._bytes = 0

    def close(self) -> int:
        return self.publish()


def recover_partials(directory: str | os.PathLike[str]) -> int:
    """Publish the readable records of temp files left by writers that died; return how many.

    Those records were never acknowledged, so publishing them is extra delivery, not duplication.
    Temp files of live processes (by pid) are left alone.
    """
    directory = Path(directory)
    recovered = 0
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return 0
    for name in names:
        if not (name.startswith(_PART_PREFIX) and name.endswith(_PART_SUFFIX)):
            continue
        writer_id = name[len(_PART_PREFIX) :].rsplit("-", 1)[0]
        try:
            pid = int(writer_id.split("_")[-2])
        except (IndexError, ValueError):
            continue
        if _alive(pid):
            continue
        part = directory / name
        records: list[dict[str, Any]] = []
        try:
            with open(part, "rb") as fh:
                for rec in fastavro.reader(fh):
                    assert isinstance(rec, dict)
                    records.append(rec)
        except Exception:
            pass
        if records:
            writer = SpoolWriter(directory)
            for rec in records:
                writer.append(rec["key"], rec["value"], rec["timestamp"])
            writer.publish()
            recovered += len(records)
        with contextlib.suppress(OSError):
            part.unlink()
    return recovered


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

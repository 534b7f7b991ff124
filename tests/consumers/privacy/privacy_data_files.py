"""Every byte at rest under a data directory, readable: what a search for deleted values must cover.

Each file's own bytes, plus what it decodes to: zstd frames (segments, concatenated frames) are
decompressed and Avro object container files (the spool, whatever its codec) are decoded record by
record, so a value is found however it was stored."""

from __future__ import annotations

import io
from pathlib import Path

import fastavro
import zstandard

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
AVRO_MAGIC = b"Obj\x01"


def every_byte_under(root: Path) -> bytes:
    """The bytes of every regular file under ``root``, each followed by its decoded form (if any)."""
    out = bytearray()
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        raw = path.read_bytes()
        out += raw
        out += _decoded(raw)
    return bytes(out)


def _decoded(raw: bytes) -> bytes:
    if raw.startswith(ZSTD_MAGIC):
        with zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True) as reader:
            return reader.read()
    if raw.startswith(AVRO_MAGIC):
        out = bytearray()
        for record in fastavro.reader(io.BytesIO(raw)):
            for value in record.values() if isinstance(record, dict) else ():
                out += value if isinstance(value, bytes) else str(value).encode()
        return bytes(out)
    return b""

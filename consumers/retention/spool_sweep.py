"""The spool's leftovers: consumed spool files that outlived their captures' retention.

Ingest deletes a spool file once every record in it is durable in a segment and committed
(:func:`producers.transports.spool.files.mark_consumed`), so the segments are the only copy that
retention and erasure have to reach. Releases before that moved consumed files to
``<spool>/consumed/`` and kept them forever: an expired capture's content, and the raw identifiers an
erasure removed, stayed there in the clear. ``blackbox compact`` deletes every file left there, like
any other deletion: ``delete-spool`` is logged before, ``spool-deleted`` after (the retention log's
``segment_key`` holds ``spool:consumed/<name>``). Every file there was committed before it was moved,
so its captures are durable elsewhere; nothing else reads that directory.

A run that dies between the two entries is finished by the next: the file is deleted if still there
and the confirmation written (a deleted file is not listed again, so the log then holds the
``delete-spool`` without its confirmation: the write-ahead record of a delete that happened).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from pathlib import Path

from consumers.retention.log import DeletionEntry
from producers.transports.spool.files import CONSUMED_DIR
from schemas.errors import RetentionError

__all__ = ["SPOOL_KEY_PREFIX", "consumed_spool_files", "sweep_consumed_spool"]

logger = logging.getLogger(__name__)

SPOOL_KEY_PREFIX = "spool:"
"""What a spool file's ``segment_key`` in the retention log starts with (it is no blob)."""


def consumed_spool_files(spool_dir: Path) -> list[Path]:
    """The files left in ``<spool_dir>/consumed/`` (published ``*.avro`` and anything else), sorted."""
    consumed = Path(spool_dir) / CONSUMED_DIR
    try:
        return sorted(p for p in consumed.iterdir() if p.is_file())
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise RetentionError(f"cannot list the consumed spool {consumed}: {exc}") from exc


def sweep_consumed_spool(
    spool_dir: Path,
    *,
    entry: Callable[..., DeletionEntry],
    record: Callable[[list[DeletionEntry]], None],
    dry_run: bool = False,
) -> int:
    """Delete every file in ``<spool_dir>/consumed/`` (module docstring); return how many.

    ``entry(**fields)`` builds a retention-log entry, ``record(entries)`` writes them (file and table).
    """
    files = consumed_spool_files(spool_dir)
    if dry_run or not files:
        return len(files)
    reason = "consumed spool file: its captures are in segments, where retention and erasure reach them"
    keys = [SPOOL_KEY_PREFIX + f"{CONSUMED_DIR}/{path.name}" for path in files]
    record([entry(decision_id="", segment_key=key, action="delete-spool", reason=reason) for key in keys])
    for path in files:
        try:
            path.unlink()
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise RetentionError(f"cannot delete the consumed spool file {path}: {exc}") from exc
    with contextlib.suppress(OSError):
        fd = os.open(Path(spool_dir) / CONSUMED_DIR, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    record([entry(decision_id="", segment_key=key, action="spool-deleted", reason="done") for key in keys])
    logger.info("deleted %d consumed spool files from %s", len(files), Path(spool_dir) / CONSUMED_DIR)
    return len(files)

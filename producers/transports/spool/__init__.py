"""The spool backend (embedded mode): :mod:`.files` (the spool file format, writer, reader and
checkpoint), :mod:`.sender`, :mod:`.source` (what ingest reads) and :mod:`.dead_letter` (a directory
of letters, and unreadable spool files moved aside). Built from settings by the four functions below,
which :mod:`producers.transports` calls."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from producers.settings import BlackboxSettings
    from producers.transports.base import DeadLetterSink, Source, Transport


def open_sender(settings: BlackboxSettings, **options: Any) -> Transport:
    from .sender import SpoolTransport

    return SpoolTransport.from_settings(settings, **options)


def open_source(
    settings: BlackboxSettings, *, config: Mapping[str, Any] | None, max_dead_files: int
) -> Source:
    """The spool directory, its checkpoint in ``<data_dir>/ingest/``; a spool has no client ``config``."""
    from .source import SpoolSource

    return SpoolSource(
        directory=settings.resolved_spool_dir,
        checkpoint=settings.data_dir / "ingest" / "spool-checkpoint.json",
        topic=settings.topic,
        max_dead_files=max_dead_files,
    )


def open_dead_letter(settings: BlackboxSettings) -> DeadLetterSink:
    from .dead_letter import LocalDeadLetters

    return LocalDeadLetters(settings.data_dir / "dlq")


def dead_letter_location(settings: BlackboxSettings) -> str:
    return f"{settings.data_dir / 'dlq'} (<partition>/<offset>.msg + .json with the reason)"

"""Transports: how encoded captures travel from a recorder to ingest. One folder per backend.

Each backend keeps its sending side, its receiving side (the source ingest reads) and its dead-letter
path side by side: :mod:`.kafka` (confluent-kafka, the production path) and :mod:`.spool` (Avro
container files in a local directory, embedded mode). What both sides share — the delivery contract,
the :class:`~.base.Transport` and :class:`~.base.Source` protocols, dead letters — is in :mod:`.base`.

The backend is chosen here and only here, from ``BLACKBOX_TRANSPORT``. Adding a transport is a new
folder offering the four functions of :class:`~.base.Backend`, one line in :data:`BACKENDS` and one
value in the setting's ``Literal``; ``tests/producers/transports`` runs the transport contract suite.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from . import kafka, spool
from .base import (
    Backend,
    DeadLetter,
    DeadLetterSink,
    DeliveryCallback,
    DeliveryFailed,
    Partition,
    Source,
    SourceMessage,
    Transport,
)

if TYPE_CHECKING:
    from producers.settings import BlackboxSettings

__all__ = [
    "BACKENDS",
    "DeadLetter",
    "DeadLetterSink",
    "DeliveryCallback",
    "DeliveryFailed",
    "Partition",
    "Source",
    "SourceMessage",
    "Transport",
    "backend",
    "dead_letter_location",
    "open_dead_letter",
    "open_sender",
    "open_source",
]

BACKENDS: Mapping[str, Backend] = {
    "kafka": kafka,
    "spool": spool,
}
"""``BLACKBOX_TRANSPORT`` value → backend package."""


def backend(settings: BlackboxSettings) -> Backend:
    """The backend ``settings.transport`` names."""
    return BACKENDS[settings.transport]


def open_sender(settings: BlackboxSettings, **options: Any) -> Transport:
    """The sending side; ``delivery_timeout`` (s) is understood by every backend, other ``options`` go to
    the backend's constructor."""
    return backend(settings).open_sender(settings, **options)


def open_source(
    settings: BlackboxSettings, *, config: Mapping[str, Any] | None = None, max_dead_files: int = 100
) -> Source:
    """The receiving side ingest reads (see :meth:`.base.Backend.open_source` for the options)."""
    return backend(settings).open_source(settings, config=config, max_dead_files=max_dead_files)


def open_dead_letter(settings: BlackboxSettings) -> DeadLetterSink:
    """Where ingest's dead letters go."""
    return backend(settings).open_dead_letter(settings)


def dead_letter_location(settings: BlackboxSettings) -> str:
    """Where the dead letters are, in words, for the operator."""
    return backend(settings).dead_letter_location(settings)

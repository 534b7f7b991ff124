"""What every transport backend offers, both sides: the sender, the source ingest reads, dead letters.

Delivery contract of a sender (:class:`Transport`): :meth:`~Transport.send` either raises
:class:`~schemas.errors.TransportError` (the message was not accepted; its callback is never called)
or accepts the message, and then its ``on_delivery`` callback is called exactly once, with ``None``
once the message is durable (broker acknowledged with ``acks=all`` / spool file fsync'd and renamed)
or with a :class:`DeliveryFailed` saying why not. Callbacks run on the thread that calls
:meth:`~Transport.poll`, :meth:`~Transport.flush` or :meth:`~Transport.close`.
:meth:`~Transport.close` fails whatever it could not deliver, through the callbacks: nothing is lost
silently.

Progress contract of a source (:class:`Source`): nothing counts as processed until
:meth:`~Source.commit`; a source reopened after a crash redelivers everything after the last commit
(at least once; ingest's sinks are idempotent).

A dead letter keeps the original key and bytes with the ``reason``, the ``detail`` and the original
position (topic, partition, offset), and can be read back.

A backend is a package that offers the four functions of :class:`Backend`;
:mod:`producers.transports` picks one by ``BLACKBOX_TRANSPORT``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from schemas.errors import BlackboxError, TransportError

if TYPE_CHECKING:
    from producers.settings import BlackboxSettings

__all__ = [
    "Backend",
    "DeadLetter",
    "DeadLetterSink",
    "DeliveryCallback",
    "DeliveryFailed",
    "DlqLimitExceeded",
    "Partition",
    "Source",
    "SourceMessage",
    "Transport",
    "first_offsets",
    "next_offsets",
    "parse_partition",
    "partition_label",
]


# --- the sending side ------------------------------------------------------------------------------


class DeliveryFailed(TransportError):
    """An accepted message was not delivered. ``ambiguous``: it may have reached the broker anyway
    (a timeout or purge after it was sent), so a retry may duplicate it — ingest deduplicates."""

    def __init__(self, message: str, *, code: str = "", ambiguous: bool = False) -> None:
        self.code = code
        self.ambiguous = ambiguous
        super().__init__(message)


DeliveryCallback = Callable[[DeliveryFailed | None], None]


@runtime_checkable
class Transport(Protocol):
    """Send keyed byte messages; learn their fate through callbacks."""

    def send(self, key: bytes, value: bytes, on_delivery: DeliveryCallback) -> None:
        """Accept one message or raise :class:`TransportError` (then ``on_delivery`` never runs)."""
        ...

    def poll(self, timeout: float = 0.0) -> int:
        """Serve delivery callbacks, waiting up to ``timeout`` s if something is in flight."""
        ...

    def flush(self, timeout: float | None = None) -> int:
        """Deliver everything accepted so far; return how many messages are still in flight."""
        ...

    def close(self, timeout: float | None = None) -> None:
        """Flush, then fail (through their callbacks) the messages still undelivered, and release."""
        ...


# --- the receiving side ----------------------------------------------------------------------------

Partition = int | str
"""A Kafka partition number, or a spool file name in embedded mode."""

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def partition_label(partition: Partition) -> str:
    """``0007`` for Kafka partition 7; a spool file name made safe for an object key otherwise."""
    if isinstance(partition, int):
        return f"{partition:04d}"
    label = _SAFE.sub("_", partition).strip("._")
    if not label:
        raise ValueError(f"partition {partition!r} has no usable characters for a segment key")
    return label


def parse_partition(text: str) -> Partition:
    """A partition written as text (a dead letter's ``original_partition``) back as a :data:`Partition`."""
    return int(text) if text.isdigit() else text


@dataclass(frozen=True, slots=True)
class SourceMessage:
    """One message as the source delivered it; ``offset`` is its position within ``partition``."""

    topic: str
    partition: Partition
    offset: int
    key: bytes | None
    value: bytes


def next_offsets(messages: Iterable[SourceMessage]) -> dict[Partition, int]:
    """The offsets to commit after ``messages``: per partition, one past the highest offset seen."""
    result: dict[Partition, int] = {}
    for message in messages:
        nxt = message.offset + 1
        if nxt > result.get(message.partition, -1):
            result[message.partition] = nxt
    return result


def first_offsets(messages: Iterable[SourceMessage]) -> dict[Partition, int]:
    """Per partition, the lowest offset in ``messages`` (where to rewind to when a batch is abandoned)."""
    result: dict[Partition, int] = {}
    for message in messages:
        if message.offset < result.get(message.partition, message.offset + 1):
            result[message.partition] = message.offset
    return result


class Source(Protocol):
    """A stream of messages with explicit, synchronous progress commits."""

    topic: str

    def consume(self, max_messages: int, timeout: float) -> Sequence[SourceMessage]:
        """Up to ``max_messages`` messages, waiting at most ``timeout`` seconds for the first."""

    def commit(self, offsets: Mapping[Partition, int]) -> bool:
        """Durably record that everything before ``offsets`` is processed.

        Returns ``False`` when the commit was refused because the partitions are no longer ours
        (a rebalance); the messages will then be redelivered to their new owner, which is safe
        because every sink is idempotent.
        """

    def caught_up(self) -> bool:
        """True when nothing is left to read right now (used by ``--drain``)."""

    def keepalive(self, seconds: float) -> None:
        """Wait ``seconds`` while a batch is retried, without consuming, keeping group membership."""

    def resume(self) -> None:
        """Undo :meth:`keepalive`: fetch again."""

    def owns(self, partitions: Iterable[Partition]) -> bool:
        """True while every partition in ``partitions`` is still assigned to this source."""

    def rewind(self, offsets: Mapping[Partition, int]) -> None:
        """Re-read from ``offsets`` on the next :meth:`consume` (an abandoned batch)."""

    def lag(self) -> Mapping[Partition, int]:
        """How far commits trail the input, per partition (metrics): Kafka messages between the committed
        offset and the high watermark; for the spool one entry, ``"spool"``, counting pending files."""

    def close(self) -> None: ...


# --- dead letters ----------------------------------------------------------------------------------


class DlqLimitExceeded(BlackboxError):
    """Too many invalid messages (or unreadable spool files) in a row: stop, do not dead-letter them all."""


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A message that can never be ingested, ``reason`` (a short code) and ``detail`` (the error text)."""

    message: SourceMessage
    reason: str
    detail: str

    def headers(self) -> list[tuple[str, str | bytes | None]]:
        m = self.message
        return [
            ("reason", self.reason.encode()),
            ("detail", self.detail.encode("utf-8", "replace")[:2000]),
            ("original_topic", m.topic.encode()),
            ("original_partition", str(m.partition).encode()),
            ("original_offset", str(m.offset).encode()),
        ]


class DeadLetterSink(Protocol):
    """Where dead letters go; :meth:`flush` returns only when every letter sent so far is durable."""

    def send(self, letters: Sequence[DeadLetter]) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


# --- a backend -------------------------------------------------------------------------------------


class Backend(Protocol):
    """What a backend package offers (its ``__init__``), each built from the settings."""

    def open_sender(self, settings: BlackboxSettings, **options: Any) -> Transport:
        """The sending side; ``delivery_timeout`` (seconds a message may wait for delivery) is understood
        by every backend, other ``options`` go to the backend's constructor."""
        ...

    def open_source(
        self, settings: BlackboxSettings, *, config: Mapping[str, Any] | None, max_dead_files: int
    ) -> Source:
        """The receiving side ingest reads. ``config``: client properties of a backend that has a client
        (librdkafka's); ``max_dead_files``: unreadable input files in a row before stopping, for a backend
        that reads files."""
        ...

    def open_dead_letter(self, settings: BlackboxSettings) -> DeadLetterSink:
        """Where ingest's dead letters go."""
        ...

    def dead_letter_location(self, settings: BlackboxSettings) -> str:
        """Where the dead letters are, in words, for the operator."""
        ...

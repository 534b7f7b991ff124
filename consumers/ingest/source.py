"""The seam below ingest: where message bytes come from and where progress is committed.

Two implementations: :class:`consumers.ingest.consumer.KafkaSource` (a consumer group on
``blackbox.captures.v1``) and :class:`consumers.ingest.spool_source.SpoolSource` (the embedded local
spool). Everything above this seam - decode, verify, segments, index, DLQ - is the same code.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

Partition = int | str
"""A Kafka partition number, or a spool file name in embedded mode."""


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

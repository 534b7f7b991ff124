"""Kafka's receiving side, what ingest reads: a consumer group on ``blackbox.captures.v1`` with
manual, synchronous commits, each waited for at most a deadline.

``enable.auto.commit`` and ``enable.auto.offset.store`` are off: nothing is committed unless
:meth:`KafkaSource.commit` is called, and the ingest loop calls it only after the batch's segments
and index rows are durable. Several processes in one group share the partitions; rebalance
callbacks keep track of what this process owns so a batch whose partitions moved away is abandoned
(its writes are idempotent, its new owner re-processes it) instead of being committed.

A synchronous commit can block forever inside librdkafka: seen here after a broker restart, when
the reply to a commit request is never delivered, and ``close()`` then blocks on the same request.
Ingest must not stop for that, so each commit runs on a short-lived helper thread and is waited for
until the commit deadline; one that does not answer raises :class:`TransportError` like any failed
commit (the ingest loop keeps the offsets and sends them again with the next batch's commit, which
carries the same or later offsets). ``close()`` is bounded the same way.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from confluent_kafka import OFFSET_INVALID, Consumer, KafkaError, KafkaException, TopicPartition

from producers.transports.base import Partition, SourceMessage
from schemas.errors import TransportError

logger = logging.getLogger(__name__)

# Commit failures that mean "this member no longer owns these partitions": not retried.
_LOST_GENERATION = {
    KafkaError.ILLEGAL_GENERATION,
    KafkaError.UNKNOWN_MEMBER_ID,
    KafkaError.REBALANCE_IN_PROGRESS,
    KafkaError.FENCED_INSTANCE_ID,
    KafkaError._STATE,
}


class KafkaSource:
    """Batches from a Kafka consumer group; see the module docstring."""

    def __init__(
        self,
        *,
        bootstrap: str,
        topic: str,
        group: str,
        config: Mapping[str, Any] | None = None,
        commit_retry_seconds: float = 10.0,
        close_seconds: float = 30.0,
    ) -> None:
        self.topic = topic
        self._commit_retry_seconds = commit_retry_seconds
        self._close_seconds = close_seconds
        self._unanswered = 0  # commits still blocked in librdkafka (their helper threads wait on)
        self._assigned: set[int] = set()
        self._ever_assigned = False
        self._paused = False
        self._stash: list[SourceMessage] = []
        self._committed: dict[int, int] = {}  # per owned partition, the last offset committed (for lag)
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": "earliest",
                "partition.assignment.strategy": "cooperative-sticky",
                # the batch loop retries slow sinks for a while before giving the partitions back
                "max.poll.interval.ms": 300_000,
                # a crashed member's partitions move after this; heartbeats run on librdkafka's thread
                "session.timeout.ms": 10_000,
                "heartbeat.interval.ms": 2_000,
                "fetch.max.bytes": 64 * 1024 * 1024,
                "queued.max.messages.kbytes": 256 * 1024,
                "logger": logging.getLogger(f"{__name__}.librdkafka"),
                **(config or {}),
            }
        )
        self._consumer.subscribe(
            [topic], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
        )

    @property
    def assignment(self) -> frozenset[int]:
        """The partitions this process owns right now (as seen by the rebalance callbacks)."""
        return frozenset(self._assigned)

    # --- rebalance callbacks (run inside consume/poll on this thread) ------------------------------
    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._ever_assigned = True
        self._assigned.update(tp.partition for tp in partitions)
        logger.info("assigned %s; now %s", sorted(tp.partition for tp in partitions), sorted(self._assigned))

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._assigned.difference_update(tp.partition for tp in partitions)
        gone = {tp.partition for tp in partitions}
        self._stash = [m for m in self._stash if m.partition not in gone]
        self._forget_committed(gone)
        logger.info("revoked %s; now %s", sorted(tp.partition for tp in partitions), sorted(self._assigned))

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._assigned.difference_update(tp.partition for tp in partitions)
        gone = {tp.partition for tp in partitions}
        self._stash = [m for m in self._stash if m.partition not in gone]
        self._forget_committed(gone)
        logger.warning(
            "lost %s (session expired); now %s",
            sorted(tp.partition for tp in partitions),
            sorted(self._assigned),
        )

    # --- Source ------------------------------------------------------------------------------------
    def consume(self, max_messages: int, timeout: float) -> Sequence[SourceMessage]:
        if self._stash:  # messages that arrived during a keepalive: they come first, never dropped
            stashed, self._stash = self._stash[:max_messages], self._stash[max_messages:]
            return stashed
        return self._take(max_messages, timeout)

    def _take(self, max_messages: int, timeout: float) -> list[SourceMessage]:
        try:
            raw = self._consumer.consume(num_messages=max_messages, timeout=timeout)
        except KafkaException as exc:
            raise TransportError(f"consume from {self.topic} failed: {exc}") from exc
        out: list[SourceMessage] = []
        for msg in raw:
            err = msg.error()
            if err is not None:
                if err.fatal():
                    raise TransportError(f"fatal consumer error on {self.topic}: {err}")
                logger.warning("consumer error (librdkafka retries it): %s", err)
                continue
            out.append(
                SourceMessage(
                    self.topic, msg.partition() or 0, msg.offset() or 0, msg.key(), msg.value() or b""
                )
            )
        return out

    def commit(self, offsets: Mapping[Partition, int]) -> bool:
        owned = {p: o for p, o in offsets.items() if p in self._assigned}
        if len(owned) != len(offsets):
            logger.warning(
                "not committing partitions no longer assigned: %s", sorted(set(offsets) - set(owned))
            )
        if not owned:
            return not offsets
        tps = [TopicPartition(self.topic, int(p), o) for p, o in owned.items()]
        deadline = time.monotonic() + self._commit_retry_seconds
        delay = 0.2
        while True:
            try:
                result = self._commit_within(tps, deadline)
            except KafkaException as exc:
                err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
                if err is not None and err.code() in _LOST_GENERATION:
                    logger.warning(
                        "commit refused (%s); the batch will be redelivered to the partition owner", err
                    )
                    return False
                if time.monotonic() >= deadline:
                    raise TransportError(f"commit to {self.topic} failed: {exc}") from exc
                logger.warning("commit failed (%s); retrying in %.1fs", exc, delay)
                time.sleep(delay)  # (never poll() here: it could hand us a message to drop)
                delay = min(delay * 2, 2.0)
                continue
            failed = [tp for tp in result or [] if tp.error is not None]
            if failed:
                raise TransportError(f"commit to {self.topic} failed for {failed}")
            self._committed.update((int(p), o) for p, o in owned.items())
            return len(owned) == len(offsets)

    def _commit_within(self, tps: list[TopicPartition], deadline: float) -> list[TopicPartition] | None:
        """One synchronous commit on a helper thread, waited for until ``deadline`` (at least 1 s).

        Raises what the commit raised, or :class:`TransportError` when it has not answered by then.
        The helper thread is left blocked in librdkafka; it ends if the answer ever comes.
        """
        answer: list[Any] = []
        answered = threading.Event()
        lock = threading.Lock()
        gave_up = False

        def commit() -> None:
            try:
                result: Any = self._consumer.commit(offsets=tps, asynchronous=False)
            except BaseException as exc:  # handed to the waiting thread, which raises it
                result = exc
            with lock:
                if gave_up:
                    self._unanswered -= 1
                    logger.info("an unanswered commit to %s answered late: %s", self.topic, result)
                    return
                answer.append(result)
            answered.set()

        helper = threading.Thread(target=commit, name=f"kafka-commit-{self.topic}", daemon=True)
        helper.start()
        wait = max(1.0, deadline - time.monotonic())
        if not answered.wait(wait):
            with lock:
                if not answer:
                    gave_up = True
                    self._unanswered += 1
                    raise TransportError(
                        f"commit to {self.topic} got no answer within {wait:.1f}s ({self._unanswered} "
                        "unanswered so far); its offsets go again with the next commit"
                    )
        result = answer[0]
        if isinstance(result, BaseException):
            raise result
        return result  # type: ignore[no-any-return]

    def caught_up(self) -> bool:
        """Assigned at least once, and for every assigned partition position == high watermark."""
        if not self._ever_assigned or self._stash:
            return False
        assignment = [TopicPartition(self.topic, p) for p in sorted(self._assigned)]
        if not assignment:
            return True
        try:
            positions = self._consumer.position(assignment)
            unknown = [tp for tp in positions if tp.offset < 0]
            committed = (
                {tp.partition: tp.offset for tp in self._consumer.committed(unknown, timeout=10)}
                if unknown
                else {}
            )
            for tp in positions:
                low, high = self._consumer.get_watermark_offsets(
                    TopicPartition(self.topic, tp.partition), timeout=10, cached=False
                )
                pos = tp.offset
                if pos < 0:
                    pos = committed.get(tp.partition, OFFSET_INVALID)
                if pos < 0:
                    pos = low
                if pos < high:
                    return False
        except KafkaException as exc:
            logger.warning("could not read watermarks (%s); not caught up yet", exc)
            return False
        return True

    def keepalive(self, seconds: float) -> None:
        """Pause every partition and serve the group protocol for ``seconds`` without taking messages."""
        assignment = self._consumer.assignment()
        if assignment:
            self._consumer.pause(assignment)
        self._paused = True
        # Messages only arrive here right after a rebalance handed us an unpaused partition; keep them
        # for the next consume() rather than seeking back.
        self._stash.extend(self._take(1000, seconds))

    def resume(self) -> None:
        if self._paused:
            assignment = self._consumer.assignment()
            if assignment:
                self._consumer.resume(assignment)
            self._paused = False

    def owns(self, partitions: Iterable[Partition]) -> bool:
        return all(p in self._assigned for p in partitions)

    def rewind(self, offsets: Mapping[Partition, int]) -> None:
        for p, o in offsets.items():
            if p not in self._assigned:
                continue
            self._stash = [m for m in self._stash if m.partition != p]
            try:
                self._consumer.seek(TopicPartition(self.topic, int(p), o))
            except KafkaException as exc:  # the fetch position stays past unprocessed messages: stop
                raise TransportError(f"cannot seek {self.topic}:{p} back to {o}: {exc}") from exc

    def lag(self) -> dict[Partition, int]:
        """Per owned partition: high watermark (as of the last fetch, no broker round trip) - committed offset.

        A partition this member has not committed yet asks the group coordinator once; one the group never
        committed counts from the low watermark. Partitions whose watermarks are not known yet are left out.
        """
        owned = sorted(self._assigned)
        unknown = [TopicPartition(self.topic, p) for p in owned if p not in self._committed]
        out: dict[Partition, int] = {}
        try:
            if unknown:
                for tp in self._consumer.committed(unknown, timeout=5):
                    self._committed[tp.partition] = tp.offset  # OFFSET_INVALID: nothing committed yet
            for p in owned:
                low, high = self._consumer.get_watermark_offsets(TopicPartition(self.topic, p), cached=True)
                base = self._committed.get(p, OFFSET_INVALID)
                base = base if base >= 0 else low
                if high >= 0 and base >= 0:
                    out[p] = max(0, high - base)
        except KafkaException as exc:
            logger.debug("lag not available: %s", exc)
        return out

    def _forget_committed(self, partitions: Iterable[int]) -> None:
        for p in partitions:
            self._committed.pop(p, None)

    def close(self) -> None:
        """Leave the group and close, waited for at most ``close_seconds``: a close stuck behind an
        unanswered commit is left to the process's exit (the group moves the partitions after
        ``session.timeout.ms``) rather than hanging the service's shutdown."""

        def close() -> None:
            try:
                self._consumer.close()
            except (KafkaException, RuntimeError) as exc:
                logger.warning("consumer close: %s", exc)

        closing = threading.Thread(target=close, name=f"kafka-close-{self.topic}", daemon=True)
        closing.start()
        closing.join(self._close_seconds)
        if closing.is_alive():
            logger.error(
                "consumer of %s did not close within %.0fs (%d commits unanswered); leaving it behind",
                self.topic,
                self._close_seconds,
                self._unanswered,
            )

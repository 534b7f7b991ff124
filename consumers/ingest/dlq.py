"""Dead letters: messages that can never be ingested, kept with why and where they came from.

A message is dead-lettered when its bytes are not a blackbox message (truncated Avro, bad magic byte,
unknown schema fingerprint, a claim check whose body is missing or does not match its hash). The
original bytes and key are kept; headers say ``reason`` (a short code), ``detail`` (the error text),
and ``original_topic`` / ``original_partition`` / ``original_offset``. The partition keeps moving.

Captures that decode but fail verification or a later check (:mod:`consumers.ingest.admission`, or
an unexpected error while preparing them) are *not* dead letters: they are quarantined (kept in a
quarantine segment and the ``quarantine`` table) by :mod:`consumers.ingest.batch`. In embedded mode a
spool *file* that cannot be read at all is moved aside into the spool's ``dead-letter/`` directory by
:mod:`consumers.ingest.spool_source`; its records never become messages.

:class:`DlqLimit` stops the consumer instead of dead-lettering everything when something is clearly
misconfigured (wrong schemas deployed, the wrong topic): see its docstring for the rule.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from schemas.errors import BlackboxError, TransportError

from .segments import partition_label
from .source import SourceMessage

DLQ_REASONS = (
    "decode_error",  # not Avro single-object bytes of a known kind (truncated, bad magic, bad body)
    "unknown_fingerprint",  # a schema fingerprint no schema in ``schemas/`` has
    "claim_check_missing",  # the claim check names a blob that does not exist
    "claim_check_mismatch",  # the claim check's blob has another size or sha256
    "claim_check_undecodable",  # the claim check's blob is not a capture
    "unexpected_error",  # an error no rule anticipated (the detail names it); the batch goes on
)


class DlqLimitExceeded(BlackboxError):
    """A whole batch was invalid after too many consecutive invalid messages: stop, do not dead-letter."""


@dataclass(frozen=True, slots=True)
class DeadLetter:
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


class KafkaDeadLetters:
    """Dead letters to a Kafka topic (default ``blackbox.captures.v1.dlq``), original key kept."""

    def __init__(self, *, bootstrap: str, topic: str, config: dict[str, Any] | None = None) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "compression.type": "zstd",
                "linger.ms": 5,
                "message.timeout.ms": 60_000,
                "logger": logging.getLogger("consumers.ingest.librdkafka"),
                **(config or {}),
            }
        )
        self._lock = threading.Lock()
        self._errors: list[str] = []

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            with self._lock:
                self._errors.append(str(err))

    def send(self, letters: Sequence[DeadLetter]) -> None:
        for letter in letters:
            while True:
                try:
                    self._producer.produce(
                        self.topic,
                        value=letter.message.value,
                        key=letter.message.key,
                        headers=letter.headers(),
                        on_delivery=self._on_delivery,
                    )
                    break
                except BufferError:
                    self._producer.poll(0.1)
            self._producer.poll(0)

    def flush(self) -> None:
        remaining = self._producer.flush(60)
        with self._lock:
            errors, self._errors = self._errors, []
        if remaining:
            raise TransportError(f"{remaining} dead letters not delivered to {self.topic} within 60 s")
        if errors:
            raise TransportError(f"dead letters to {self.topic} failed: {errors[0]} ({len(errors)} in all)")

    def close(self) -> None:
        self._producer.flush(10)


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


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


@dataclass(frozen=True, slots=True)
class DlqLimit:
    """When to stop instead of dead-lettering.

    The consumer stops (raising :class:`DlqLimitExceeded`, committing nothing for that batch) when a
    batch is 100 % invalid *and* the run of consecutive invalid messages, counted across batches in
    delivery order and reset by any valid message, exceeds ``max_consecutive_invalid``.

    Both conditions matter. "100 % of the batch" alone would stop on a batch of size one holding a
    single poison message - exactly the case a DLQ exists for. "N consecutive" alone would stop in the
    middle of a batch that also has good messages. Together: isolated poison is dead-lettered and the
    partition keeps moving, while a stream where everything fails (a bad deploy, the wrong topic)
    stops after at most ``max_consecutive_invalid`` dead letters. The count restarts with the process,
    so a restarted consumer dead-letters at most that many again before stopping.
    """

    max_consecutive_invalid: int = 100

    def __post_init__(self) -> None:
        if self.max_consecutive_invalid < 0:
            raise ValueError("max_consecutive_invalid must be >= 0")


class DlqLimitState:
    """The running count behind :class:`DlqLimit`."""

    def __init__(self, limit: DlqLimit) -> None:
        self.limit = limit
        self.consecutive_invalid = 0

    def check(self, invalid: Sequence[bool]) -> int:
        """The run length after one batch (``invalid[i]`` for its i-th message, in order), or raise.

        Nothing is recorded here; call :meth:`accept` with the result once the batch is durable, so a
        batch that is retried after a sink failure is not counted twice.
        """
        run = self.consecutive_invalid
        for bad in invalid:
            run = run + 1 if bad else 0
        if invalid and all(invalid) and run > self.limit.max_consecutive_invalid:
            raise DlqLimitExceeded(
                f"all {len(invalid)} messages of the batch are invalid and {run} invalid messages arrived "
                f"in a row (limit {self.limit.max_consecutive_invalid}); stopping without committing "
                "instead of dead-lettering everything - check the topic and the deployed schemas"
            )
        return run

    def accept(self, run: int) -> None:
        self.consecutive_invalid = run

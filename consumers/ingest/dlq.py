"""Dead letters, ingest's side: which messages are dead-lettered, and when to stop instead.

A message is dead-lettered when its bytes are not a blackbox message (truncated Avro, bad magic byte,
unknown schema fingerprint, a claim check whose body is missing or does not match its hash): see
:data:`DLQ_REASONS`. Where the letter goes - a Kafka topic, or a directory in embedded mode - is the
transport backend's dead-letter path (:mod:`producers.transports`), reached through
:class:`~producers.transports.base.DeadLetterSink`; the original bytes and key are kept with the
reason and the original position. The partition keeps moving.

Captures that decode but fail verification or a later check (:mod:`consumers.ingest.admission`, or
an unexpected error while preparing them) are *not* dead letters: they are quarantined (kept in a
quarantine segment and the ``quarantine`` table) by :mod:`consumers.ingest.batch`. In embedded mode a
spool *file* that cannot be read at all is moved aside by the spool backend
(:mod:`producers.transports.spool.source`); its records never become messages.

:class:`DlqLimit` stops the consumer instead of dead-lettering everything when something is clearly
misconfigured (wrong schemas deployed, the wrong topic): see its docstring for the rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from producers.transports.base import DlqLimitExceeded

__all__ = ["DLQ_REASONS", "DlqLimit", "DlqLimitExceeded", "DlqLimitState"]

DLQ_REASONS = (
    "decode_error",  # not Avro single-object bytes of a known kind (truncated, bad magic, bad body)
    "unknown_fingerprint",  # a schema fingerprint no schema in ``schemas/`` has
    "claim_check_missing",  # the claim check names a blob that does not exist
    "claim_check_mismatch",  # the claim check's blob has another size or sha256
    "claim_check_undecodable",  # the claim check's blob is not a capture
    "unexpected_error",  # an error no rule anticipated (the detail names it); the batch goes on
)


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

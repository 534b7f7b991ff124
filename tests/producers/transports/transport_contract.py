"""The transport contract: one suite, run over every backend in ``producers/transports/``.

A backend's test module subclasses :class:`TransportContract` (``class TestSpoolTransport``,
``class TestKafkaTransport``) and supplies a ``settings`` fixture naming that backend, a sender that
cannot deliver and a way to read its dead letters back. Everything else goes through the one place
that picks the backend (``producers.transports.open_sender`` / ``open_source`` /
``open_dead_letter``), so a new backend that passes this suite is wired in too.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import ClassVar, get_args

import pytest

from producers.settings import BlackboxSettings
from producers.transports import (
    BACKENDS,
    DeadLetter,
    DeliveryFailed,
    Source,
    SourceMessage,
    Transport,
    open_dead_letter,
    open_sender,
    open_source,
)
from producers.transports.base import next_offsets
from schemas.errors import TransportError

Results = dict[int, list[DeliveryFailed | None]]


class TransportContract(ABC):
    """Sending, receiving and dead-lettering, the same for every backend."""

    kind: ClassVar[str]
    """The ``BLACKBOX_TRANSPORT`` value of the backend under test."""
    undelivered_code: ClassVar[str]
    """How :attr:`DeliveryFailed.code` starts for a message the backend gave up on at close."""
    sample_partition: ClassVar[int | str]
    """A partition as this backend's source names it (a dead letter's original position)."""
    wait: ClassVar[float] = 30.0
    """Seconds a test waits for messages to arrive."""

    @abstractmethod
    def undeliverable(self, settings: BlackboxSettings) -> tuple[Transport, Callable[[], None]]:
        """A sender whose messages cannot be delivered once the returned function has run."""

    @abstractmethod
    def read_dead_letters(self, settings: BlackboxSettings, *, expect: int) -> list[DeadLetter]:
        """The dead letters written through ``open_dead_letter(settings)``, read back."""

    # --- helpers -----------------------------------------------------------------------------------
    @staticmethod
    def send_all(sender: Transport, items: Sequence[tuple[bytes, bytes]]) -> Results:
        """Send ``items``; the callbacks each message got, by index, as they arrive."""
        results: Results = {i: [] for i in range(len(items))}
        for i, (key, value) in enumerate(items):
            sender.send(key, value, results[i].append)
        return results

    def drain(self, source: Source, expect: int) -> list[SourceMessage]:
        """Consume until ``expect`` messages arrived (or :attr:`wait` passed), then check nothing follows."""
        got: list[SourceMessage] = []
        deadline = time.monotonic() + self.wait
        while len(got) < expect and time.monotonic() < deadline:
            got.extend(source.consume(100, 0.5))
        got.extend(source.consume(100, 0.5))  # nothing more is expected
        return got

    def drain_idle(self, source: Source) -> list[SourceMessage]:
        """Everything a source still delivers until it says it is caught up."""
        got: list[SourceMessage] = []
        deadline = time.monotonic() + self.wait
        while time.monotonic() < deadline:
            got.extend(source.consume(100, 0.5))
            if source.caught_up():
                break
        else:
            pytest.fail(f"{self.kind} source never caught up")
        return got

    @staticmethod
    def pairs(messages: Sequence[SourceMessage]) -> list[tuple[bytes | None, bytes]]:
        return [(m.key, m.value) for m in messages]

    # --- the registry ------------------------------------------------------------------------------
    def test_the_setting_picks_this_backend(self, settings: BlackboxSettings) -> None:
        assert settings.transport == self.kind
        assert self.kind in get_args(BlackboxSettings.model_fields["transport"].annotation)
        assert self.kind in BACKENDS
        sender = open_sender(settings)
        try:
            assert isinstance(sender, Transport)
        finally:
            sender.close(5)

    # --- sending -----------------------------------------------------------------------------------
    def test_callbacks_run_once_each_with_none_and_flush_returns_zero(
        self, settings: BlackboxSettings
    ) -> None:
        sender = open_sender(settings)
        results = self.send_all(sender, [(b"agt_%d" % (i % 3), b"v%d" % i) for i in range(20)])
        assert sender.flush(self.wait) == 0
        assert results == {i: [None] for i in range(20)}
        sender.close(5)
        assert results == {i: [None] for i in range(20)}  # close calls nothing twice

    def test_close_fails_what_it_could_not_deliver_through_the_callbacks(
        self, settings: BlackboxSettings
    ) -> None:
        sender, cut = self.undeliverable(settings)
        results = self.send_all(sender, [(b"k", b"v%d" % i) for i in range(3)])
        cut()
        in_flight = sender.flush(0.2)  # what flush could not settle is still in flight, not yet called back
        assert in_flight + sum(len(got) for got in results.values()) == len(results)
        sender.close(0.5)
        assert all(len(got) == 1 for got in results.values()), results
        for (failure,) in results.values():
            assert isinstance(failure, DeliveryFailed), failure
            assert failure.code.startswith(self.undelivered_code), failure.code
        sender.close(0.5)  # idempotent: nothing is failed twice
        assert all(len(got) == 1 for got in results.values())

    def test_a_closed_sender_refuses_and_never_calls_back(self, settings: BlackboxSettings) -> None:
        sender = open_sender(settings)
        sender.close(5)
        called: list[DeliveryFailed | None] = []
        with pytest.raises(TransportError):
            sender.send(b"k", b"v", called.append)
        assert called == []

    # --- sending, then receiving -------------------------------------------------------------------
    def test_each_keys_order_is_kept_from_sender_to_source(self, settings: BlackboxSettings) -> None:
        keys = [b"agt_a", b"agt_b", b"agt_c", b"agt_d"]
        items = [(keys[i % len(keys)], b"%s-%03d" % (keys[i % len(keys)], i)) for i in range(200)]
        sender = open_sender(settings)
        results = self.send_all(sender, items)
        sender.poll(0)  # callbacks may be served along the way
        assert sender.flush(self.wait) == 0
        sender.close(5)
        assert results == {i: [None] for i in range(len(items))}

        source = open_source(settings)
        try:
            got = self.drain(source, len(items))
        finally:
            source.close()
        assert sorted(self.pairs(got)) == sorted(items)  # each exactly once
        for key in keys:
            assert [v for k, v in self.pairs(got) if k == key] == [v for k, v in items if k == key]
        assert all(m.topic == settings.topic for m in got)

    def test_an_uncommitted_batch_is_redelivered_after_reopening_the_source(
        self, settings: BlackboxSettings
    ) -> None:
        items = [(b"agt_%d" % (i % 3), b"m%02d" % i) for i in range(12)]
        sender = open_sender(settings)
        self.send_all(sender, items)
        assert sender.flush(self.wait) == 0
        sender.close(5)

        source = open_source(settings)
        first = self.drain(source, len(items))
        assert sorted(self.pairs(first)) == sorted(items)
        source.close()  # no commit: a crash before the batch was durable

        again = open_source(settings)
        second = self.drain(again, len(items))
        assert sorted(self.pairs(second)) == sorted(items)  # the whole batch again
        done, rest = second[:5], second[5:]
        assert again.commit(next_offsets(done)) is True
        again.close()

        third = open_source(settings)
        redelivered = self.drain(third, len(rest))
        assert sorted(self.pairs(redelivered)) == sorted(self.pairs(rest))  # only what was not committed
        assert third.commit(next_offsets(redelivered)) is True
        third.close()

        last = open_source(settings)
        try:
            assert self.drain_idle(last) == []  # everything committed: nothing comes back
        finally:
            last.close()

    # --- dead letters ------------------------------------------------------------------------------
    def test_dead_letters_keep_the_reason_and_the_original_position(self, settings: BlackboxSettings) -> None:
        letters = [
            DeadLetter(
                SourceMessage(settings.topic, self.sample_partition, 7, b"agt_1", b"\x00not avro"),
                "decode_error",
                "bad magic byte 0x00",
            ),
            DeadLetter(
                SourceMessage(settings.topic, self.sample_partition, 8, None, b"\xc3\x01truncated"),
                "unknown_fingerprint",
                "fingerprint 0123456789abcdef names no schema",
            ),
        ]
        sink = open_dead_letter(settings)
        try:
            sink.send(letters)
            sink.flush()
        finally:
            sink.close()
        back = self.read_dead_letters(settings, expect=len(letters))
        assert sorted(back, key=lambda d: d.message.offset) == letters

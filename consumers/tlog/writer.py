"""The one writer of a log, fenced in the object store (DESIGN 23; Sunlight's lock and staged bundles,
Tessera's write-once tiles).

An integration, in numbered steps:

1. **hold**: the writer has read the state (:mod:`.state`) and its ETag, holds the lease in it, and
   its frontier is the state's tree (a writer that did not write the state it read reloads first:
   it applies the staged bundle named there, loads the frontier from the tiles and checks the root);
2. **stage**: the tiles and entry bundles the new leaves make are written as one new object,
   ``P/staging/<seq>.<token>.<random>`` (no tile is written yet, so a writer that loses the race below
   has written nothing anyone reads);
3. **swap**: the state moves to the new size and root, names the staged bundle and renews the lease,
   by compare-and-swap on the ETag read in 1. A failed swap is :class:`WriterFenced`: the writer drops
   what it knew, deletes its bundle and stops; it must :meth:`LogWriter.hold` again, which reloads;
4. **tiles**: the staged objects are written once (``If-None-Match: *``): an identical object already
   there is success (a holder before us applied the bundle), a different one is
   :class:`TileConflict`, an alarm that stops this writer for good and names the object;
5. **checkpoint** (:meth:`LogWriter.publish`, at the caller's interval): only by the holder whose lease
   is still running: the history entry ``P/checkpoints/<size>`` written once, then ``P/checkpoint``
   replaced by compare-and-swap only if it is older, so a stalled former holder cannot roll it back.

A crash after 3 leaves a state naming a staged bundle: whoever holds the log next applies it before
anything else (step 1). A writer whose lease ran out while it was stopped (SIGSTOP, a long GC pause)
writes nothing more: every write checks the lease on this process's monotonic clock first, and the
swap fails anyway once the next holder has swapped.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from schemas.errors import (
    BlobConflict,
    BlobNotFound,
    LeaseHeld,
    TileConflict,
    TransparencyLogError,
    WriterFenced,
)

from .checkpoints import LogSigner, checkpoint_key, history_key, timestamp_key
from .frontier import Frontier, object_key
from .state import LogState, StateStore

if TYPE_CHECKING:
    from producers.blobstore import BlobStore

logger = logging.getLogger(__name__)

__all__ = ["Integrated", "LogWriter", "decode_staged", "encode_staged", "writer_id"]


def writer_id(label: str = "") -> str:
    """This process as a log writer: host, pid and a random part (a restarted pid is a new writer)."""
    host = os.uname().nodename
    return f"{label or host}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def encode_staged(objects: dict[str, bytes], order: Sequence[str]) -> bytes:
    out = bytearray()
    for name in order:
        key = name.encode("utf-8")
        body = objects[name]
        out += struct.pack(">HI", len(key), len(body)) + key + body
    return bytes(out)


def decode_staged(data: bytes, *, key: str) -> list[tuple[str, bytes]]:
    out: list[tuple[str, bytes]] = []
    at = 0
    while at < len(data):
        if at + 6 > len(data):
            raise TransparencyLogError(f"the staged bundle {key} is truncated")
        klen, blen = struct.unpack_from(">HI", data, at)
        at += 6
        if at + klen + blen > len(data):
            raise TransparencyLogError(f"the staged bundle {key} is truncated")
        out.append((data[at : at + klen].decode("utf-8"), data[at + klen : at + klen + blen]))
        at += klen + blen
    return out


class Integrated:
    """What one integration made part of the log: ``first`` is the leaf index of ``leaves[0]``."""

    __slots__ = ("first", "leaves", "state")

    def __init__(self, first: int, leaves: Sequence[bytes], state: LogState) -> None:
        self.first = first
        self.leaves = tuple(leaves)
        self.state = state


class LogWriter:
    """The fenced writer of the log under ``prefix`` (module docstring). Not thread-safe."""

    def __init__(
        self,
        *,
        store: BlobStore,
        prefix: str,
        signer: LogSigner,
        writer: str,
        lease: float = 30.0,
        retain_for: timedelta | None = None,
        tsa_url: str | None = None,
        bootstrap_size: Callable[[], int] | None = None,
        wall: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if lease <= 0:
            raise ValueError("a writer's lease is a positive number of seconds")
        self.store = store
        self.prefix = prefix.strip("/")
        self.signer = signer
        self.writer = writer
        self.lease = lease
        self.retain_for = retain_for
        self.tsa_url = tsa_url
        self.states = StateStore(store, self.prefix)
        self._bootstrap_size = bootstrap_size
        self._wall = wall
        self._monotonic = monotonic
        self._state: LogState | None = None
        self._etag: str | None = None
        self._frontier: Frontier | None = None
        self._deadline = 0.0  # monotonic time the lease runs out, as this process counts
        self._published = -1
        self._alarm: str | None = None
        # after release(): the state this writer left, its ETag and frontier, reused when nobody wrote since
        self._left: tuple[str, LogState, Frontier] | None = None

    # --- who holds the log ----------------------------------------------------------------------
    @property
    def state(self) -> LogState | None:
        """The state as this writer last swapped or read it (None: not holding)."""
        return self._state

    @property
    def size(self) -> int:
        """The log's size as this writer last held it (0 before it first did)."""
        if self._state is not None:
            return self._state.size
        return self._left[1].size if self._left is not None else 0

    @property
    def holding(self) -> bool:
        return self._state is not None and self._monotonic() < self._deadline

    def hold(self) -> LogState:
        """Hold the log (step 1): keep it when this writer made the current state and its lease runs,
        else read the state, wait for nobody (:class:`LeaseHeld` names the holder and until when),
        apply the staged bundle, load the frontier and swap in this writer's lease."""
        self._check_alarm()
        if self.holding:
            return self._state  # type: ignore[return-value]
        state, etag = self.states.read()
        now = self._wall()
        if state.writer and state.writer != self.writer and state.lease_until > now:
            raise LeaseHeld(
                f"the log at {self.prefix!r} is held by {state.writer} (token {state.token}) for "
                f"{state.lease_until - now:.1f}s more"
            )
        left, self._left = self._left, None
        if left is not None and etag is not None and left[0] == etag:
            frontier = left[2]  # nobody wrote since this writer released it: its tiles are uploaded
        else:
            if etag is None:
                state, etag = self._bootstrap()
                if state.writer and state.writer != self.writer and state.lease_until > self._wall():
                    raise LeaseHeld(f"the log at {self.prefix!r} is held by {state.writer}")
            else:
                self._apply_staged(state)
            frontier = Frontier.load(self.store, self.prefix, state.size)
        if frontier.root() != state.root:
            raise TransparencyLogError(
                f"the tiles of {self.prefix!r} at {state.size} leaves do not give the root its state "
                "names: run `blackbox log verify`"
            )
        token = state.token if state.writer == self.writer else state.token + 1
        started = self._monotonic()
        new = state.next(writer=self.writer, token=token, lease_until=self._wall() + self.lease)
        try:
            self._etag = self.states.swap(new, etag)
        except WriterFenced as exc:  # another writer took it between our read and our swap: wait
            raise LeaseHeld(f"another writer took the log at {self.prefix!r} first") from exc
        self._state, self._frontier, self._deadline = new, frontier, started + self.lease
        if token != state.token:
            logger.info(
                "transparency log %s: %s holds it from %d leaves (token %d; before: %s)",
                self.prefix,
                self.writer,
                new.size,
                token,
                state.writer or "nobody",
            )
        return new

    def renew(self) -> None:
        """Renew the lease without appending (an idle holder calls this within its lease)."""
        state = self._held()
        started = self._monotonic()
        new = state.next(lease_until=self._wall() + self.lease)
        self._swap(new, started)

    def release(self) -> None:
        """Give the log up now (lease ended), so the next writer need not wait for it to expire."""
        if not self.holding:
            self._drop()
            return
        state, frontier = self._state, self._frontier
        assert state is not None and frontier is not None
        released = state.next(lease_until=0.0)
        try:
            etag = self.states.swap(released, self._etag)
        except WriterFenced:
            self._drop()
            return
        self._drop()
        self._left = (etag, released, frontier)

    # --- integrate ---------------------------------------------------------------------------------
    def integrate(self, leaves: Sequence[bytes], *, source: dict[str, int] | None = None) -> Integrated:
        """Steps 2-4 for ``leaves`` (the caller deduplicated them); ``source`` is the input position
        this swap also records. Raises :class:`WriterFenced` (reload with :meth:`hold`) or
        :class:`TileConflict` (stop)."""
        state = self._held()
        frontier = self._frontier
        assert frontier is not None
        started = self._monotonic()
        new_frontier, objects, order = frontier.extend(leaves)
        staged = f"{self.prefix}/staging/{state.seq + 1:020d}.{state.token}.{uuid.uuid4().hex[:8]}"
        self._check_lease("stage")
        self.store.put_if(staged, encode_staged(objects, order), etag=None, metadata=self._stamp())
        new = state.next(
            size=new_frontier.size,
            root=new_frontier.root(),
            staged=staged,
            lease_until=self._wall() + self.lease,
            source={**state.source, **(source or {})},
        )
        try:
            self._swap(new, started)
        except WriterFenced:
            self._delete_quietly(staged)
            raise
        self._frontier = new_frontier
        if self.holding:  # else the next holder applies the bundle (step 1): write nothing late
            self._upload([(object_key(self.prefix, name), objects[name]) for name in order])
            if state.staged:
                self._delete_quietly(state.staged)  # applied before this integration began
        return Integrated(state.size, leaves, new)

    # --- checkpoints -------------------------------------------------------------------------------
    def publish(self) -> str | None:
        """Step 5 for the held state's size, unless already published; the note, or None."""
        if not self.holding:
            return None
        state = self._state
        assert state is not None
        if state.size == self._published or state.size == 0:
            return None
        note = self.signer.sign(state.size, state.root)
        until = self._retain_until()
        self._write_once(history_key(self.prefix, state.size), note.encode("utf-8"), until)
        if self.tsa_url:
            from .timestamp import request_timestamp  # httpx and rfc3161-client only when a TSA is set

            try:
                stamp = request_timestamp(self.tsa_url, note.encode("utf-8"))
                self._check_lease("timestamp")
                self.store.put_if(
                    timestamp_key(self.prefix, state.size),
                    stamp,
                    etag=None,
                    retain_until=until,
                    metadata=self._stamp(),
                )
            except BlobConflict:
                pass  # stamped already by an earlier publication of this size
            except TransparencyLogError as exc:  # trusted time is best effort; `log verify` reports the gap
                logger.warning("checkpoint %d published without a timestamp: %s", state.size, exc)
        self._replace_latest(state.size, note)
        self._published = state.size
        logger.info("transparency log %s: checkpoint at %d leaves", self.prefix, state.size)
        return note

    def _replace_latest(self, size: int, note: str) -> None:
        key = checkpoint_key(self.prefix)
        try:
            current = self.store.get_tagged(key)
        except BlobNotFound:
            etag: str | None = None
        else:
            etag = current.etag
            if _size_of(current.data) >= size:
                return  # a newer holder published further: never roll it back
        self._check_lease("checkpoint")
        try:
            self.store.put_if(key, note.encode("utf-8"), etag=etag, metadata=self._stamp())
        except BlobConflict:
            logger.warning("transparency log %s: %s changed while publishing %d", self.prefix, key, size)

    # --- helpers -----------------------------------------------------------------------------------
    def _held(self) -> LogState:
        self._check_alarm()
        if self._state is None:
            raise WriterFenced(f"{self.writer} does not hold the log at {self.prefix!r}: hold() first")
        self._check_lease("write")
        return self._state

    def _check_lease(self, what: str) -> None:
        if self._monotonic() >= self._deadline:
            self._drop()
            raise WriterFenced(
                f"{self.writer}'s lease on the log at {self.prefix!r} ran out before it could {what}: "
                "it stops writing and reloads"
            )

    def _swap(self, new: LogState, started: float) -> None:
        try:
            self._etag = self.states.swap(new, self._etag)
        except WriterFenced as exc:
            logger.warning("transparency log %s: %s stops: %s", self.prefix, self.writer, exc)
            self._drop()
            raise
        self._state, self._deadline = new, started + self.lease

    def _drop(self) -> None:
        self._state = self._etag = self._frontier = None
        self._deadline = 0.0

    def _bootstrap(self) -> tuple[LogState, str | None]:
        """The first state of a log: empty, or one written before the log had a state object (its size
        is the larger of its latest checkpoint's and ``bootstrap_size``'s, its root from the tiles)."""
        size = self._bootstrap_size() if self._bootstrap_size is not None else 0
        with contextlib.suppress(BlobNotFound):
            size = max(size, _size_of(self.store.get(checkpoint_key(self.prefix))))
        root = Frontier.load(self.store, self.prefix, size).root()
        first = LogState(size=size, root=root)
        with contextlib.suppress(WriterFenced):  # another writer created it first: use theirs
            self.states.swap(first, None)
        return self.states.read()

    def _apply_staged(self, state: LogState) -> None:
        if not state.staged:
            return
        try:
            data = self.store.get(state.staged)
        except BlobNotFound:
            return  # deleted after the next integration applied it
        self._upload(
            [(object_key(self.prefix, n), body) for n, body in decode_staged(data, key=state.staged)],
            check_lease=False,
        )

    def _upload(self, objects: Sequence[tuple[str, bytes]], *, check_lease: bool = True) -> None:
        until = self._retain_until()
        for key, body in objects:
            if check_lease:
                self._check_lease(f"write {key}")
            self._write_once(key, body, until)

    def _write_once(self, key: str, body: bytes, until: datetime | None) -> None:
        try:
            self.store.put_if(key, body, etag=None, retain_until=until, metadata=self._stamp())
        except BlobConflict:
            if self.store.get(key) != body:
                self._alarm = (
                    f"{key} already holds other bytes than this log's: the log forked or was tampered with. "
                    f"{self.writer} stopped writing; run `blackbox log verify`"
                )
                logger.error("transparency log %s: %s", self.prefix, self._alarm)
                self._drop()
                raise TileConflict(self._alarm) from None

    def _stamp(self) -> dict[str, str]:
        return self._state.stamp() if self._state is not None else {"blackbox-writer": self.writer}

    def _check_alarm(self) -> None:
        if self._alarm is not None:
            raise TileConflict(self._alarm)

    def _delete_quietly(self, key: str) -> None:
        try:
            self.store.delete(key)
        except Exception as exc:  # a leftover bundle is only litter: the state names the live one
            logger.warning("could not delete staged bundle %s: %s", key, exc)

    def _retain_until(self) -> datetime | None:
        return datetime.now(UTC) + self.retain_for if self.retain_for is not None else None


def _size_of(note: bytes) -> int:
    """The tree size line of a checkpoint note (its second line), 0 when unreadable."""
    lines = note.split(b"\n")
    try:
        return int(lines[1]) if len(lines) > 1 else 0
    except ValueError:
        return 0

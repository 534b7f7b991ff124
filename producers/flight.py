"""The flight recorder: the full content of recent routine decisions, held so a late failure can bring it in.

A routine decision goes out structured-only (DESIGN decision 5): hashes, no content. Most failures
are noticed later (a complaint, an auditor, a reconciliation), when the content is gone. So the
recorder's worker keeps each structured-only decision's *sealed* capture, content included, in a
bounded buffer (DESIGN decision 17):

- a time window (:attr:`FlightPolicy.window_seconds`, default 15 minutes, measured with the
  recorder's clock) and a byte cap (:attr:`FlightPolicy.max_bytes`, default 64 MiB; 0 turns the flight
  recorder off); the oldest capture is evicted first, and every eviction is counted;
- in memory by default; with :attr:`FlightPolicy.spill_dir` the held bytes go to append-only files
  in that directory instead, and only their offsets stay in memory. **A spill file holds content
  at rest, unencrypted**, readable by whoever can read the directory. The files are anonymous (unlinked
  at creation where the OS allows it, so a crashed process leaves nothing behind) and each is closed,
  releasing its space, once every capture in it was evicted or taken. Deleted blocks are not wiped.

:meth:`FlightRecorder.take` hands a held capture out once (a flag brings it in); :meth:`fate` says why
a decision is not held (evicted and why, captured in full already, or never seen here).

A capture is held as the ``marshal`` bytes of the sealed capture: C speed on the worker's hot path
(measured ~20 µs at 20 KB, ~30 µs at 120 KB, a fraction of Avro), a snapshot with an exact size that
the byte cap counts, nothing for the garbage collector to trace, and read back only by this process.
Failure indicators (:func:`failure_indicator`) live here too: they say when a routine decision must
be captured in full at once.
"""

from __future__ import annotations

import contextlib
import logging
import marshal
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from producers.evidence.parts import iter_parts

if TYPE_CHECKING:
    from producers.settings import BlackboxSettings

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_WINDOW_SECONDS",
    "NO_FLIGHT",
    "FailurePredicate",
    "FlightPolicy",
    "FlightRecorder",
    "FlightStats",
    "failure_indicator",
]

log = logging.getLogger(__name__)

DEFAULT_WINDOW_SECONDS = 900.0
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
LEDGER_SIZE = 16_384
"""How many recent decision ids the recorder remembers the fate of (captured in full, or evicted and
why), so a flag that finds nothing can say why; beyond that a flag says "not held" without the why."""

FailurePredicate = Callable[[dict[str, Any]], object]
"""``failure_when(capture)``: truthy when a routine decision failed; a ``str`` result is the reason.
Called on the recorder's worker with the built capture (JSON form, content present, not yet sealed);
it must not modify it. What it raises is reported, never raised into the agent."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FlightPolicy:
    """How much routine content the recorder holds: ``window_seconds`` and ``max_bytes`` (0 or a
    window of 0: off), in memory or spilled to files in ``spill_dir``."""

    window_seconds: float = DEFAULT_WINDOW_SECONDS
    max_bytes: int = DEFAULT_MAX_BYTES
    spill_dir: Path | None = None

    def __post_init__(self) -> None:
        if self.window_seconds < 0 or self.max_bytes < 0:
            raise ValueError("window_seconds and max_bytes must be >= 0")

    @property
    def enabled(self) -> bool:
        return self.max_bytes > 0 and self.window_seconds > 0

    @classmethod
    def from_settings(cls, settings: BlackboxSettings) -> FlightPolicy:
        """``BLACKBOX_FLIGHT_WINDOW_SECONDS``, ``BLACKBOX_FLIGHT_MAX_BYTES``, ``BLACKBOX_FLIGHT_SPILL_DIR``."""
        return cls(
            window_seconds=float(settings.flight_window_seconds),
            max_bytes=int(settings.flight_max_bytes),
            spill_dir=settings.flight_spill_dir,
        )


@dataclass(frozen=True, slots=True)
class FlightStats:
    """The flight recorder's counters. ``held``/``held_bytes``: now. ``evicted_window`` /
    ``evicted_bytes``: captures evicted for age / to stay under the byte cap (one larger than the cap
    is never held and counts here). ``upgraded``: full captures emitted because a flag found the
    content held; ``not_held``: flags that found it gone. ``fired``: routine decisions captured in
    full at once by a failure indicator; ``predicate_raised``: times ``failure_when`` raised."""

    held: int = 0
    held_bytes: int = 0
    evicted_window: int = 0
    evicted_bytes: int = 0
    upgraded: int = 0
    not_held: int = 0
    fired: int = 0
    predicate_raised: int = 0


NO_FLIGHT = FlightStats()
"""The counters of a recorder whose flight recorder is off."""


def failure_indicator(capture: Mapping[str, Any]) -> str | None:
    """Why a built capture shows a failure by itself, or None: a tool call with an ``errorRef``,
    ``stopReason`` ``error``, or outcome ``failure``."""
    trace = capture.get("executionTrace")
    if isinstance(trace, Mapping):
        for call in trace.get("toolCalls") or ():
            if isinstance(call, Mapping) and call.get("errorRef"):
                return f"tool error in {call.get('toolName')}"
        if trace.get("stopReason") == "error":
            return "stop_reason error"
    outcome = capture.get("outcome")
    if isinstance(outcome, Mapping) and outcome.get("status") == "failure":
        reason = outcome.get("reason")
        return f"outcome failure ({reason})" if isinstance(reason, str) and reason else "outcome failure"
    return None


class _Spill:
    """Append-only anonymous files; a file is closed (its space released) when nothing in it is live."""

    def __init__(self, directory: Path, rotate_at: int) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._dir = directory
        self._rotate_at = rotate_at
        self._current: IO[bytes] | None = None
        self._written = 0
        self._live: dict[int, int] = {}  # id(file) -> captures in it still held
        self._files: dict[int, IO[bytes]] = {}

    def write(self, data: bytes) -> tuple[int, int]:
        """Append ``data``; returns (file id, offset)."""
        if self._current is None or self._written >= self._rotate_at:
            # kept open across calls, closed by release()/close(): no context manager fits
            self._current = tempfile.TemporaryFile(dir=self._dir, prefix="blackbox-flight-")  # noqa: SIM115
            self._files[id(self._current)] = self._current
            self._live[id(self._current)] = 0
            self._written = 0
        handle = self._current
        offset = self._written
        handle.seek(offset)
        handle.write(data)
        self._written += len(data)
        self._live[id(handle)] += 1
        return id(handle), offset

    def read(self, file_id: int, offset: int, length: int) -> bytes:
        handle = self._files[file_id]
        handle.flush()
        handle.seek(offset)
        return handle.read(length)

    def release(self, file_id: int) -> None:
        self._live[file_id] -= 1
        if self._live[file_id] == 0 and self._files[file_id] is not self._current:
            self._close(file_id)

    def _close(self, file_id: int) -> None:
        handle = self._files.pop(file_id)
        del self._live[file_id]
        with contextlib.suppress(OSError):
            handle.close()

    def close(self) -> None:
        for file_id in list(self._files):
            self._close(file_id)
        self._current = None


@dataclass(slots=True)
class _Entry:
    at: datetime
    size: int
    capture: dict[str, Any] | None  # only for a capture marshal cannot hold (an estimate is its size)
    data: bytes | None = None  # memory mode: marshal bytes of the sealed capture
    where: tuple[int, int] | None = None  # spill mode: (file id, offset) of those bytes; size is the length


class FlightRecorder:
    """The bounded buffer of one recorder (see the module docstring). Used by the recorder's worker
    thread; :attr:`stats` may be read from any thread."""

    def __init__(self, policy: FlightPolicy) -> None:
        self.policy = policy
        self._window = timedelta(seconds=policy.window_seconds)
        self._held: OrderedDict[str, _Entry] = OrderedDict()
        self._ledger: OrderedDict[str, str] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(
            ("evicted_window", "evicted_bytes", "upgraded", "not_held", "fired", "predicate_raised"), 0
        )
        self._spill = (
            None
            if policy.spill_dir is None
            else _Spill(policy.spill_dir, rotate_at=max(1 << 20, policy.max_bytes // 8))
        )

    @property
    def stats(self) -> FlightStats:
        with self._lock:
            return FlightStats(held=len(self._held), held_bytes=self._bytes, **self._counts)

    def count(self, name: str) -> None:
        with self._lock:
            self._counts[name] += 1

    # --- holding ------------------------------------------------------------------------------------
    def hold(self, decision_id: str, sealed: dict[str, Any], *, encoded: bytes, at: datetime) -> None:
        """Hold the sealed capture (content present) of a decision just emitted structured-only;
        ``encoded`` is what was emitted. Evicts what is older than the window, then oldest first to
        stay under the byte cap. Never raises for a capture it cannot hold: it logs and forgets it."""
        self._expire(at)
        data: bytes | None
        try:
            data = marshal.dumps(sealed)  # bytes: exact size, a snapshot, nothing for the GC to trace
            size = len(data)
        except ValueError:  # not plain JSON types (a subclass, ...): the dict itself, in memory
            data, size = None, len(encoded) + content_size(sealed)
        except Exception:  # sealed and emitted already: only the late upgrade is lost
            log.exception("the flight recorder could not hold %s", decision_id)
            self._note(decision_id, "could not be held (see the log)")
            return
        cap = self.policy.max_bytes
        if size > cap:
            self._note(decision_id, f"evicted: its {size} bytes exceed BLACKBOX_FLIGHT_MAX_BYTES={cap}")
            self.count("evicted_bytes")
            return
        while self._held and self._bytes + size > cap:
            self._evict_oldest(f"evicted to stay under BLACKBOX_FLIGHT_MAX_BYTES={cap}", "evicted_bytes")
        entry = _Entry(at, size, sealed if data is None else None, data)
        if self._spill is not None and data is not None:
            entry.data = None
            try:
                entry.where = self._spill.write(data)
            except OSError:  # a full or unwritable spill directory: only the late upgrade is lost
                log.exception("the flight recorder could not spill %s", decision_id)
                self._note(decision_id, "could not be held (see the log)")
                return
        replaced = self._held.pop(decision_id, None)
        if replaced is not None:
            self._forget(replaced)
        self._held[decision_id] = entry
        with self._lock:
            self._bytes += size
        self._ledger.pop(decision_id, None)

    def captured_in_full(self, decision_id: str) -> None:
        """A decision emitted in full (consequential, sampled, fired): a flag needs nothing held."""
        self._note(decision_id, "full")

    def take(self, decision_id: str, *, at: datetime) -> dict[str, Any] | None:
        """The held sealed capture of ``decision_id`` (removed from the buffer), or None."""
        self._expire(at)
        entry = self._held.pop(decision_id, None)
        if entry is None:
            return None
        self._forget(entry)
        self._note(decision_id, "taken")
        if entry.capture is not None:
            return entry.capture
        if entry.data is not None:
            value = marshal.loads(entry.data)
        else:
            assert entry.where is not None and self._spill is not None
            value = marshal.loads(self._spill.read(*entry.where, entry.size))
        return value if isinstance(value, dict) else None

    def fate(self, decision_id: str) -> str | None:
        """Why ``decision_id`` is not held: ``"full"`` (nothing to bring in), ``"taken"`` (brought in
        already), an eviction reason, or None (never seen here, or too long ago to remember)."""
        return self._ledger.get(decision_id)

    def close(self) -> None:
        """Drop everything held (spill files are closed, their space released)."""
        self._held.clear()
        with self._lock:
            self._bytes = 0
        if self._spill is not None:
            self._spill.close()

    # --- eviction -------------------------------------------------------------------------------------
    def _expire(self, now: datetime) -> None:
        horizon = now - self._window
        while self._held:
            entry = next(iter(self._held.values()))
            if entry.at >= horizon:
                return
            self._evict_oldest(
                f"evicted: older than the {self.policy.window_seconds:g} s window "
                "(BLACKBOX_FLIGHT_WINDOW_SECONDS)",
                "evicted_window",
            )

    def _evict_oldest(self, why: str, counter: str) -> None:
        decision_id, entry = self._held.popitem(last=False)
        self._forget(entry)
        self._note(decision_id, why)
        self.count(counter)

    def _forget(self, entry: _Entry) -> None:
        with self._lock:
            self._bytes -= entry.size
        if entry.where is not None and self._spill is not None:
            self._spill.release(entry.where[0])

    def _note(self, decision_id: str, fate: str) -> None:
        ledger = self._ledger
        ledger.pop(decision_id, None)
        ledger[decision_id] = fate
        if len(ledger) > LEDGER_SIZE:
            ledger.popitem(last=False)


def content_size(capture: Mapping[str, Any]) -> int:
    """The UTF-8 size of the text parts plus an estimate of the JSON parts' serialized size."""
    total = 0
    for ref in iter_parts(capture):
        content = ref.holder.get(ref.field.content_key)
        if content is not None:
            total += _json_size(content)
    return total


def _json_size(value: Any) -> int:
    kind = type(value)
    if kind is str:
        return len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))
    if kind is dict or kind is list:
        try:  # C speed, and within a few bytes per value of the JSON text: good enough for a cap
            return len(marshal.dumps(value))
        except ValueError:  # not plain JSON types (a subclass, ...): walk it
            pass
    return _walk_size(value)


def _walk_size(value: Any) -> int:
    kind = type(value)
    if kind is str:
        return len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))
    if kind is dict:
        return 2 + sum(_walk_size(k) + _walk_size(v) + 4 for k, v in value.items())
    if kind is list or kind is tuple:
        return 2 + sum(_walk_size(v) + 1 for v in value)
    return 8

"""The native evidence core (Rust, ``producers.native._core``), or the pure-Python reference.

The core computes exactly what the Python code it stands in for computes — canonical JSON
(:mod:`producers.evidence.canonical`), part hashes, Merkle roots (:mod:`producers.evidence.merkle`),
the signed manifest and its leaves (:mod:`producers.evidence.payload`), verify's content check
(:mod:`producers.evidence.verify`), the Avro encoding and decoding of a capture
(:mod:`producers.avro`) and the built-in personal-data scan (:mod:`producers.privacy.native_scan`) —
and is proven byte-identical against it (``tests/producers/native``). Those modules ask :func:`core`
and fall back to their own code when it is None or declines an input, so a machine without the
compiled module still produces the same bytes, only slower.

``BLACKBOX_NATIVE``: ``auto`` (default) uses the core when it loads and otherwise warns once,
naming why; ``off`` never loads it (the reference path, e.g. to compare); ``require`` raises
:class:`~schemas.errors.NativeCoreUnavailable` instead of falling back. The choice is read once, at
first use; :func:`reset` forgets it (tests).
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Generic, TypeVar

from schemas.errors import NativeCoreUnavailable

__all__ = ["ABI", "PerCore", "core", "reset", "status"]

# The behaviour version this Python code expects; a stale build of the Rust sources is refused.
ABI = 8

_log = logging.getLogger("blackbox.native")
_lock = threading.Lock()
_loaded = False
_module: ModuleType | None = None
_status = "not loaded yet"


def core() -> ModuleType | None:
    """The loaded native module, or None when the Python reference is in use (see module doc)."""
    if _loaded:
        return _module
    return _load()


def status() -> str:
    """``native`` or ``python (<why>)``, for logs, ``blackbox --version`` and benchmarks."""
    core()
    return _status


def reset() -> None:
    """Forget the choice: the next :func:`core` reads ``BLACKBOX_NATIVE`` again."""
    global _loaded, _module, _status
    with _lock:
        _loaded, _module, _status = False, None, "not loaded yet"


T = TypeVar("T")


class PerCore(Generic[T]):
    """What a module builds from the loaded core (a writer, a checker), built once per core:
    :func:`reset` may load another core, and a call with it builds again. ``make(core)`` runs under
    a lock, once per core however many threads ask at the same time."""

    __slots__ = ("_built", "_lock", "_make")

    def __init__(self, make: Callable[[ModuleType], T]) -> None:
        self._make = make
        self._built: tuple[ModuleType, T] | None = None
        self._lock = threading.Lock()

    def __call__(self, core: ModuleType) -> T:
        built = self._built
        if built is None or built[0] is not core:
            with self._lock:
                built = self._built
                if built is None or built[0] is not core:
                    built = (core, self._make(core))
                    self._built = built
        return built[1]

    def forget(self) -> None:
        """Build again at the next call (for tests that change what ``make`` reads)."""
        self._built = None


def _load() -> ModuleType | None:
    global _loaded, _module, _status
    with _lock:
        if _loaded:
            return _module
        from producers.settings import NativeSettings, read_settings

        choice = read_settings(NativeSettings).native
        module: ModuleType | None = None
        if choice == "off":
            _status = "python (BLACKBOX_NATIVE=off)"
        else:
            try:
                import producers.native._core as imported  # type: ignore[import-not-found]

                if getattr(imported, "ABI", None) != ABI:
                    raise ImportError(
                        f"it was built from other sources (ABI {getattr(imported, 'ABI', None)}, "
                        f"this code needs {ABI}); reinstall agent-blackbox"
                    )
                module = imported
                _status = "native"
            except ImportError as exc:
                why = f"the native evidence core did not load: {exc}"
                if choice == "require":
                    raise NativeCoreUnavailable(f"BLACKBOX_NATIVE=require, but {why}") from exc
                _status = f"python ({why})"
                message = f"blackbox: {why}; using the pure-Python reference (same bytes, slower)"
                warnings.warn(message, RuntimeWarning, stacklevel=3)
                _log.warning(message)
        _module, _loaded = module, True
        return module

"""Switching between the native core and the Python reference, for the native-core tests.

Import these from here (``from native_testing import both``), not from ``conftest``: when several
test folders are collected together, ``conftest`` names whichever folder's conftest came last.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from producers import native

TESTS = Path(__file__).resolve().parents[2]
# the vectors and builders the evidence, schema and recorder tests already use
for _folder in ("producers/evidence", "schemas", "producers/recorder"):
    if str(TESTS / _folder) not in sys.path:
        sys.path.append(str(TESTS / _folder))

T = TypeVar("T")


@contextmanager
def native_mode(mode: str) -> Iterator[ModuleType | None]:
    """``BLACKBOX_NATIVE=mode`` for the block (the loader's choice is forgotten before and after)."""
    before = os.environ.get("BLACKBOX_NATIVE")
    os.environ["BLACKBOX_NATIVE"] = mode
    native.reset()
    try:
        yield native.core()
    finally:
        if before is None:
            os.environ.pop("BLACKBOX_NATIVE", None)
        else:
            os.environ["BLACKBOX_NATIVE"] = before
        native.reset()


def outcome(function: Callable[[], T]) -> T | tuple[str, str, Any]:
    """``function()``, or what it raised as (type name, message, ``path`` attribute) to compare."""
    try:
        return function()
    except Exception as exc:
        return (type(exc).__name__, str(exc), getattr(exc, "path", None))


def both(function: Callable[[], Any]) -> tuple[Any, Any]:
    """``outcome(function)`` with the native core, then with the Python reference."""
    with native_mode("require") as core:
        assert core is not None
        natively = outcome(function)
    with native_mode("off") as core:
        assert core is None
        reference = outcome(function)
    return natively, reference

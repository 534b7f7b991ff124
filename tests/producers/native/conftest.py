"""Fixtures for the native-core tests: the loaded core (helpers are in :mod:`native_testing`).

Every test here compares the native core (``BLACKBOX_NATIVE=auto``) with the pure-Python reference
(``BLACKBOX_NATIVE=off``), so the core must load: a missing build FAILS these tests (rebuild with
``bash producers/native/build-dev.sh`` or ``pip install -e .``), it never skips them.
"""

from __future__ import annotations

from types import ModuleType

import pytest
from native_testing import TESTS, both, native_mode, outcome

__all__ = ["TESTS", "both", "core", "native_mode", "outcome"]  # re-exported for older imports


@pytest.fixture(scope="session")
def core() -> ModuleType:
    """The compiled core; BLACKBOX_NATIVE=require makes a missing or stale build fail loudly."""
    with native_mode("require") as loaded:
        assert loaded is not None
        return loaded

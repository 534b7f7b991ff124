"""native.PerCore: what a module builds from the core is built once per loaded core, again after
``native.reset()`` loads another, once however many threads ask together, and again after forget()."""

from __future__ import annotations

import threading
import time
from types import ModuleType

from native_testing import native_mode

from producers import avro, native
from producers.evidence import parts, payload


def test_built_once_per_core_and_again_for_another() -> None:
    made: list[str] = []

    def make(core: ModuleType) -> str:
        made.append(core.__name__)
        return f"built by {core.__name__}"

    memo = native.PerCore(make)
    first, second = ModuleType("first"), ModuleType("second")
    assert memo(first) == memo(first) == "built by first"
    assert memo(second) == "built by second"  # native.reset() loaded another core
    assert memo(second) == "built by second"
    assert made == ["first", "second"]
    memo.forget()
    assert memo(second) == "built by second" and made == ["first", "second", "second"]


def test_threads_asking_together_build_it_once() -> None:
    made: list[int] = []

    def slow(core: ModuleType) -> object:
        made.append(1)
        time.sleep(0.05)  # every thread arrives while the first is still building
        return object()

    memo = native.PerCore(slow)
    core = ModuleType("core")
    got: list[object] = []
    start = threading.Barrier(8)

    def ask() -> None:
        start.wait()
        got.append(memo(core))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(made) == 1 and len(got) == 8 and all(g is got[0] for g in got)


def test_the_modules_memos_follow_the_loaded_core() -> None:
    memos = (parts.part_checker, payload._manifest_writer, avro._writers, avro._readers)
    with native_mode("require") as core:
        assert core is not None
        built = [memo(core) for memo in memos]
        assert all(b is not None for b in built)
        assert all(memo(core) is b for memo, b in zip(memos, built, strict=True))  # not built again

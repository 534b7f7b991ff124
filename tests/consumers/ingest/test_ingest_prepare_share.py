"""With worker processes, the consumer process prepares a share of each batch itself, and the
workers are started when the pool is built.

``PreparePool.run`` used to hand the whole batch to the workers and wait idle; the consumer's own
core now takes ``len // (workers + 1)`` of the messages (the last ones) while the workers take the
rest. ``prepare`` is a pure function of the bytes and the context, so the results - in order - are
exactly the inline ones, whichever process made each.
"""

from __future__ import annotations

import importlib
import multiprocessing
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from ingest_testdata import encoded, make_capture, new_signer, trust_for

from consumers.retention.policy import default_policy

prepare_module = importlib.import_module("consumers.ingest.prepare")  # the package re-exports a function
SIGNER = new_signer()


def _items() -> list[tuple[bytes, str]]:
    values = [encoded(make_capture(i, tag="share", flagged=i % 3 == 0), SIGNER) for i in range(9)]
    values.insert(4, b"\xc3\x01broken")  # a dead letter in the workers' share
    values.append(encoded(make_capture(99, tag="share"), new_signer("did:test:stranger")))  # quarantined
    return [(value, f"t/0/{offset}") for offset, value in enumerate(values)]


def _context() -> Any:
    return prepare_module.PrepareContext(
        tuple(trust_for(SIGNER)), "share-test", datetime.now(UTC), default_policy()
    )


def test_the_calling_process_prepares_its_share_and_the_results_equal_inline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    items = _items()
    ctx = _context()
    inline = prepare_module.PreparePool(0).run(items, ctx)

    here: list[str] = []  # sources prepared in this process (the workers do not see the patch)
    original = prepare_module.prepare

    def counted(data: bytes, context: object, *, source: str = "") -> object:
        here.append(source)
        return original(data, context, source=source)

    monkeypatch.setattr(prepare_module, "prepare", counted)
    pool = prepare_module.PreparePool(1)
    try:
        pooled = pool.run(items, ctx)
    finally:
        pool.close()

    assert pooled == inline
    assert [p.kind for p in pooled].count("dead") == 1 and sum(p.verified for p in pooled) == 9
    assert pooled[-1].kind == "capture" and pooled[-1].reason == "KeyNotTrusted"
    assert here == [source for _, source in items[len(items) - len(items) // 2 :]]


def test_a_batch_smaller_than_two_per_worker_stays_inline(monkeypatch: pytest.MonkeyPatch) -> None:
    items = _items()[:3]
    ctx = _context()
    here: list[str] = []
    original = prepare_module.prepare

    def counted(data: bytes, context: object, *, source: str = "") -> object:
        here.append(source)
        return original(data, context, source=source)

    monkeypatch.setattr(prepare_module, "prepare", counted)
    pool = prepare_module.PreparePool(2)
    try:
        assert len(pool.run(items, ctx)) == 3
    finally:
        pool.close()
    assert here == [source for _, source in items]


def test_workers_start_when_the_pool_is_built_not_in_the_first_batch() -> None:
    # spawning a worker and importing blackbox in it takes ~1 s; the first batch must not wait for it
    before = set(multiprocessing.active_children())
    pool = prepare_module.PreparePool(2)
    try:
        deadline = time.monotonic() + 30
        while len(set(multiprocessing.active_children()) - before) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(set(multiprocessing.active_children()) - before) == 2
    finally:
        pool.close()

"""Inline, a batch's segment frames are compressed in a helper thread while the batch is verified.

The frames must be the bytes ``frame_compressor(level).compress`` makes for each message (segments,
their keys and the index rows' offsets depend on them), and the prepared batch must equal the one
prepared message by message — whatever the messages are: captures, quarantined captures, flags,
dead letters.
"""

from __future__ import annotations

import importlib
import random
from datetime import UTC, datetime
from typing import Any

import pytest
from ingest_testdata import encoded, flag_bytes, make_capture, new_signer, trust_for

from consumers.retention.policy import default_policy

prepare_module = importlib.import_module("consumers.ingest.prepare")  # the package re-exports a function
SIGNER = new_signer()


def _items() -> list[tuple[bytes, str]]:
    rng = random.Random(7)
    values = [
        encoded(
            make_capture(i, tag="behind", size=rng.choice([0, 2_000, 20_000]), flagged=i % 5 == 0), SIGNER
        )
        for i in range(40)
    ]
    values.insert(3, b"\xc3\x01broken")  # a dead letter
    values.insert(9, b"")  # an empty message
    values.insert(12, flag_bytes("dec_behind_000001", SIGNER))
    values.append(encoded(make_capture(99, tag="behind"), new_signer("did:test:stranger")))  # quarantined
    return [(value, f"t/0/{offset}") for offset, value in enumerate(values)]


def _context(level: int = 3) -> Any:
    return prepare_module.PrepareContext(
        tuple(trust_for(SIGNER)), "behind-test", datetime(2026, 7, 21, tzinfo=UTC), default_policy(), level
    )


@pytest.mark.parametrize("level", [1, 3, 9])
def test_frames_compressed_together_are_the_frames_compressed_one_by_one(level: int) -> None:
    rng = random.Random(level)
    datas = [rng.randbytes(rng.choice([0, 1, 100, 5_000])) for _ in range(50)]
    datas += [data for data, _ in _items()]
    one_by_one = [prepare_module.frame_compressor(level).compress(data) for data in datas]
    assert prepare_module._compress_all(datas, level) == one_by_one


def test_a_batch_prepared_with_frames_behind_equals_one_prepared_message_by_message() -> None:
    items, ctx = _items(), _context()
    behind = prepare_module._prepare_chunk(items, ctx, behind_thread=True)
    one_by_one = [prepare_module.prepare(data, ctx, source=source) for data, source in items]
    assert behind == one_by_one
    kinds = [p.kind for p in behind]
    assert kinds.count("dead") == 2 and kinds.count("flag") == 1
    assert sum(p.verified for p in behind) == 40 and behind[-1].reason == "KeyNotTrusted"
    assert all(p.frame for p in behind if p.kind == "capture")


def test_the_pool_inline_compresses_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    original = prepare_module._compress_all

    def counted(datas: list[bytes], level: int) -> list[bytes]:
        calls.append(len(datas))
        return original(datas, level)

    monkeypatch.setattr(prepare_module, "_compress_all", counted)
    items = _items()
    prepare_module.PreparePool(0).run(items, _context())
    assert calls == [len(items)]


def test_a_failing_helper_leaves_the_frames_to_this_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(datas: list[bytes], level: int) -> list[bytes]:
        raise MemoryError("no room for the frames")

    items, ctx = _items(), _context()
    expected = [prepare_module.prepare(data, ctx, source=source) for data, source in items]
    monkeypatch.setattr(prepare_module, "_compress_all", broken)
    assert prepare_module._prepare_chunk(items, ctx, behind_thread=True) == expected


def test_without_the_c_backend_the_frames_are_made_as_they_go(monkeypatch: pytest.MonkeyPatch) -> None:
    # python-zstandard's cffi backend has no multi_compress_to_buffer
    monkeypatch.setattr(prepare_module, "_MULTI", False)
    items, ctx = _items(), _context()
    assert prepare_module._frames_behind(items, ctx.level) is None
    expected = [prepare_module.prepare(data, ctx, source=source) for data, source in items]
    assert prepare_module._prepare_chunk(items, ctx, behind_thread=True) == expected

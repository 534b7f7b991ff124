"""The submitter's side of witnessing (``consumers.tlog.witness``) without a witness answering: a
witness that is down is tried, logged and retried in its own thread; submitting never raises nor waits,
and nothing is published as cosigned. The real witness is in tests/interop/test_go_witness.py."""

from __future__ import annotations

import logging
import socket
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from consumers.tlog.checkpoints import LogSigner
from consumers.tlog.frontier import Frontier, object_key
from consumers.tlog.witness import WitnessSubmitter, latest_cosigned_key, read_states
from producers.blobstore import LocalBlobStore
from producers.evidence.cosignature import WitnessKey
from schemas.errors import TransparencyLogError


@dataclass(frozen=True)
class _Setting:
    name: str
    url: str
    vkey: str


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again when the block ends: nothing listens there


def _log(tmp_path: Path, n: int) -> tuple[LocalBlobStore, str]:
    store = LocalBlobStore(tmp_path)
    frontier, objects, order = Frontier().extend([f"leaf {i}".encode() for i in range(n)])
    for name in order:
        store.put(object_key("log", name), objects[name])
    signer = LogSigner("blackbox.test/submit", Ed25519PrivateKey.generate())
    return store, signer.sign(n, frontier.root())


def test_a_witness_that_is_down_is_retried_in_the_background_and_nothing_is_cosigned(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store, note = _log(tmp_path, 7)
    vkey = WitnessKey.from_public("w.down", Ed25519PrivateKey.generate().public_key()).vkey
    down = _Setting("w.down", f"http://127.0.0.1:{_closed_port()}", vkey)
    submitter = WitnessSubmitter(store=store, prefix="log", witnesses=[down], timeout=2.0)
    with caplog.at_level(logging.WARNING, logger="consumers.tlog.witness"):
        submitter.submit(note)  # returns at once: the thread does the work
        submitter.close(wait=10.0)  # returns once the witness was tried
    assert any("witness w.down" in r.getMessage() and "retrying" in r.getMessage() for r in caplog.records)
    assert not store.exists(latest_cosigned_key("log"))
    assert read_states(store, "log", ["w.down"]) == [None]
    assert submitter.cosigned_sizes() == {"w.down": 0}


def test_a_witness_key_for_another_name_is_refused_at_setup(tmp_path: Path) -> None:
    vkey = WitnessKey.from_public("w.other", Ed25519PrivateKey.generate().public_key()).vkey
    with pytest.raises(TransparencyLogError, match=r"witness w\.one: its vkey is for 'w\.other'"):
        WitnessSubmitter(
            store=LocalBlobStore(tmp_path), prefix="log", witnesses=[_Setting("w.one", "http://x", vkey)]
        )

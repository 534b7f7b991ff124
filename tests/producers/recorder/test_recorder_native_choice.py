"""BLACKBOX_NATIVE=require without the core fails when the Recorder is built, never in a decision."""

from __future__ import annotations

import sys

import pytest
from recorder_testdata import NullTransport, new_signer

from producers import native
from producers.recorder import Recorder
from schemas.errors import NativeCoreUnavailable


class _Null(NullTransport):
    def send(self, key: bytes, value: bytes, on_delivery: object) -> None:
        raise AssertionError("nothing is sent by a recorder that was refused")


def test_require_without_the_core_refuses_the_recorder_on_construction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("BLACKBOX_NATIVE", "require")
    monkeypatch.setitem(sys.modules, "producers.native._core", None)  # the import now fails
    native.reset()
    try:
        with pytest.raises(NativeCoreUnavailable, match="BLACKBOX_NATIVE=require"):
            Recorder(agent_id="agt_native", transport=_Null(), signer=new_signer())
    finally:
        native.reset()


def test_a_built_recorder_has_settled_the_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BLACKBOX_NATIVE", "require")
    native.reset()
    try:
        rec = Recorder(agent_id="agt_native", transport=_Null(), signer=new_signer())
        assert native.status() == "native"
        rec.close()
    finally:
        native.reset()

"""The recorder's pinned configuration gives the same bytes as sealing its capture from scratch."""

from __future__ import annotations

import copy
from typing import Any

from recorder_testdata import KeptTransport, StepClock, configure, make_content, new_signer, record, trust_for

from producers.evidence import seal, verify_capture
from producers.recorder import Recorder
from schemas.codec import decode, encode_capture


def test_recorded_bytes_equal_a_reference_seal() -> None:
    signer = new_signer()
    transport = KeptTransport()
    built: list[dict[str, Any]] = []
    rec = Recorder(agent_id="agt_pins", transport=transport, signer=signer, clock=StepClock())
    configure(rec)
    original = rec._process

    def spy(item: Any) -> None:  # keep an unsealed copy of what the worker builds
        if hasattr(item, "to_capture"):
            built.append(copy.deepcopy(item.to_capture()))
        original(item)

    rec._process = spy  # type: ignore[method-assign]
    for seed in range(3):
        record(rec, make_content(20_000, seed=seed), consequential=True)
    assert rec.close(10)
    assert len(transport.sent) == len(built) == 3
    trust = trust_for(signer)
    for data, unsealed in zip(transport.sent, built, strict=True):
        unsealed["captureLevel"] = "full"
        reference = copy.deepcopy(unsealed)
        assert data == encode_capture(seal(reference, signer))
        verify_capture(decode(data).value, trust)

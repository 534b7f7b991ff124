"""``blackbox flag`` and the Recorder send one flag event: same builder, same signature, same bytes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from consumers.ingest.flags import verify_flag as ingest_verify_flag
from consumers.retention.clock import FixedClock
from consumers.retention.flag import send_flag
from producers.evidence import Signer, TrustStore
from producers.recorder import Recorder
from schemas.codec import decode

FLAGGED_AT = datetime(2026, 7, 24, 10, 0, 0, 250000, tzinfo=UTC)


class Kept(list[tuple[bytes, bytes]]):
    """A transport that keeps the (key, value) pairs it is sent and confirms each at once."""

    def send(self, key: bytes, value: bytes, on_delivery: Callable[[Any], None]) -> None:
        self.append((key, value))
        on_delivery(None)

    def poll(self, timeout: float | None = 0.0) -> int:
        return 0

    flush = poll

    def close(self, timeout: float | None = None) -> None:
        return None


def test_cli_flag_and_recorder_flag_are_the_same_bytes(signer: Signer, trust: TrustStore) -> None:
    cli, runtime = Kept(), Kept()
    flag = send_flag(
        cli,
        "dec_routine_2",
        agent_id="agt_support_1",
        reason="chargeback",
        failure=True,
        clock=FixedClock(FLAGGED_AT),
        signer=signer,
    )
    with Recorder(agent_id="agt_support_1", transport=runtime, signer=signer) as recorder:
        assert recorder.flag_consequential("dec_routine_2", "chargeback", failure=True, flagged_at=FLAGGED_AT)

    [(key, data)] = cli
    assert runtime == cli
    assert key == b"agt_support_1"
    decoded = decode(data)
    assert decoded.kind == "flag" and decoded.value == flag.value
    assert decoded.value["flaggedAt"] == "2026-07-24T10:00:00.250Z"
    ingest_verify_flag(decoded.value, trust, now=FLAGGED_AT)  # what ingest checks, passes


def test_unsigned_cli_flag_matches_an_unsigned_recorder_flag(signer: Signer) -> None:
    cli, runtime = Kept(), Kept()
    send_flag(cli, "dec_1", agent_id="agt_1", reason="late failure", clock=FixedClock(FLAGGED_AT))
    with Recorder(agent_id="agt_1", transport=runtime, signer=signer, sign_flags=False) as recorder:
        assert recorder.flag_consequential("dec_1", "late failure", failure=False, flagged_at=FLAGGED_AT)
    [(key, data)] = cli
    assert key == b"agt_1" and runtime == cli
    assert "signature" not in decode(data).value

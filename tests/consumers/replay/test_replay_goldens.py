"""The three committed goldens: one replays identically, one is tampered, one diverges."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from replay_scripted import BALANCE, record_decision
from replay_servers import GOLDEN, ModelServer, ToolServer

from consumers.replay import HttpToolBackend, Replayer, replay_with_report, report_json
from producers.evidence import Signer, seal
from schemas.errors import ContentHashMismatch, ReplayDivergence


def test_identical_golden_reproduces_the_captured_failure(
    make_replayer: Callable[..., Replayer], model_server: ModelServer, tool_server: ToolServer
) -> None:
    capture = json.loads((GOLDEN / "replay-identical.json").read_text(encoding="utf-8"))
    result = make_replayer().replay("dec_golden_identical")

    assert result.replay_failure is None and result.verified
    assert all(check.ok for check in result.request_checks)
    assert [c.tool_name for c in result.tool_calls] == ["lookup_customer", "get_balance", "issue_refund"]
    assert result.tool_calls[2].input == {
        "customer_id": "cus_0042",
        "amount": BALANCE["balance"],
    }  # the wrong refund
    assert result.final_output == capture["executionTrace"]["finalOutputText"]
    assert not result.compared_to_original().changed  # type: ignore[union-attr]
    assert all(c.source == "recorded" for c in result.tool_calls)
    assert tool_server.requests == []


def test_model_receives_the_rendered_context_byte_for_byte(
    make_replayer: Callable[..., Replayer], model_server: ModelServer
) -> None:
    capture = json.loads((GOLDEN / "replay-identical.json").read_text(encoding="utf-8"))
    make_replayer().replay("dec_golden_identical")

    text = capture["renderedContext"]["text"].encode("utf-8")
    bodies = model_server.bodies()
    assert len(bodies) == 4  # three tool turns and the final answer
    first = bodies[0]
    assert b'"messages": ' + text + b"," in first  # verbatim, not re-serialized
    for later in bodies[1:]:
        assert b'"messages": ' + text[:-1] in later  # the captured prefix stays identical every turn
    request = json.loads(first)
    assert request["model"] == "acme-support"
    assert request["tools"] == capture["agentConfiguration"]["toolSchemaJson"]["tools"]
    assert request["temperature"] == 0.0 and request["top_p"] == 1.0 and request["seed"] == 7


def test_tampered_golden_is_refused_naming_the_part(make_replayer: Callable[..., Replayer]) -> None:
    with pytest.raises(ContentHashMismatch) as caught:
        make_replayer().replay("dec_golden_tampered")
    assert caught.value.part == "executionTrace.finalOutputText"


def test_tampered_golden_replays_marked_unverified_when_allowed(
    make_replayer: Callable[..., Replayer],
) -> None:
    replayer = make_replayer(allow_unverified=True)
    prepared = replayer.prepare("dec_golden_tampered")
    report = replay_with_report(replayer, prepared)
    body = report_json(report)

    assert body["verified"] is False
    assert "UNVERIFIED" in body["verificationNote"] and "finalOutputText" in body["verificationNote"]
    assert any("not evidence" in caveat for caveat in body["caveats"])
    # The cover-up is exposed: the model still makes the wrong refund the edited output hides.
    run = body["runs"][0]
    assert run["finalOutputEqual"] is False and run["toolCallsEqual"] is True
    assert run["finalOutput"] == "I have refunded $2480.50 (refund rf_000917)."


def test_diverging_golden_reports_the_step_and_makes_no_live_call(
    make_replayer: Callable[..., Replayer], tool_server: ToolServer
) -> None:
    result = make_replayer().replay("dec_golden_diverging", raise_on_replay_failure=False)

    divergence = result.divergence
    assert isinstance(divergence, ReplayDivergence)
    assert divergence.step == 3
    assert divergence.call["toolName"] == "issue_refund"  # type: ignore[index]
    assert result.stop_reason == "divergence" and result.final_output is None
    assert [c.source for c in result.tool_calls] == ["recorded", "recorded", "unrecorded"]
    assert tool_server.requests == []  # zero live traffic

    with pytest.raises(ReplayDivergence):
        make_replayer().replay("dec_golden_diverging")


def test_no_live_traffic_even_when_the_capture_names_the_live_systems(
    make_replayer: Callable[..., Replayer], golden_dir: Path, signer: Signer, tool_server: ToolServer
) -> None:
    # A diverging capture whose external state points at the (running) live tool endpoint.
    capture = record_decision(
        decision_id="dec_live_named",
        keep_calls=2,
        final_override="escalated",
        external_endpoint=tool_server.url,
    )
    (golden_dir / "live-named.json").write_text(json.dumps(seal(capture, signer)), encoding="utf-8")

    result = make_replayer().replay("dec_live_named", raise_on_replay_failure=False)

    assert result.divergence is not None and result.divergence.step == 3
    assert tool_server.requests == []


def test_diverging_golden_report_names_first_divergent_step(make_replayer: Callable[..., Replayer]) -> None:
    replayer = make_replayer()
    body = report_json(replay_with_report(replayer, replayer.prepare("dec_golden_diverging")))
    run = body["runs"][0]
    assert run["divergence"]["step"] == 3
    assert run["firstDivergentStep"] == 3
    assert run["verdict"].startswith("diverges from the recording at step 3")


def test_live_mode_reaches_real_tools_only_when_authorized_and_logged(
    make_replayer: Callable[..., Replayer],
    tool_server: ToolServer,
    access_log_rows: Callable[[], list[dict[str, Any]]],
) -> None:
    backend = HttpToolBackend(tool_server.url)
    try:
        with pytest.raises(ValueError):
            make_replayer(live_tools=backend)  # no reason, no live tools
        result = make_replayer(live_tools=backend, live_reason="check refund API fix").replay(
            "dec_golden_diverging", raise_on_replay_failure=False
        )
    finally:
        backend.close()

    assert result.live and result.replay_failure is None
    assert [path for path, _ in tool_server.requests] == ["/lookup_customer", "/get_balance", "/issue_refund"]
    live_rows = [r for r in access_log_rows() if r["action"] == "replay-live"]
    assert len(live_rows) == 1 and live_rows[0]["reason"] == "check refund API fix"

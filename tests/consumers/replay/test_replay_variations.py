"""Variable isolation: one variable per variation, verdicts implicated / cleared."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from replay_scripted import memory_entries, system_prompt

from consumers.replay import (
    InvalidVariation,
    Replayer,
    ReplayHandles,
    parse_variation,
    replay_with_report,
    report_json,
)
from consumers.replay.variation import apply_variation, splice
from producers.context import RenderedContext, render_chat_context


@pytest.fixture
def prompt_file(tmp_path: Path) -> Callable[[str], Path]:
    def write(version: str) -> Path:
        path = tmp_path / f"prompt-{version}.txt"
        path.write_text(system_prompt(version), encoding="utf-8")
        return path

    return write


def test_prior_prompt_clears_the_failure_and_is_implicated(
    make_replayer: Callable[..., Replayer], prompt_file: Callable[[str], Path]
) -> None:
    replayer = make_replayer()
    prepared = replayer.prepare("dec_golden_identical")
    variation = parse_variation(f"system_prompt=@{prompt_file('v4.6')}")
    report = replay_with_report(replayer, prepared, variations=[variation])

    assert report.as_captured.verdict == "reproduces the capture"
    row = report.row("system_prompt")
    assert row.verdict == "outcome changed → system_prompt is implicated"
    assert row.comparison is not None and row.comparison.first_divergent_step == 3
    refund = row.result.tool_calls[2]
    assert refund.tool_name == "issue_refund" and refund.input["amount"] == 120.0  # the right refund
    # The recording has no answer for the corrected refund: a divergence, never a live call.
    assert row.result.divergence is not None and refund.source == "unrecorded"


def test_unrelated_variables_are_cleared(make_replayer: Callable[..., Replayer]) -> None:
    replayer = make_replayer()
    prepared = replayer.prepare("dec_golden_identical")
    variations = [
        parse_variation("sampling.top_p=0.5"),
        parse_variation('external_state.customer.balance={"balance": 1.0, "currency": "USD"}'),
    ]
    body = report_json(replay_with_report(replayer, prepared, variations=variations))

    top_p, balance = body["runs"][1], body["runs"][2]
    assert (
        top_p["verdict"] == "no change → sampling.top_p cleared for 1 value tried (sampling.top_p=0.5; 1 run)"
    )
    assert top_p["outcomeChanged"] is False
    assert balance["verdict"].startswith("no change → external_state.customer.balance cleared")
    assert "never read" in balance["verdict"]


def test_a_smaller_working_set_is_implicated(make_replayer: Callable[..., Replayer], tmp_path: Path) -> None:
    small = tmp_path / "memory.json"
    small.write_text(json.dumps([c for _, c in memory_entries(count=4)]), encoding="utf-8")
    replayer = make_replayer()
    report = replay_with_report(
        replayer, replayer.prepare("dec_golden_identical"), variations=[parse_variation(f"memory=@{small}")]
    )
    assert report.row("memory").verdict == "outcome changed → memory is implicated"


def test_memory_variation_accepts_entries_and_keeps_other_bytes(
    make_replayer: Callable[..., Replayer],
) -> None:
    replayer = make_replayer()
    prepared = replayer.prepare("dec_golden_identical")
    entries = [{"entryId": "m1", "renderedContent": "one"}, {"entryId": "m2", "renderedContent": "two"}]
    varied = apply_variation(prepared.inputs, parse_variation(f"memory={json.dumps(entries)}"))

    messages = json.loads(varied.request.messages_text)
    assert messages[1]["content"] == "one\n\ntwo"
    original = prepared.inputs.request.messages_text
    memory = prepared.inputs.rendered.span("memory")
    raw = original.encode("utf-8")
    assert varied.request.messages_text.encode("utf-8").startswith(raw[: memory.start])
    assert varied.request.messages_text.encode("utf-8").endswith(raw[memory.end :])
    assert varied.rendered.part_text("user") == prepared.inputs.rendered.part_text("user")


def test_splices_compose_through_shifted_spans() -> None:
    rendered = render_chat_context(
        system_prompt="old prompt", memory=[("a", "alpha"), ("b", "beta")], user_message="hi ✓"
    )
    once = splice(rendered, "system_prompt", 'a "much" longer prompt, 日本語')
    twice = splice(once, "memory", "gamma")
    assert twice.part_text("system_prompt") == 'a "much" longer prompt, 日本語'
    assert twice.part_text("memory") == "gamma"
    assert twice.part_text("user") == "hi ✓"
    assert json.loads(twice.text)[2]["content"] == "hi ✓"
    assert not any(s.part.startswith("memory:") for s in twice.spans)
    assert isinstance(twice, RenderedContext)


def test_model_variation_sends_the_other_model(
    make_replayer: Callable[..., Replayer], model_server: Any
) -> None:
    replayer = make_replayer()
    result = replayer.run(
        replayer.prepare("dec_golden_identical"), variation=parse_variation("model=acme-support-next")
    )
    assert result.model == "acme-support-next"
    assert {json.loads(b)["model"] for b in model_server.bodies()} == {"acme-support-next"}


def test_tool_schema_variation_replaces_the_tools(
    make_replayer: Callable[..., Replayer], model_server: Any
) -> None:
    replayer = make_replayer()
    schema = {"tools": [{"type": "function", "function": {"name": "lookup_customer", "parameters": {}}}]}
    replayer.run(
        replayer.prepare("dec_golden_identical"),
        variation=parse_variation(f"tool_schema={json.dumps(schema)}"),
    )
    assert json.loads(model_server.bodies()[0])["tools"] == schema["tools"]


@pytest.mark.parametrize(
    "spec",
    [
        "prompt=x",  # unknown variable
        "system_prompt",  # no value
        "sampling.=1",  # no field
        "model.version=2",  # model has no fields
        "external_state=1",  # needs a key
        "memory=not json",
        "system_prompt,model=x",  # two variables in one
    ],
)
def test_bad_variations_are_refused(spec: str) -> None:
    with pytest.raises(InvalidVariation):
        parse_variation(spec)


def test_unknown_external_key_is_refused(make_replayer: Callable[..., Replayer]) -> None:
    replayer = make_replayer()
    with pytest.raises(InvalidVariation, match=r"customer\.balance"):
        replayer.run(
            replayer.prepare("dec_golden_identical"), variation=parse_variation("external_state.fx.rate=1.1")
        )


def careful_agent(handles: ReplayHandles) -> str | None:
    """An agent with its own loop: it checks the ledger itself before allowing a large refund."""
    messages = handles.model.initial_messages()
    while True:
        reply = handles.model.complete(messages)
        messages.append(reply)
        if not reply.get("tool_calls"):
            return reply.get("content")
        for call in reply["tool_calls"]:
            name, arguments = call["function"]["name"], json.loads(call["function"]["arguments"])
            if name == "issue_refund":
                ledger = handles.external_state.get("customer.balance")
                if arguments["amount"] > 0.5 * ledger["balance"]:
                    return "Refund held for review: amount is more than half the balance."
            output = handles.tools.call(name, arguments)
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": json.dumps(output)})


def test_agent_hook_reruns_the_agents_own_loop(make_replayer: Callable[..., Replayer]) -> None:
    replayer = make_replayer(agent=careful_agent)
    prepared = replayer.prepare("dec_golden_identical")
    as_captured = replayer.run(prepared)
    assert as_captured.final_output == "Refund held for review: amount is more than half the balance."
    assert as_captured.external_reads == ("customer.balance",)

    report = replay_with_report(
        replayer,
        prepared,
        variations=[
            parse_variation('external_state.customer.balance={"balance": 100000.0, "currency": "USD"}')
        ],
    )
    row = report.row("external_state.customer.balance")
    assert row.verdict == "outcome changed → external_state.customer.balance is implicated"


def test_agent_hook_records_a_divergence_the_agent_swallowed(make_replayer: Callable[..., Replayer]) -> None:
    def sloppy_agent(handles: ReplayHandles) -> str | None:
        with contextlib.suppress(Exception):
            handles.tools.call("delete_account", {"customer_id": "cus_0042"})
        return "done"

    result = make_replayer(agent=sloppy_agent).replay("dec_golden_identical", raise_on_replay_failure=False)
    assert result.divergence is not None and result.divergence.step == 1
    assert result.final_output is None and result.stop_reason == "divergence"


def test_agent_hook_rejects_a_changed_context(make_replayer: Callable[..., Replayer]) -> None:
    def rewriting_agent(handles: ReplayHandles) -> str | None:
        messages = handles.model.initial_messages()
        messages[0]["content"] = "a different prompt"
        handles.model.complete(messages)
        return "unreachable"

    result = make_replayer(agent=rewriting_agent).replay(
        "dec_golden_identical", raise_on_replay_failure=False
    )
    assert result.divergence is not None and "captured rendered context" in str(result.divergence)
    assert result.model_calls == 0

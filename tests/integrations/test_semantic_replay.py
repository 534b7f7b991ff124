"""Replay of semantic captures, end to end: OTel GenAI spans and a LangGraph run → consume → replay.

A semantic capture holds no request bytes: its rendering is OpenAI chat messages
(``openai.chat.messages+json``) and the replay sends exactly those messages, with the captured
system instructions, tools and sampling, to the tests' local provider server
(``blackbox replay --model-endpoint``). The report states fidelity ``semantic`` and what such a
replay can and cannot prove; the tool the model asks for is answered from the recording, never run.
A LangGraph run over a wrapped ``openai`` client is a wire capture: its replay sends the recorded
bytes. (The OTLP receiver's replay is in ``tests/consumers/otlp/test_receiver.py``.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langgraph_agent import DOCUMENTS, ORDER, QUESTION, SYSTEM, build_graph, scripted_model, tool_call
from provider_server import ProviderServer, Reply, ToolCall
from test_langchain import ARGUMENTS, chat_openai
from test_langchain import FINAL as LG_FINAL
from test_langchain import Rig as LangchainRig
from test_langchain import run as run_graph
from test_otel_exporter import FINAL as OTEL_FINAL
from test_otel_exporter import SYSTEM as OTEL_SYSTEM
from test_otel_exporter import TOOLS, USER, make_rig, run_agent, traced
from typer.testing import CliRunner

from consumers.cli import app

SEMANTIC_NOTE = "the exact bytes the model received were not captured"


def _cli(env: dict[str, str], *args: str) -> Any:
    result = CliRunner().invoke(app, list(args), env=env)
    assert result.exit_code == 0, result.output
    return result


def _consume_and_replay(data: Path, decision_id: str, server: ProviderServer) -> dict[str, Any]:
    env = {"BLACKBOX_DATA_DIR": str(data), "BLACKBOX_TRANSPORT": "spool", "BLACKBOX_BLOB": "local"}
    assert "indexed=1" in _cli(env, "consume", "--drain", "--max-wait", "0.1").output
    _cli(env, "verify", decision_id)
    server.clear()
    replayed = _cli(env, "replay", decision_id, "--model-endpoint", server.openai_base_url, "--json")
    return dict(json.loads(replayed.stdout))


def test_replay_an_otel_exporter_capture(
    provider_server: ProviderServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_only")
    data = tmp_path / "bb"
    rig = make_rig(data / "spool")
    rig.trust().save(data / "trust.toml")
    run_agent(traced(rig), provider_server)
    (capture,) = rig.captures()
    assert rig.recorder.close(10)

    provider_server.script(Reply(tool_calls=(ToolCall("get_weather"),)), Reply(text=OTEL_FINAL))
    report = _consume_and_replay(data, capture["decisionId"], provider_server)
    assert_semantic_report(report, final=OTEL_FINAL)
    first, second = (json.loads(sent.body) for sent in provider_server.received)
    # The captured system instructions and messages, tools and sampling, as the spans carried them.
    assert first["model"] == "gpt-test" and first["tools"] == TOOLS
    assert first["messages"] == [
        {"role": "system", "content": OTEL_SYSTEM},
        {"role": "user", "content": USER},
    ]
    assert {k: first[k] for k in ("temperature", "max_tokens", "stop", "seed")} == {
        "temperature": 0.2,
        "max_tokens": 300,
        "stop": ["END"],
        "seed": 7,
    }
    # The tool is answered from the recording: its recorded output goes back to the model.
    (recorded,) = capture["executionTrace"]["toolCalls"]
    assert second["messages"][:2] == first["messages"]
    assert second["messages"][-1]["role"] == "tool"
    assert second["messages"][-1]["content"] == recorded["output"] == '{"temp_c":24}'


def assert_semantic_report(report: dict[str, Any], *, final: str) -> None:
    """The replay ran, said what a semantic capture proves, and reproduced from the recording."""
    assert report["verified"] is True and all(check["ok"] for check in report["requestChecks"])
    assert report["fidelity"] == "semantic"
    note = report["fidelityNote"]
    assert SEMANTIC_NOTE in note and "openai.chat.messages+json" in note
    assert "proves behaviour on this reconstruction only" in note
    (run,) = report["runs"]
    assert run["error"] is None and run["divergence"] is None, run
    assert run["verdict"] == "reproduces the capture", run
    assert run["finalOutput"] == final and run["finalOutputEqual"] and run["toolCallsEqual"]
    assert [c["source"] for c in run["toolCalls"]] == ["recorded"]  # never a live call


@pytest.mark.parametrize("wire", [False, True], ids=["semantic", "wire"])
def test_replay_a_langgraph_capture(provider_server: ProviderServer, tmp_path: Path, wire: bool) -> None:
    data = tmp_path / "bb"
    rig = LangchainRig(data / "spool")
    rig.trust.save(data / "trust.toml")
    script = (Reply(tool_calls=(ToolCall("get_order", ARGUMENTS, id="call_1"),)), Reply(text=LG_FINAL))
    if wire:
        provider_server.script(*script)
        model = chat_openai(provider_server, rig.recorder)
    else:
        model = scripted_model(AIMessage("", tool_calls=[tool_call()]), AIMessage(LG_FINAL))
    run_graph(build_graph(model), rig.handler)
    (capture,) = rig.captures()
    assert rig.recorder.close(10)
    recorded = [sent.body for sent in provider_server.received]

    provider_server.script(*script)
    report = _consume_and_replay(data, capture["decisionId"], provider_server)
    received = [sent.body for sent in provider_server.received]
    if wire:
        # Wire fidelity: the recorded bytes of both model calls go out unchanged.
        assert report["fidelity"] == "wire" and "exact request bytes" in report["fidelityNote"]
        assert report["verified"] is True and all(check["ok"] for check in report["requestChecks"])
        (run,) = report["runs"]
        assert run["verdict"] == "reproduces the capture", run
        assert [c["source"] for c in run["toolCalls"]] == ["recorded"]
        assert len(recorded) == 2 and received == recorded
        return
    assert_semantic_report(report, final=LG_FINAL)
    first, second = (json.loads(body) for body in received)
    knowledge = capture["agentConfiguration"]["systemPromptText"]
    assert knowledge.startswith(SYSTEM) and all(d.page_content in knowledge for d in DOCUMENTS)
    assert first["messages"] == [
        {"role": "system", "content": knowledge},
        {"role": "user", "content": QUESTION},
    ]
    (tool_message,) = [m for m in second["messages"] if m["role"] == "tool"]
    assert json.loads(tool_message["content"]) == ORDER  # the recorded output, the tool never ran
    assert tool_message["content"] == capture["executionTrace"]["toolCalls"][0]["output"]

"""``producers.integrations.langchain.BlackboxCallbackHandler``: a real LangGraph agent into the Recorder.

The agent (``langgraph_agent.py``) retrieves documents with a langchain-core retriever, calls a chat
model and runs one tool through LangGraph's ``ToolNode``. With langchain-core's fake chat model the
run is one decision of fidelity ``semantic``: memory entries with the documents' ids and metadata as
provenance, the tool call, and each LangGraph node and step. With ``langchain-openai`` calling the
tests' local server through a ``wrap()``-ed ``openai`` client, the same decision has fidelity
``wire`` and its model calls hold exactly the bytes the server received — sync and async, and with
runs on several threads at once. A failing graph is a failure decision and still raises; a failing
callback never reaches the agent. Then consume → ``show --json`` → ``verify`` for both fidelities.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import uuid4

import openai
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.retrievers import BaseRetriever
from langchain_openai import ChatOpenAI
from langgraph_agent import (
    DOCUMENTS,
    ORDER,
    QUESTION,
    SYSTEM,
    build_graph,
    get_order,
    scripted_model,
    tool_call,
)
from provider_server import ProviderServer, Reply, ToolCall
from typer.testing import CliRunner

from producers.decision import current_decision
from producers.evidence import Signer, TrustStore, verify_capture
from producers.integrations import openai as openai_integration
from producers.integrations.langchain import BlackboxCallbackHandler
from producers.policy import CapturePolicy
from producers.recorder import CaptureFailure, Recorder
from producers.transports.spool.files import read_spool
from producers.transports.spool.sender import SpoolTransport
from schemas.codec import decode

SECRET = "sk-test-SECRET-langchain-7"
ARGUMENTS = '{"order_id" : "A1"}'  # as a model emits it: not what json.dumps writes
FINAL = "Order A1 shipped with DHL."
STEPS = [(1, "retrieve"), (2, "agent"), (3, "tools"), (4, "agent")]


class Rig:
    def __init__(self, spool: Path) -> None:
        signer = Signer(Ed25519PrivateKey.generate(), name="did:test:langchain")
        self.spool = spool
        self.trust = TrustStore()
        self.trust.add(signer.public_raw, not_before=datetime(2000, 1, 1, tzinfo=UTC))
        self.failures: list[CaptureFailure] = []
        self.recorder = Recorder(
            agent_id="agt_langgraph",
            transport=SpoolTransport(spool, linger_ms=5),
            signer=signer,
            policy=CapturePolicy(sample_one_in=1),  # every routine decision in full: content is compared
            on_error=self.failures.append,
        )
        self.handler = BlackboxCallbackHandler(self.recorder)

    def captures(self) -> list[dict[str, Any]]:
        assert self.recorder.flush(10)
        return [decode(record.value).value for record in read_spool(self.spool)]


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    made = Rig(tmp_path / "spool")
    yield made
    made.recorder.close(5)


def chat_openai(server: ProviderServer, recorder: Recorder) -> Any:
    """langchain-openai's ChatOpenAI on wrapped openai clients (sync and async) talking to ``server``."""
    sync = openai_integration.wrap(openai.OpenAI(api_key=SECRET, base_url=server.openai_base_url), recorder)
    asynchronous = openai_integration.wrap(
        openai.AsyncOpenAI(api_key=SECRET, base_url=server.openai_base_url), recorder
    )
    llm = ChatOpenAI(
        model="gpt-test",
        temperature=0.2,
        seed=7,
        api_key=SECRET,
        client=sync.chat.completions,
        root_client=sync,
        async_client=asynchronous.chat.completions,
        root_async_client=asynchronous,
    )
    return llm.bind_tools([get_order])


def run(
    graph: Any, handler: BlackboxCallbackHandler, *, asynchronous: bool = False, question: str = QUESTION
) -> Any:
    inputs = {"messages": [HumanMessage(question)]}
    config: Any = {"callbacks": [handler]}
    if asynchronous:
        return asyncio.run(graph.ainvoke(inputs, config=config))
    return graph.invoke(inputs, config=config)


def steps(capture: dict[str, Any]) -> list[tuple[int, str]]:
    return [(s["step"], s["node"]) for s in capture["input"]["requestPayload"]["langgraph"]]


def assert_memory_and_steps(capture: dict[str, Any]) -> None:
    """What only the callbacks know, whatever the fidelity: the working set and the graph's steps."""
    entries = capture["memoryState"]["workingSetEntries"]
    by_id = {e["entryId"]: e for e in entries}
    assert set(by_id) == {d.id for d in DOCUMENTS}
    refunds, shipping = by_id["kb-refunds"], by_id["kb-shipping"]
    assert refunds["renderedContent"] == DOCUMENTS[0].page_content
    assert refunds["provenance"] == {"writerId": "ops-team", "writtenAt": "2026-01-05", "sourceType": None}
    assert shipping["provenance"] == {
        "writerId": "kb/shipping.md",
        "writtenAt": None,
        "sourceType": "kb_article",
    }
    assert {e["retrievalMethod"] for e in entries} == {"vectorstore"}
    assert [e["contextPosition"] for e in entries] == [0, 1]
    assert steps(capture) == STEPS
    payload = capture["input"]["requestPayload"]
    assert payload["inputs"]["messages"][0]["content"] == QUESTION
    (retrieval,) = payload["langgraph"][0]["runs"]
    assert retrieval["kind"] == "retriever"
    listed = {m["entryId"]: m["metadata"] for m in retrieval["memory"]}
    assert listed == {d.id: d.metadata for d in DOCUMENTS}  # the full metadata, lang included
    kinds = [[r["kind"] for r in s["runs"]] for s in payload["langgraph"]]
    assert kinds == [["retriever"], ["chat_model"], ["tool"], ["chat_model"]]
    assert payload["langgraph"][2]["runs"][0] == {
        "kind": "tool",
        "name": "get_order",
        "toolCall": 1,
        "toolCallId": "call_1",
    }
    assert [s["runs"][0].get("modelCall") for s in payload["langgraph"] if s["node"] == "agent"] == [1, 2]


def test_a_langgraph_agent_with_a_fake_model_is_one_semantic_decision(rig: Rig) -> None:
    model = scripted_model(AIMessage("", tool_calls=[tool_call()]), AIMessage(FINAL))
    result = run(build_graph(model), rig.handler)
    assert result["messages"][-1].content == FINAL
    assert current_decision() is None  # the decision was current for the run only

    (capture,) = rig.captures()
    assert rig.failures == []
    assert capture["fidelity"] == "semantic"
    assert capture["executionTrace"]["modelCalls"] == []
    assert_memory_and_steps(capture)
    (call,) = capture["executionTrace"]["toolCalls"]
    assert call["sequence"] == 1 and call["toolName"] == "get_order"
    assert call["input"] == {"order_id": "A1"}  # as the tool received it
    assert json.loads(call["output"]) == ORDER and call["errorRef"] is None
    assert capture["executionTrace"]["finalOutputText"] == FINAL
    assert capture["outcome"]["status"] == "unknown"  # a run that ends is not judged

    config = capture["agentConfiguration"]
    assert config["modelIdentifier"] == "GenericFakeChatModel"  # it names no model: its own name
    entries = capture["memoryState"]["workingSetEntries"]
    knowledge = "\n".join(e["renderedContent"] for e in entries)  # in the order retrieved
    assert config["systemPromptText"] == SYSTEM + knowledge
    rendered = capture["renderedContext"]
    assert rendered["format"] == "openai.chat.messages+json"
    assert json.loads(rendered["text"]) == [
        {"role": "system", "content": SYSTEM + knowledge},
        {"role": "user", "content": QUESTION},
    ]
    body = rendered["text"].encode("utf-8")
    spans = {s["part"]: s for s in rendered["spans"]}
    assert set(spans) == {"system_prompt", "memory:kb-refunds", "memory:kb-shipping"}
    for document in DOCUMENTS:
        span = spans[f"memory:{document.id}"]
        assert json.loads(b'"' + body[span["start"] : span["end"]] + b'"') == document.page_content
    verify_capture(capture, rig.trust)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_with_a_wrapped_openai_client_the_same_decision_has_wire_fidelity(
    rig: Rig, provider_server: ProviderServer, asynchronous: bool
) -> None:
    provider_server.script(
        Reply(tool_calls=(ToolCall("get_order", ARGUMENTS, id="call_1"),)), Reply(text=FINAL)
    )
    result = run(
        build_graph(chat_openai(provider_server, rig.recorder)), rig.handler, asynchronous=asynchronous
    )
    assert result["messages"][-1].content == FINAL

    (capture,) = rig.captures()  # one decision: the model calls joined it, none went drop-in
    assert rig.failures == []
    assert capture["fidelity"] == "wire"
    received = provider_server.received
    calls = capture["executionTrace"]["modelCalls"]
    assert len(calls) == len(received) == 2
    for call, seen in zip(calls, received, strict=True):
        assert call["requestBody"].encode("utf-8") == seen.body
        assert {"memory:kb-refunds", "memory:kb-shipping", "system_prompt"} <= {
            s["part"] for s in call["spans"]
        }
    assert_memory_and_steps(capture)
    (call,) = capture["executionTrace"]["toolCalls"]
    assert call["input"] == ARGUMENTS  # the wire's own: as the API returned it
    assert json.loads(call["output"]) == ORDER
    assert capture["executionTrace"]["finalOutputText"] == FINAL
    config = capture["agentConfiguration"]
    assert config["modelIdentifier"] == "gpt-test"
    assert config["samplingParameters"]["temperature"] == 0.2
    assert capture["renderedContext"]["text"].encode("utf-8") == received[0].body
    assert SECRET not in json.dumps(capture)
    verify_capture(capture, rig.trust)


def test_langchain_openai_without_the_wrapper_is_semantic_with_tools_and_sampling(
    rig: Rig, provider_server: ProviderServer
) -> None:
    provider_server.script(
        Reply(tool_calls=(ToolCall("get_order", ARGUMENTS, id="call_1"),)), Reply(text=FINAL)
    )
    llm = ChatOpenAI(
        model="gpt-test", temperature=0.2, seed=7, api_key=SECRET, base_url=provider_server.openai_base_url
    )
    run(build_graph(llm.bind_tools([get_order])), rig.handler)

    (capture,) = rig.captures()
    assert rig.failures == []
    assert capture["fidelity"] == "semantic" and capture["executionTrace"]["modelCalls"] == []
    assert_memory_and_steps(capture)
    first = json.loads(provider_server.received[0].body)
    config = capture["agentConfiguration"]
    assert config["modelIdentifier"] == "gpt-test"
    assert config["modelVersion"] == "gpt-test"  # the model that answered
    assert config["toolSchemaJson"] == first["tools"]
    assert {k: v for k, v in config["samplingParameters"].items() if k in ("temperature", "seed")} == {
        "temperature": 0.2,
        "seed": 7,
    }
    assert json.loads(capture["renderedContext"]["text"]) == first["messages"]  # the same messages
    (call,) = capture["executionTrace"]["toolCalls"]
    assert call["input"] == {"order_id": "A1"}  # what the tool received: parsed by LangChain
    assert capture["executionTrace"]["stopReason"] == "end_turn"
    assert SECRET not in json.dumps(capture)
    verify_capture(capture, rig.trust)


def test_concurrent_runs_on_threads_keep_their_own_decisions_and_model_calls(
    rig: Rig, provider_server: ProviderServer
) -> None:
    provider_server.default_reply = Reply(text=FINAL)
    graph = build_graph(chat_openai(provider_server, rig.recorder))
    questions = [f"Where is order A{i}?" for i in range(4)]
    threads = [
        threading.Thread(target=run, args=(graph, rig.handler), kwargs={"question": q}) for q in questions
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    captures = rig.captures()
    assert len(captures) == len(questions) and rig.failures == []
    for capture in captures:
        assert capture["fidelity"] == "wire"
        question = capture["input"]["requestPayload"]["inputs"]["messages"][0]["content"]
        (call,) = capture["executionTrace"]["modelCalls"]
        assert json.loads(call["requestBody"])["messages"][-1]["content"] == question
    assert (
        sorted(c["input"]["requestPayload"]["inputs"]["messages"][0]["content"] for c in captures)
        == questions
    )


def test_parallel_tool_calls_are_recorded_in_the_order_they_started(rig: Rig) -> None:
    calls = [tool_call("call_1", "A1"), tool_call("call_2", "B2")]
    model = scripted_model(AIMessage("", tool_calls=calls), AIMessage(FINAL))
    run(build_graph(model), rig.handler)  # ToolNode runs the two calls on executor threads

    (capture,) = rig.captures()
    recorded = capture["executionTrace"]["toolCalls"]
    assert [c["sequence"] for c in recorded] == [1, 2]
    assert sorted(c["input"]["order_id"] for c in recorded) == ["A1", "B2"]
    (tools,) = [s for s in capture["input"]["requestPayload"]["langgraph"] if s["node"] == "tools"]
    assert sorted(r["toolCallId"] for r in tools["runs"]) == ["call_1", "call_2"]


def test_a_failing_graph_is_a_failure_decision_and_the_error_still_reaches_the_agent(rig: Rig) -> None:
    model = scripted_model()  # no reply left: the model raises
    with pytest.raises(Exception) as raised:
        run(build_graph(model), rig.handler)
    assert current_decision() is None

    (capture,) = rig.captures()
    assert capture["outcome"]["status"] == "failure"
    assert type(raised.value).__name__ in capture["outcome"]["reason"]
    assert capture["executionTrace"]["stopReason"] == "error"
    assert steps(capture) == [(1, "retrieve"), (2, "agent")]
    verify_capture(capture, rig.trust)


class ScoredRetriever(BaseRetriever):
    """A retriever over in-memory documents that states a score in each document's metadata."""

    documents: list[Document]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return self.documents


def test_a_top_level_retriever_run_gives_scores_and_content_addressed_ids(rig: Rig) -> None:
    retriever = ScoredRetriever(
        documents=[
            Document(
                page_content="no id here",
                metadata={"score": 0.91, "written_at": datetime(2026, 3, 1, tzinfo=UTC)},
            ),
            Document(page_content="nor here", metadata={"relevance_score": 0.5, "tier": "warm"}),
        ]
    )
    retriever.invoke("refunds", config={"callbacks": [rig.handler]})

    (capture,) = rig.captures()
    assert rig.failures == [] or all(f.partial for f in rig.failures)
    first, second = capture["memoryState"]["workingSetEntries"]
    assert first["entryId"].startswith("sha256:") and len(first["entryId"]) == len("sha256:") + 16
    assert first["retrievalScore"] == 0.91 and second["retrievalScore"] == 0.5
    assert first["provenance"]["writtenAt"] == "2026-03-01T00:00:00+00:00"
    assert (first["tier"], second["tier"]) == ("retrieved", "warm")
    assert capture["input"]["requestPayload"] == {"inputs": {"query": "refunds"}}
    verify_capture(capture, rig.trust)


def test_a_callback_that_fails_never_reaches_the_agent_and_is_named(rig: Rig) -> None:
    handler = rig.handler
    root, child = uuid4(), uuid4()
    handler.on_chain_start(None, {"q": "x"}, run_id=root)
    handler.on_retriever_start(None, "q", run_id=child, parent_run_id=root)
    handler.on_retriever_end(None, run_id=child, parent_run_id=root)  # type: ignore[arg-type]  # not a list
    handler.on_tool_end("orphan", run_id=uuid4())  # a run it never saw: nothing to record
    handler.on_llm_end(object(), run_id=uuid4())
    handler.on_chain_end({"output": "done"}, run_id=root)

    (capture,) = rig.captures()
    assert capture["executionTrace"]["finalOutputText"] == "done"
    (failure,) = rig.failures
    assert failure.partial and "langchain on_retriever_end" in str(failure.error)
    assert "langchain on_retriever_end" in capture["outcome"]["reason"]
    verify_capture(capture, rig.trust)


def test_missing_langchain_core_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['langchain_core'] = None\n"
        "try:\n    import producers.integrations.langchain\n"
        "except ImportError as exc:\n    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "pip install 'agent-blackbox[langchain]'" in out, out


@pytest.mark.parametrize("wire", [False, True], ids=["semantic", "wire"])
def test_consume_show_and_verify_a_langgraph_capture(
    provider_server: ProviderServer, tmp_path: Path, wire: bool
) -> None:
    from consumers.cli import app

    data = tmp_path / "bb"
    made = Rig(data / "spool")
    made.trust.save(data / "trust.toml")
    if wire:
        provider_server.script(
            Reply(tool_calls=(ToolCall("get_order", ARGUMENTS, id="call_1"),)), Reply(text=FINAL)
        )
        model = chat_openai(provider_server, made.recorder)
    else:
        model = scripted_model(AIMessage("", tool_calls=[tool_call()]), AIMessage(FINAL))
    run(build_graph(model), made.handler)
    (capture,) = made.captures()
    assert made.recorder.close(10)

    env = {"BLACKBOX_DATA_DIR": str(data), "BLACKBOX_TRANSPORT": "spool", "BLACKBOX_BLOB": "local"}
    runner = CliRunner()
    consumed = runner.invoke(app, ["consume", "--drain", "--max-wait", "0.1"], env=env)
    assert consumed.exit_code == 0 and "indexed=1" in consumed.output, consumed.output
    shown = runner.invoke(app, ["show", capture["decisionId"], "--json"], env=env)
    assert shown.exit_code == 0, shown.output
    view = json.loads(shown.stdout)
    fidelity = "wire" if wire else "semantic"
    assert view["capture"]["fidelity"] == view["stored"]["fidelity"] == fidelity
    assert steps(view["capture"]) == STEPS
    assert {e["entryId"] for e in view["capture"]["memoryState"]["workingSetEntries"]} == {
        d.id for d in DOCUMENTS
    }
    verified = runner.invoke(app, ["verify", capture["decisionId"]], env=env)
    assert verified.exit_code == 0, verified.output
    assert SECRET not in shown.stdout

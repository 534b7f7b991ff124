"""A small LangGraph agent built from the real packages: retrieve → agent ⇄ tools.

``retrieve`` asks a langchain-core retriever over in-memory documents (with ids and metadata) for
the user's question; ``agent`` puts the documents in a system message and calls the chat model;
``tools`` (LangGraph's ``ToolNode``) runs the one tool, ``get_order``, when the model asks for it.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, TypedDict

from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, SystemMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import tool
from langchain_core.vectorstores import InMemoryVectorStore
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition

SYSTEM = "You answer order questions. Use the knowledge below.\n"
QUESTION = "Where is order A1? I was told refunds take 30 days."
DOCUMENTS = (
    Document(
        id="kb-refunds",
        page_content="Refunds are paid within 30 days — café policy ☕.",
        metadata={"source": "kb/refunds.md", "author": "ops-team", "created_at": "2026-01-05", "lang": "en"},
    ),
    Document(
        id="kb-shipping",
        page_content="Orders ship within 3 days of payment.",
        metadata={"source": "kb/shipping.md", "source_type": "kb_article"},
    ),
)
ORDER = {"order_id": "A1", "status": "shipped", "carrier": "DHL"}


@tool
def get_order(order_id: str) -> str:
    """Look up an order by its id."""
    return json.dumps({**ORDER, "order_id": order_id})


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    documents: list[Document]


def retriever() -> Any:
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
    store.add_documents(list(DOCUMENTS))
    return store.as_retriever(search_kwargs={"k": len(DOCUMENTS)})


def build_graph(model: Any) -> Any:
    """The compiled graph; ``model`` is a chat model (with the tool bound, if it needs binding)."""
    search = retriever()

    def retrieve(state: State) -> dict[str, Any]:
        return {"documents": search.invoke(state["messages"][-1].content)}

    def agent(state: State) -> dict[str, Any]:
        knowledge = "\n".join(d.page_content for d in state["documents"])
        return {"messages": [model.invoke([SystemMessage(SYSTEM + knowledge), *state["messages"]])]}

    async def aagent(state: State) -> dict[str, Any]:
        knowledge = "\n".join(d.page_content for d in state["documents"])
        return {"messages": [await model.ainvoke([SystemMessage(SYSTEM + knowledge), *state["messages"]])]}

    graph = StateGraph(State)
    graph.add_node("retrieve", retrieve)
    graph.add_node("agent", RunnableLambda(agent, afunc=aagent))  # ainvoke awaits the model
    graph.add_node("tools", ToolNode([get_order]))
    graph.add_edge(START, "retrieve")
    graph.add_edge("retrieve", "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile()


def tool_call(call_id: str = "call_1", order_id: str = "A1") -> dict[str, Any]:
    return {"name": "get_order", "args": {"order_id": order_id}, "id": call_id, "type": "tool_call"}


def scripted_model(*replies: AIMessage) -> BaseChatModel:
    """langchain-core's own fake chat model: answers the given messages in order."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    return GenericFakeChatModel(messages=iter(replies))

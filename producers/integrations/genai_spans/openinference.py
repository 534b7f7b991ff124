"""Spans written in the OpenInference conventions (Arize Phoenix, ``openinference-instrumentation-*``).

OpenInference flattens lists into indexed attributes: ``llm.input_messages.<i>.message.role`` /
``.content`` / ``.contents.<j>.message_content.{type,text,image.image.url}`` /
``.tool_calls.<k>.tool_call.{id,function.name,function.arguments}`` / ``.tool_call_id``, the same
under ``llm.output_messages``; ``llm.invocation_parameters`` is one JSON string; ``llm.tools.<i>.
tool.json_schema`` one JSON string per tool; retrieved documents are ``retrieval.documents.<i>.
document.{id,score,content,metadata}``. The span kind is ``openinference.span.kind`` (``AGENT``,
``LLM``, ``TOOL``, ``RETRIEVER``, ...); tools carry ``tool.name`` with ``input.value`` /
``output.value``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from producers.integrations.genai_spans.reads import (
    AgentRead,
    ChatRead,
    DocumentRead,
    RequestedTool,
    ToolRead,
    chat_tool,
    document_read,
    first_system_text,
)
from producers.integrations.genai_spans.span import (
    ABSENT,
    Span,
    json_attribute,
    number_attribute,
    text_attribute,
)

__all__ = ["read_agent", "read_chat", "read_documents", "read_tool"]

_NOT_SAMPLING = frozenset({"model", "messages", "tools", "functions", "stream", "stream_options"})


def indexed(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """``prefix.<i>.rest = value`` attributes as one ``{rest: value}`` dict per index, in index order."""
    groups: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if key.startswith(prefix):
            index, _, rest = key[len(prefix) :].partition(".")
            if index.isdigit() and rest:
                groups.setdefault(int(index), {})[rest] = value
    return [groups[i] for i in sorted(groups)]


def _calls(fields: Mapping[str, Any]) -> list[RequestedTool]:
    return [
        RequestedTool(
            id=call.get("tool_call.id"),
            name=call.get("tool_call.function.name"),
            arguments=call.get("tool_call.function.arguments"),
        )
        for call in indexed(fields, "message.tool_calls.")
    ]


def _message(fields: Mapping[str, Any], at: str, problems: list[str]) -> dict[str, Any] | None:
    role = fields.get("message.role")
    if not isinstance(role, str):
        problems.append(f"{at} has no message.role; left out")
        return None
    chat: dict[str, Any] = {"role": role}
    if isinstance(fields.get("message.name"), str):
        chat["name"] = fields["message.name"]
    if isinstance(fields.get("message.tool_call_id"), str):
        chat["tool_call_id"] = fields["message.tool_call_id"]
    content: Any = fields.get("message.content")
    contents = indexed(fields, "message.contents.")
    if content is None and contents:
        parts: list[dict[str, Any]] = []
        for index, part in enumerate(contents):
            kind = part.get("message_content.type")
            if kind == "text" and isinstance(part.get("message_content.text"), str):
                parts.append({"type": "text", "text": part["message_content.text"]})
            elif kind == "image" and isinstance(part.get("message_content.image.image.url"), str):
                parts.append(
                    {"type": "image_url", "image_url": {"url": part["message_content.image.image.url"]}}
                )
            else:
                problems.append(f"{at}.contents[{index}] (type {kind!r}) has no chat rendering; left out")
        content = parts
    calls = _calls(fields)
    chat["content"] = content
    if calls:
        chat["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": call.arguments if call.arguments is not None else "",
                },
            }
            for call in calls
        ]
    return chat


def _messages(attrs: Mapping[str, Any], prefix: str, problems: list[str]) -> list[dict[str, Any]] | None:
    found = indexed(attrs, prefix)
    if not found:
        return None
    out = []
    for index, fields in enumerate(found):
        message = _message(fields, f"{prefix}{index}", problems)
        if message is not None:
            out.append(message)
    return out


def _sampling(attrs: Mapping[str, Any], problems: list[str]) -> dict[str, Any]:
    parameters = json_attribute(attrs, "llm.invocation_parameters", problems)
    if parameters is ABSENT:
        return {}
    if not isinstance(parameters, dict):
        problems.append("span attribute llm.invocation_parameters is not a JSON object; read as absent")
        return {}
    out = {key: value for key, value in parameters.items() if key not in _NOT_SAMPLING}
    if isinstance(out.get("stop"), str):
        out["stop"] = [out["stop"]]
    return out


def _tools(attrs: Mapping[str, Any], problems: list[str]) -> tuple[Any, ...] | None:
    found = indexed(attrs, "llm.tools.")
    if not found:
        return None
    tools = []
    for index, tool in enumerate(found):
        schema = json_attribute(tool, "tool.json_schema", problems)
        if schema is ABSENT:
            problems.append(f"llm.tools.{index} has no readable tool.json_schema; left out")
            continue
        tools.append(chat_tool(schema))
    return tuple(tools)


def read_chat(span: Span) -> ChatRead:
    attrs = span.attributes
    problems: list[str] = []
    messages = _messages(attrs, "llm.input_messages.", problems)
    outputs = _messages(attrs, "llm.output_messages.", problems) or []
    system_prompt = first_system_text(messages or ())
    output_texts = [m["content"] for m in outputs if isinstance(m.get("content"), str)]
    tokens = number_attribute(attrs, "llm.token_count.prompt")
    return ChatRead(
        span=span,
        provider=text_attribute(attrs, "llm.provider", "llm.system"),
        model=text_attribute(attrs, "llm.model_name"),
        response_model=None,
        endpoint=None,
        sampling=_sampling(attrs, problems),
        system_prompt=system_prompt,
        messages=None if messages is None else tuple(messages),
        tools=_tools(attrs, problems),
        tool_results=tuple(
            (m.get("tool_call_id"), m.get("content")) for m in messages or () if m.get("role") == "tool"
        ),
        output_text="".join(output_texts) if output_texts else None,
        reasoning=(),
        requested=tuple(call for fields in indexed(attrs, "llm.output_messages.") for call in _calls(fields)),
        finish_reason=None,
        input_tokens=tokens if isinstance(tokens, int) else None,
        problems=tuple(problems),
    )


def _value(attrs: Mapping[str, Any], key: str) -> Any:
    """``input.value`` / ``output.value``: JSON when its ``.mime_type`` says so, else the text."""
    value = attrs.get(f"{key}.value")
    if isinstance(value, str) and attrs.get(f"{key}.mime_type") == "application/json":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def read_agent(span: Span) -> AgentRead:
    attrs = span.attributes
    output = attrs.get("output.value")
    return AgentRead(
        span=span,
        agent_id=None,
        agent_name=text_attribute(attrs, "agent.name"),
        conversation_id=text_attribute(attrs, "session.id"),
        user_id=text_attribute(attrs, "user.id"),
        request=_value(attrs, "input"),
        output_text=output if isinstance(output, str) else None,
        model=read_chat(span),
    )


def read_tool(span: Span) -> ToolRead:
    attrs = span.attributes
    return ToolRead(
        span=span,
        name=text_attribute(attrs, "tool.name"),
        call_id=text_attribute(attrs, "tool_call.id"),
        arguments=attrs.get("input.value"),
        result=attrs.get("output.value"),
        error=span.error,
    )


def read_documents(span: Span, problems: list[str]) -> list[DocumentRead]:
    out = []
    for document in indexed(span.attributes, "retrieval.documents."):
        doc_id, score, content = (
            document.get("document.id"),
            document.get("document.score"),
            document.get("document.content"),
        )
        out.append(document_read(span, doc_id=doc_id, score=score, content=content))
    return out

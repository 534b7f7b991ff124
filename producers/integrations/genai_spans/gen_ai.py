"""Spans written in the official OpenTelemetry GenAI conventions (``gen_ai.*``, status Development).

Content attributes are JSON (a string on spans from SDKs without structured attributes, structured
from OTLP senders that have them): ``gen_ai.system_instructions`` (parts), ``gen_ai.input.messages``
/ ``gen_ai.output.messages`` (``{"role", "parts": [...]}``; parts ``text``, ``tool_call``,
``tool_call_response``, ``reasoning``, ``uri``, ``blob`` ...), ``gen_ai.tool.definitions``,
``gen_ai.retrieval.documents`` (``{"id", "score"}``). The official instrumentations set them only
with ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=span_only`` (or ``span_and_event``);
without it the reads below say None. ``execute_tool`` spans carry ``gen_ai.tool.name`` and
``gen_ai.tool.call.{id,arguments,result}`` (the last two opt-in content, kept as carried).
"""

from __future__ import annotations

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
    dumps,
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

SAMPLING: Mapping[str, str] = {
    "gen_ai.request.temperature": "temperature",
    "gen_ai.request.top_p": "top_p",
    "gen_ai.request.max_tokens": "max_tokens",
    "gen_ai.request.stop_sequences": "stop",
    "gen_ai.request.seed": "seed",
    "gen_ai.request.presence_penalty": "presence_penalty",
    "gen_ai.request.frequency_penalty": "frequency_penalty",
    "gen_ai.request.top_k": "top_k",
    "gen_ai.request.choice.count": "n",
}
"""Request attributes → the capture's sampling keys (the Chat Completions names)."""


def _sampling(attrs: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, name in SAMPLING.items():
        if key in attrs and attrs[key] is not None:
            value = attrs[key]
            out[name] = list(value) if isinstance(value, list | tuple) else value
    return out


def _endpoint(attrs: Mapping[str, Any]) -> str | None:
    address = text_attribute(attrs, "server.address")
    port = number_attribute(attrs, "server.port")
    if address is None:
        return None
    return address if port is None else f"{address}:{port}"


def _texts(parts: Any, *, kind: str = "text") -> list[str]:
    if not isinstance(parts, list):
        return []
    return [
        p["content"]
        for p in parts
        if isinstance(p, Mapping) and p.get("type") == kind and isinstance(p.get("content"), str)
    ]


def _media(part: Mapping[str, Any]) -> dict[str, Any] | None:
    """An image part as a chat content part (the only media Chat Completions takes inline by URL)."""
    if part.get("modality") != "image":
        return None
    if part.get("type") == "uri" and isinstance(part.get("uri"), str):
        return {"type": "image_url", "image_url": {"url": part["uri"]}}
    if part.get("type") == "blob" and isinstance(part.get("content"), str):
        mime = part.get("mime_type") or "application/octet-stream"
        return {"type": "image_url", "image_url": {"url": f"data:{mime};base64,{part['content']}"}}
    return None


def _message(message: Any, at: str, problems: list[str]) -> list[dict[str, Any]]:
    """One convention message as chat messages (a tool response part is a message of its own)."""
    if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
        problems.append(f"{at} is not a message with a role; left out")
        return []
    content: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    answers: list[dict[str, Any]] = []
    for index, part in enumerate(message.get("parts") or ()):
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind == "text" and isinstance(part.get("content"), str):
            content.append({"type": "text", "text": part["content"]})
        elif kind == "tool_call":
            arguments = part.get("arguments")
            function = {"name": part.get("name"), "arguments": "" if arguments is None else dumps(arguments)}
            calls.append({"id": part.get("id"), "type": "function", "function": function})
        elif kind == "tool_call_response":
            result = part.get("response", part.get("result"))
            answers.append({"role": "tool", "tool_call_id": part.get("id"), "content": dumps(result)})
        elif isinstance(part, Mapping) and (media := _media(part)) is not None:
            content.append(media)
        else:
            problems.append(f"{at}.parts[{index}] (type {kind!r}) has no chat rendering; left out")
    out: list[dict[str, Any]] = []
    if content or calls:
        chat: dict[str, Any] = {"role": message["role"]}
        if isinstance(message.get("name"), str):
            chat["name"] = message["name"]
        if len(content) == 1 and content[0]["type"] == "text":
            chat["content"] = content[0]["text"]
        else:
            chat["content"] = content or None
        if calls:
            chat["tool_calls"] = calls
        out.append(chat)
    return out + answers


def _requested(messages: Any) -> tuple[RequestedTool, ...]:
    out = []
    for message in messages if isinstance(messages, list) else ():
        for part in message.get("parts") or () if isinstance(message, Mapping) else ():
            if isinstance(part, Mapping) and part.get("type") == "tool_call":
                out.append(
                    RequestedTool(id=part.get("id"), name=part.get("name"), arguments=part.get("arguments"))
                )
    return tuple(out)


def _results(messages: Any) -> tuple[tuple[str | None, Any], ...]:
    out = []
    for message in messages if isinstance(messages, list) else ():
        for part in message.get("parts") or () if isinstance(message, Mapping) else ():
            if isinstance(part, Mapping) and part.get("type") == "tool_call_response":
                out.append((part.get("id"), part.get("response", part.get("result"))))
    return tuple(out)


def _output(messages: Any, kind: str) -> list[str]:
    return [
        text
        for message in (messages if isinstance(messages, list) else ())
        if isinstance(message, Mapping)
        for text in _texts(message.get("parts"), kind=kind)
    ]


def read_chat(span: Span) -> ChatRead:
    """A model call (or an agent span's model-level attributes) in the official conventions."""
    attrs = span.attributes
    problems: list[str] = []
    instructions = json_attribute(attrs, "gen_ai.system_instructions", problems)
    inputs = json_attribute(attrs, "gen_ai.input.messages", problems)
    outputs = json_attribute(attrs, "gen_ai.output.messages", problems)
    definitions = json_attribute(attrs, "gen_ai.tool.definitions", problems)

    system_prompt: str | None = None
    messages: list[dict[str, Any]] | None = None
    if instructions is not ABSENT:
        texts = _texts(instructions)
        system_prompt = "\n".join(texts) if texts else None
    if inputs is not ABSENT:
        messages = []
        if system_prompt is not None:
            messages.append({"role": "system", "content": system_prompt})
        if isinstance(inputs, list):
            for index, message in enumerate(inputs):
                messages.extend(_message(message, f"gen_ai.input.messages[{index}]", problems))
        else:
            problems.append("span attribute gen_ai.input.messages is not a list; read as empty")
        if system_prompt is None:
            system_prompt = first_system_text(messages)
    tools: tuple[Any, ...] | None = None
    if isinstance(definitions, list):
        tools = tuple(chat_tool(d) for d in definitions)
    elif definitions is not ABSENT:
        problems.append("span attribute gen_ai.tool.definitions is not a list; read as absent")
    reasons = attrs.get("gen_ai.response.finish_reasons")
    output_texts = _output(outputs, "text") if outputs is not ABSENT else []
    tokens = number_attribute(attrs, "gen_ai.usage.input_tokens")
    return ChatRead(
        span=span,
        provider=text_attribute(attrs, "gen_ai.provider.name", "gen_ai.system"),
        model=text_attribute(attrs, "gen_ai.request.model"),
        response_model=text_attribute(attrs, "gen_ai.response.model"),
        endpoint=_endpoint(attrs),
        sampling=_sampling(attrs),
        system_prompt=system_prompt,
        messages=None if messages is None else tuple(messages),
        tools=tools,
        tool_results=_results(inputs) if inputs is not ABSENT else (),
        output_text="".join(output_texts) if output_texts else None,
        reasoning=tuple(_output(outputs, "reasoning")) if outputs is not ABSENT else (),
        requested=_requested(outputs) if outputs is not ABSENT else (),
        finish_reason=reasons[0] if isinstance(reasons, list | tuple) and reasons else None,
        input_tokens=tokens if isinstance(tokens, int) else None,
        problems=tuple(problems),
    )


def read_agent(span: Span) -> AgentRead:
    attrs = span.attributes
    problems: list[str] = []
    request = json_attribute(attrs, "gen_ai.input.messages", problems)
    model = read_chat(span)
    return AgentRead(
        span=span,
        agent_id=text_attribute(attrs, "gen_ai.agent.id"),
        agent_name=text_attribute(attrs, "gen_ai.agent.name"),
        conversation_id=text_attribute(attrs, "gen_ai.conversation.id"),
        user_id=text_attribute(attrs, "user.id", "enduser.id"),
        request=None if request is ABSENT else request,
        output_text=model.output_text,
        model=model,
    )


def read_tool(span: Span) -> ToolRead:
    attrs = span.attributes
    error = None
    if span.error is not None:
        error_type = text_attribute(attrs, "error.type")
        error = f"{error_type}: {span.error}" if error_type and error_type != span.error else span.error
    return ToolRead(
        span=span,
        name=text_attribute(attrs, "gen_ai.tool.name"),
        call_id=text_attribute(attrs, "gen_ai.tool.call.id"),
        arguments=attrs.get("gen_ai.tool.call.arguments"),
        result=attrs.get("gen_ai.tool.call.result"),
        error=error,
    )


def read_documents(span: Span, problems: list[str]) -> list[DocumentRead]:
    documents = json_attribute(span.attributes, "gen_ai.retrieval.documents", problems)
    if documents is ABSENT:
        return []
    if not isinstance(documents, list):
        problems.append("span attribute gen_ai.retrieval.documents is not a list; read as absent")
        return []
    out = []
    for document in documents:
        if not isinstance(document, Mapping):
            continue
        doc_id, score, content = document.get("id"), document.get("score"), document.get("content")
        out.append(document_read(span, doc_id=doc_id, score=score, content=content))
    return out

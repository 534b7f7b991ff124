"""The standard OpenAI tool-calling loop, written as an agent function over the sandbox handles.

model → ``tool_calls`` → each answered and appended as a role ``"tool"`` message → model → ...
until the model answers without tool calls. The number of model calls is bounded by the
sandboxed model handle (``max_model_calls``), which ends the run with stop reason ``max_steps``.
"""

from __future__ import annotations

from typing import Any

from consumers.replay.agent_hook import ReplayHandles
from producers.wire.openai_chat import parse_tool_calls, tool_message


def tool_calling_loop(handles: ReplayHandles) -> str | None:
    """Drive the captured conversation to its final answer; return the final assistant text."""
    messages: list[dict[str, Any]] = handles.model.initial_messages()
    while True:
        reply = handles.model.complete(messages)
        messages.append(reply)
        calls = parse_tool_calls(reply)
        if not calls:
            content = reply.get("content")
            return content if isinstance(content, str) else None
        for call in calls:
            output = handles.tools.call(str(call.name), call.arguments or "{}")
            messages.append(tool_message(call.id, output))

"""A scripted support model with a planted failure, speaking the OpenAI chat-completions format.

The model is a pure function of the request (plus a seeded generator when temperature > 0), so a
replay of a captured request reproduces the captured answer. The planted failure follows the
article: with system prompt v4.7 *and* a working set over 8 KB, a time-bounded question gets a
wrong refund (the whole balance instead of the disputed charge).
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

PROMPT_VERSION = re.compile(r"Policy version (v\d+\.\d+)")
TIME_BOUNDED = re.compile(r"\b(last week|yesterday|within \d+ days|this month)\b", re.IGNORECASE)
WORKING_SET_LIMIT = 8 * 1024


class ScriptedSupportModel:
    """Callable model; one seeded generator per instance, drawn from only when temperature > 0."""

    def __init__(self, *, seed: int = 0) -> None:
        self._rng = random.Random(seed)

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        temperature = float(request.get("temperature") or 0.0)
        return scripted_support_model(request, rng=self._rng if temperature > 0 else None)


def scripted_support_model(request: dict[str, Any], *, rng: random.Random | None = None) -> dict[str, Any]:
    """Answer one chat-completions request: look the customer up, check the balance, refund, reply."""
    messages = request["messages"]
    system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
    memory = messages[1]["content"] if len(messages) > 1 and messages[1]["role"] == "system" else ""
    user = next((m["content"] for m in messages if m["role"] == "user"), "")
    match = PROMPT_VERSION.search(system)
    version = match.group(1) if match else "unknown"
    customer_id = _customer_id(user)
    results = {
        m.get("name") or _tool_name(messages, m): json.loads(m["content"])
        for m in messages
        if m["role"] == "tool"
    }
    temperature = float(request.get("temperature") or 0.0)

    if "lookup_customer" not in results:
        return _tool_call(request, 1, "lookup_customer", {"customer_id": customer_id})
    if "get_balance" not in results:
        return _tool_call(request, 2, "get_balance", {"customer_id": customer_id})
    profile, balance = results["lookup_customer"], results["get_balance"]
    wants_refund = "refund" in user.lower()
    if wants_refund and "issue_refund" not in results:
        amount = float(profile.get("disputed_charge", 0.0))
        faulty = (
            version == "v4.7"
            and len(memory.encode("utf-8")) > WORKING_SET_LIMIT
            and TIME_BOUNDED.search(user) is not None
        )
        if faulty:
            amount = float(balance.get("balance", amount))
        if rng is not None and rng.random() < temperature * 0.5:
            amount = round(amount * 1.01, 2)  # sampling noise, only when temperature > 0
        return _tool_call(request, 3, "issue_refund", {"customer_id": customer_id, "amount": amount})
    if wants_refund:
        refund = results["issue_refund"]
        text = f"I have refunded ${refund.get('amount', 0):.2f} to {profile.get('name', customer_id)}."
    else:
        text = f"Your balance is ${balance.get('balance', 0):.2f}."
    return _final(request, text)


def _customer_id(text: str) -> str:
    match = re.search(r"cus_\d{4}", text)
    return match.group(0) if match else "cus_0000"


def _tool_name(messages: list[dict[str, Any]], tool_message: dict[str, Any]) -> str:
    call_id = tool_message.get("tool_call_id")
    for message in messages:
        for call in message.get("tool_calls") or ():
            if call["id"] == call_id:
                return str(call["function"]["name"])
    return ""


def _tool_call(request: dict[str, Any], n: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{n}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ],
    }
    return _completion(request, message, "tool_calls")


def _final(request: dict[str, Any], text: str) -> dict[str, Any]:
    return _completion(request, {"role": "assistant", "content": text}, "stop")


def _completion(request: dict[str, Any], message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "model": request.get("model", "acme-support"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }

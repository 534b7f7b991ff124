"""The one fake of the replay tests: a scripted support model, a function of the request.

It behaves like the agent's model in the incident: look the customer up, read the balance, refund
the disputed charge, answer. The planted failure: with system prompt version v4.7 *and* a working
set over 8 KB it refunds the whole balance instead (a wrong ``issue_refund`` amount). At
temperature > 0 it samples from a seeded generator (sometimes a slightly different amount).

Also here: the world the original run saw (customer data answering the tools), and the golden
capture builder shared by ``make_goldens.py`` and the benchmark.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Sequence
from typing import Any

from producers.context import render_chat_context
from producers.wire.openai_chat import tool_message_content

PROMPT_VERSION = re.compile(r"Policy version (v\d+\.\d+)")
WORKING_SET_LIMIT = 8 * 1024
MODEL_ID = "acme-support"
MODEL_VERSION = "2026-06-01"
CUSTOMER = {"customer_id": "cus_0042", "name": "Dana Smith", "disputed_charge": 120.0}
BALANCE = {"balance": 2480.5, "currency": "USD"}
USER_MESSAGE = "Hi, I'm cus_0042. I was charged twice last week - please refund the duplicate."
CAPTURED_AT = "2026-07-23T13:00:00.456Z"

TOOL_SCHEMA: dict[str, Any] = {
    "tools": [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": description,
                "parameters": {
                    "type": "object",
                    "properties": params,
                    "required": list(params),
                },
            },
        }
        for name, description, params in (
            ("lookup_customer", "Profile and disputed charge.", {"customer_id": {"type": "string"}}),
            ("get_balance", "Current balance.", {"customer_id": {"type": "string"}}),
            (
                "issue_refund",
                "Refund an amount. Irreversible.",
                {"customer_id": {"type": "string"}, "amount": {"type": "number"}},
            ),
        )
    ]
}


def system_prompt(version: str) -> str:
    return (
        "You are the support agent for Acme Bank.\r\n"
        f"Policy version {version}: refund only the disputed charge, within 30 days.\n"
    )


def memory_entries(count: int = 10, size: int = 1000) -> list[tuple[str, str]]:
    """``count`` CRM notes of about ``size`` bytes each (10 x 1000 B > the 8 KB limit)."""
    body = "called about card; confirmed address; asked about fees; 日本語 ✓; "
    return [(f"mem_{i:02d}", (f"[note {i}] " + body * 30)[:size]) for i in range(count)]


class ScriptedModel:
    """Callable chat-completions model; one seeded generator per instance (used at temperature > 0)."""

    def __init__(self, *, seed: int = 1234, served: Sequence[str] = (MODEL_ID,)) -> None:
        self._rng = random.Random(seed)
        self.served = set(served)

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        temperature = float(request.get("temperature") or 0.0)
        return answer(request, rng=self._rng if temperature > 0 else None)


def answer(request: dict[str, Any], *, rng: random.Random | None = None) -> dict[str, Any]:
    messages = request["messages"]
    system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
    memory = messages[1]["content"] if len(messages) > 1 and messages[1]["role"] == "system" else ""
    user = next((m["content"] for m in messages if m["role"] == "user"), "")
    match = PROMPT_VERSION.search(system)
    version = match.group(1) if match else "unknown"
    names = {c["id"]: c["function"]["name"] for m in messages for c in m.get("tool_calls") or ()}
    results = {
        names.get(m.get("tool_call_id"), ""): json.loads(m["content"])
        for m in messages
        if m["role"] == "tool"
    }
    found = re.search(r"cus_\d{4}", user)
    customer_id = found.group(0) if found else "cus_0000"
    if "lookup_customer" not in results:
        return _tool_call(request, 1, "lookup_customer", {"customer_id": customer_id})
    if "get_balance" not in results:
        return _tool_call(request, 2, "get_balance", {"customer_id": customer_id})
    if "issue_refund" not in results:
        amount = float(results["lookup_customer"]["disputed_charge"])
        if version == "v4.7" and len(memory.encode("utf-8")) > WORKING_SET_LIMIT:
            amount = float(results["get_balance"]["balance"])  # the planted failure
        temperature = float(request.get("temperature") or 0.0)
        if rng is not None and rng.random() < min(0.9, temperature * 0.5):
            amount = round(amount * 1.01, 2)
        return _tool_call(request, 3, "issue_refund", {"customer_id": customer_id, "amount": amount})
    refund = results["issue_refund"]
    return _completion(
        request,
        {
            "role": "assistant",
            "content": f"I have refunded ${refund['amount']:.2f} (refund {refund['refund_id']}).",
        },
        "stop",
    )


def _tool_call(request: dict[str, Any], n: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    call = {
        "id": f"call_{n}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments)},
    }
    return _completion(request, {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls")


def _completion(request: dict[str, Any], message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "model": request.get("model"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }


def world_tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The live tools as they answered on the day of the incident."""
    if name == "lookup_customer":
        return dict(CUSTOMER)
    if name == "get_balance":
        return dict(BALANCE)
    if name == "issue_refund":
        return {"refund_id": "rf_000917", "amount": arguments["amount"], "status": "ok"}
    return {"error": f"unknown tool {name}"}


def record_decision(
    *,
    decision_id: str,
    version: str = "v4.7",
    entries: Sequence[tuple[str, str]] | None = None,
    model: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    temperature: float = 0.0,
    keep_calls: int | None = None,
    final_override: str | None = None,
    agent_id: str = "agt_support_1",
    scope: str = "operator",
    external_endpoint: str = "http://127.0.0.1:9/ledger",
) -> dict[str, Any]:
    """Run the agent once against the world and record the unsealed capture (JSON form).

    ``keep_calls`` truncates the recorded tool calls (to build a recording that lacks a call the
    model makes); ``final_override`` replaces the recorded final output.
    """
    entries = list(entries if entries is not None else memory_entries())
    prompt = system_prompt(version)
    rendered = render_chat_context(system_prompt=prompt, memory=entries, user_message=USER_MESSAGE)
    sampling = {"temperature": temperature, "top_p": 1.0, "max_tokens": 512, "stop": ["</done>"], "seed": 7}
    model = model or ScriptedModel()
    request = {
        "model": MODEL_ID,
        "messages": json.loads(rendered.text),
        "tools": TOOL_SCHEMA["tools"],
        **sampling,
    }
    calls: list[dict[str, Any]] = []
    final, stop = None, "end_turn"
    for _ in range(8):
        reply = model(request)["choices"][0]["message"]
        request["messages"].append(reply)
        if not reply.get("tool_calls"):
            final = reply["content"]
            break
        for call in reply["tool_calls"]:
            arguments = json.loads(call["function"]["arguments"])
            output = world_tool(call["function"]["name"], arguments)
            calls.append(
                {
                    "sequence": len(calls) + 1,
                    "toolName": call["function"]["name"],
                    "input": arguments,
                    "inputHash": None,
                    "output": output,
                    "outputHash": None,
                    "latencyMs": 40 + 10 * len(calls),
                    "errorRef": None,
                }
            )
            request["messages"].append(
                {"role": "tool", "tool_call_id": call["id"], "content": tool_message_content(output)}
            )
    if keep_calls is not None:
        calls = calls[:keep_calls]
    if final_override is not None:
        final = final_override
    wrong = any(
        c["toolName"] == "issue_refund" and c["input"]["amount"] != CUSTOMER["disputed_charge"] for c in calls
    )
    return {
        "version": "replay/v1",
        "decisionId": decision_id,
        "agentId": agent_id,
        "runtimeId": "rt_eu1_7",
        "capturedAt": CAPTURED_AT,
        "captureLevel": "full",
        "consequential": {"flagged": True, "reason": "issues refunds"},
        "outcome": {
            "status": "failure" if wrong else "success",
            "reason": "wrong refund amount" if wrong else None,
        },
        "input": {
            "originUserId": "usr_42",
            "originSessionId": "ses_9",
            "requestPayload": {"message": USER_MESSAGE, "channel": "chat"},
            "requestPayloadHash": None,
        },
        "agentConfiguration": {
            "systemPromptVersion": version,
            "systemPromptHash": None,
            "systemPromptText": prompt,
            "toolSchemaVersion": "support-tools-2026-07",
            "toolSchemaHash": None,
            "toolSchemaJson": TOOL_SCHEMA,
            "modelIdentifier": MODEL_ID,
            "modelVersion": MODEL_VERSION,
            "modelProviderEndpoint": "http://127.0.0.1:9/v1",  # nothing listens: replays must use their own
            "samplingParameters": sampling,
        },
        "renderedContext": {**rendered.to_json(), "hash": None},
        "memoryState": {
            "workingSetEntries": [
                {
                    "entryId": entry_id,
                    "tier": "hot" if i < 3 else "warm",
                    "provenance": {
                        "writerId": "wrt_crm_sync",
                        "writtenAt": "2026-07-20T09:12:00.000Z",
                        "sourceType": "crm",
                    },
                    "renderedContent": content,
                    "renderedContentHash": None,
                    "contextPosition": i,
                    "retrievalScore": round(0.9 - i / 50, 3),
                    "retrievalMethod": "semantic",
                    "embeddingModel": "text-embedding-3-small",
                    "embeddingVersion": "2024-01",
                }
                for i, (entry_id, content) in enumerate(entries)
            ],
            "totalContextTokens": 3100,
            "contextSetHash": None,
            "contextSetAlgorithm": "rfc6962-sha256",
            "contextSetLeafCount": None,
        },
        "executionTrace": {
            "reasoningTokens": None,
            "reasoningTokensHash": None,
            "reasoningTokenCount": 0,
            "toolCalls": calls,
            "finalOutputText": final,
            "finalOutputHash": None,
            "stopReason": stop,
            "totalLatencyMs": 1840,
        },
        "externalState": {
            "observableExternals": [
                {
                    "key": "customer.balance",
                    "capturedValue": dict(BALANCE),
                    "capturedValueHash": None,
                    "capturedAt": "2026-07-23T13:00:00.120Z",
                    "sourceEndpoint": f"{external_endpoint}/balance",
                }
            ]
        },
        "replayPolicy": {"retentionDays": 365, "piiRedacted": False, "replayAccessScope": scope},
        "signature": {"algorithm": "ed25519", "publicKeyRef": None, "signatureBytes": None},
    }

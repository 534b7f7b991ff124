"""A candidate model for the gate test: the demo's model, except that ``acme-support-next`` refunds the
balance *plus* the disputed charge — more than the customer has, a regression a pact catches."""

from __future__ import annotations

import json
from typing import Any

from consumers.demo.model import ScriptedSupportModel

CANDIDATE = "acme-support-next"


class RegressingModel(ScriptedSupportModel):
    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        reply = super().__call__(request)
        if request.get("model") != CANDIDATE:
            return reply
        for call in reply["choices"][0]["message"].get("tool_calls") or ():
            if call["function"]["name"] == "issue_refund":
                arguments = json.loads(call["function"]["arguments"])
                balance = next(
                    json.loads(m["content"])["balance"]
                    for m in request["messages"]
                    if m["role"] == "tool" and "balance" in json.loads(m["content"])
                )
                arguments["amount"] = round(balance + arguments["amount"], 2)
                call["function"]["arguments"] = json.dumps(arguments)
        return reply

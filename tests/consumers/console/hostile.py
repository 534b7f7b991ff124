"""A capture whose every content part is hostile: script tags, attribute breakouts, ``javascript:``
URLs, SVG payloads, bidi overrides and control characters (the console must show them inert)."""

from __future__ import annotations

import copy
from typing import Any

HOSTILE = (
    '<script>alert("xss-script")</script>'
    '"><img src=x onerror=alert("xss-img")>'
    "'><svg onload=alert('xss-svg')><a href=\"javascript:alert('xss-js')\">click</a>"
    '<iframe src="https://evil.invalid/leak"></iframe><style>body{display:none}</style>'
    " mail jane.doe@example.com"  # personal data: the producer redacts it (a placeholder in the console)
    "\u202egnp.exe\u202c \u2066isolate\u2069 zero\u200bwidth bell\x07 esc\x1b[31m nul-free"
)
MARKER = "xss-"  # what would show up in a dialog or a request if anything ran


def _strip_hashes(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_hashes(v) for k, v in value.items() if not (k.endswith("Hash") or k == "hash")}
    if isinstance(value, list):
        return [_strip_hashes(v) for v in value]
    return value


def hostile_capture(base: dict[str, Any], *, decision_id: str) -> dict[str, Any]:
    """``base`` (a stored capture's JSON) with hostile text in every content part, unsigned and unhashed
    (``blackbox capture`` seals it again)."""
    c = copy.deepcopy(base)
    c.pop("signature", None)
    c["decisionId"] = decision_id
    c["input"]["requestPayload"] = {"message": HOSTILE, "customer_id": "cus_0001"}
    c["input"]["originUserId"] = "usr_hostile"
    cfg = c["agentConfiguration"]
    cfg["systemPromptText"] = "SYS " + HOSTILE
    cfg["toolSchemaJson"] = {
        "tools": [{"type": "function", "function": {"name": "x", "description": HOSTILE}}]
    }
    cfg["modelProviderEndpoint"] = "javascript:alert('xss-endpoint')"
    entries = c["memoryState"]["workingSetEntries"][:2]
    for n, entry in enumerate(entries):
        entry["renderedContent"] = f"MEM{n} {HOSTILE}"
        entry["provenance"]["writerId"] = HOSTILE
    c["memoryState"]["workingSetEntries"] = entries
    c["memoryState"].pop("contextSetLeafCount", None)
    pieces = [("system_prompt", cfg["systemPromptText"])]
    pieces += [(f"memory:{e['entryId']}", e["renderedContent"]) for e in entries]
    pieces.append(("user", HOSTILE))
    text, spans, at = "", [], 0
    for part, piece in pieces:
        text += piece + "\n"
        size = len(piece.encode("utf-8"))
        spans.append({"part": part, "start": at, "end": at + size, "encoding": "raw"})
        at += size + 1
    c["renderedContext"] = {"format": "text", "text": text, "spans": spans}
    trace = c["executionTrace"]
    trace["reasoningTokens"] = [HOSTILE]
    for call in trace["toolCalls"]:
        call["input"] = {"q": HOSTILE}
        call["output"] = {"answer": HOSTILE}
    trace["finalOutputText"] = "FINAL " + HOSTILE
    for external in c["externalState"]["observableExternals"]:
        external["capturedValue"] = {"note": HOSTILE}
        external["sourceEndpoint"] = "javascript:alert('xss-source')"
    return _strip_hashes(c)

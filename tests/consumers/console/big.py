"""A capture with a ~200 KB rendered context holding 50 memory entries (the console's big-content case)."""

from __future__ import annotations

import copy
from typing import Any

ENTRIES = 50
ENTRY_BYTES = 4200
NEEDLE = "needle-in-entry-49-zq"


def big_capture(base: dict[str, Any], *, decision_id: str) -> dict[str, Any]:
    c = copy.deepcopy(base)
    c.pop("signature", None)
    c["decisionId"] = decision_id
    template = c["memoryState"]["workingSetEntries"][0]
    entries = []
    for n in range(ENTRIES):
        entry = copy.deepcopy(template)
        entry["entryId"] = f"mem_big_{n:02d}"
        entry["contextPosition"] = n
        words = " ".join(f"w{n}x{i}" for i in range(ENTRY_BYTES // 8))
        body = f"[entry {n}] {words}"[: ENTRY_BYTES - 40]
        entry["renderedContent"] = body + (f" {NEEDLE}" if n == ENTRIES - 1 else "")
        entry.pop("renderedContentHash", None)
        entries.append(entry)
    memory = c["memoryState"]
    memory["workingSetEntries"] = entries
    for key in ("contextSetHash", "contextSetLeafCount", "totalContextTokens"):
        memory.pop(key, None)
    system = c["agentConfiguration"]["systemPromptText"]
    pieces = [("system_prompt", system)] + [(f"memory:{e['entryId']}", e["renderedContent"]) for e in entries]
    pieces.append(("user", "What happened to my refund?"))
    text, spans, at = "", [], 0
    for part, piece in pieces:
        text += piece + "\n"
        size = len(piece.encode("utf-8"))
        spans.append({"part": part, "start": at, "end": at + size, "encoding": "raw"})
        at += size + 1
    c["renderedContext"] = {"format": "text", "text": text, "spans": spans}
    return c

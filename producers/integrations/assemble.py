"""From the HTTP exchanges attached to a decision to a wire capture's fields (the worker's side).

A capture adapter attaches each model call it sees (:class:`SeenCall`: one HTTP attempt and the
wire format it speaks) to a decision; :func:`assemble` runs on the recorder's worker when the
capture is built, so the agent's thread only ever appended a reference. It fills, in place:

* ``fidelity = "wire"`` and ``executionTrace.modelCalls``: one record per logical call (retries are
  attempts of it), request and response bodies WHOLE and exact (bytes that are not UTF-8 as
  base64), credential-free headers, status, timing, and the byte spans of the system prompt and of
  each working-set entry (``memory:<entryId>``) inside the request body, where their text occurs;
* ``renderedContext``: the first request body, exactly, in the call's format, with its spans;
* ``agentConfiguration``: model, system prompt, tools and sampling parsed from the first request
  (version labels the agent configured are kept), the model version from the first response;
* ``executionTrace.toolCalls``: each tool call a response asked for, arguments exactly as the API
  returned them (a string stays a string), paired by id with the result the agent sent back in a
  later request (absent when it never did);
* ``finalOutputText``, ``stopReason`` (and ``reasoningTokens`` when the agent recorded none) from
  the last response; an exception that ended the decision keeps its ``error`` stop reason.

What the exchanges do not show stays as the agent recorded it (outcome, memory entries, external
values, the inbound request). A body that cannot be parsed is recorded exactly anyway, and the
problem is named in the capture; nothing here raises.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from producers import unrecordable as check
from producers.clock import format_timestamp
from producers.config import sealed_snapshots
from producers.integrations.http_capture import Exchange
from producers.wire.calls import WireFormat, WireRequest, WireResponse

__all__ = ["SeenCall", "assemble", "locate_spans"]


@dataclass(frozen=True, slots=True)
class SeenCall:
    """One HTTP attempt of a model call, and the provider wire format it speaks."""

    exchange: Exchange
    wire: WireFormat


@dataclass(frozen=True, slots=True)
class _Call:
    """One logical call: its attempts in order (the last one's bodies are the call's)."""

    attempts: tuple[Exchange, ...]
    wire: WireFormat

    @property
    def last(self) -> Exchange:
        return self.attempts[-1]


def _group(calls: Sequence[SeenCall]) -> list[_Call]:
    """Attempts grouped by call id, calls ordered by when their first attempt started."""
    order: list[str] = []
    attempts: dict[str, list[Exchange]] = {}
    wires: dict[str, WireFormat] = {}
    for seen in sorted(calls, key=lambda c: c.exchange.started_at):  # stable: arrival order on ties
        call_id = seen.exchange.call_id
        if call_id not in attempts:
            order.append(call_id)
            attempts[call_id] = []
        attempts[call_id].append(seen.exchange)
        wires[call_id] = seen.wire
    return [_Call(tuple(sorted(attempts[i], key=lambda e: e.attempt)), wires[i]) for i in order]


def _text(data: bytes) -> tuple[str, str]:
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), "base64"


def _escaped(text: str) -> list[tuple[bytes, str]]:
    """How ``text`` can appear in a JSON body: escaped as the SDKs write it, then raw."""
    forms: list[tuple[bytes, str]] = []
    for ensure_ascii in (False, True):
        form = json.dumps(text, ensure_ascii=ensure_ascii)[1:-1].encode("utf-8")
        if all(form != seen for seen, _ in forms):
            forms.append((form, "json-string"))
    raw = text.encode("utf-8", "surrogatepass")
    if all(raw != seen for seen, _ in forms):
        forms.append((raw, "raw"))
    return forms


def locate_spans(body: bytes, parts: Sequence[tuple[str, str | None]]) -> list[dict[str, Any]]:
    """``renderedContext``-style spans (UTF-8 byte offsets) of each part's first occurrence in
    ``body``; a part whose text does not occur (or is empty) has no span."""
    spans: list[dict[str, Any]] = []
    for part, text in parts:
        if not text:
            continue
        for form, encoding in _escaped(text):
            start = body.find(form)
            if start >= 0:
                spans.append({"part": part, "start": start, "end": start + len(form), "encoding": encoding})
                break
    return spans


def _parts(capture: dict[str, Any], system_prompt: str | None) -> list[tuple[str, str | None]]:
    memory = capture.get("memoryState") or {}
    parts: list[tuple[str, str | None]] = [("system_prompt", system_prompt)]
    for entry in memory.get("workingSetEntries") or ():
        if isinstance(entry, dict) and isinstance(entry.get("renderedContent"), str):
            parts.append((f"memory:{entry.get('entryId')}", entry["renderedContent"]))
    return parts


def _record(call: _Call, sequence: int, problems: list[str]) -> dict[str, Any]:
    first, last = call.attempts[0], call.last
    request, request_encoding = _text(last.request_body)
    content_encoding = last.header("content-encoding", response=True)
    try:
        response_bytes = last.decoded_response_body()
    except Exception as exc:  # a body its content-encoding cannot undo: keep the bytes as received
        problems.append(f"model call {sequence}: content-encoding {content_encoding!r} not undone ({exc})")
        response_bytes = last.response_body
    else:
        content_encoding = content_encoding or None
    response, response_encoding = _text(response_bytes)
    received = last.status is not None or bool(last.response_body)
    seconds = sum(attempt.total_seconds for attempt in call.attempts)
    return {
        "sequence": sequence,
        "format": call.wire.FORMAT,
        "method": last.method,
        "endpoint": last.origin,
        "path": last.path,
        "query": last.query or None,
        "requestHeaders": [{"name": name, "value": value} for name, value in last.request_headers],
        "requestBody": request,
        "requestBodyEncoding": request_encoding,
        "requestBodyHash": None,
        "status": last.status,
        "responseBody": response if received else None,
        "responseBodyEncoding": response_encoding,
        "responseBodyHash": None,
        "responseContentEncoding": content_encoding,
        "streamed": last.streamed,
        "complete": last.eof,
        "attempts": len(call.attempts),
        "error": last.error,
        "startedAt": format_timestamp(first.started_at),
        "latencyMs": round(seconds * 1000),
        "spans": [],
    }


def _parse_request(call: _Call, record: dict[str, Any], problems: list[str]) -> WireRequest | None:
    if record["requestBodyEncoding"] != "utf-8":
        problems.append(f"model call {record['sequence']}: the request body is not UTF-8 (kept as base64)")
        return None
    try:
        body = json.loads(record["requestBody"])
        if not isinstance(body, dict):
            raise ValueError("not a JSON object")
        return call.wire.parse_request(body)
    except Exception as exc:
        problems.append(
            f"model call {record['sequence']}: request body not readable as {call.wire.FORMAT} ({exc})"
        )
        return None


def _parse_response(call: _Call, record: dict[str, Any], problems: list[str]) -> WireResponse | None:
    status = record["status"]
    if status is None or not 200 <= status < 300:
        return WireResponse(model=None, text=None, stop_reason="error", complete=False)
    if record["responseBodyEncoding"] != "utf-8" or record["responseBody"] is None:
        problems.append(f"model call {record['sequence']}: the response body is not UTF-8 (kept as base64)")
        return None
    try:
        parsed = call.wire.parse_response(record["responseBody"], streamed=record["streamed"])
    except Exception as exc:
        problems.append(
            f"model call {record['sequence']}: response not readable as {call.wire.FORMAT} ({exc})"
        )
        return None
    record["complete"] = record["complete"] or parsed.complete
    return parsed


def _tool_calls(
    requests: Sequence[WireRequest | None], responses: Sequence[WireResponse | None]
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for index, response in enumerate(responses):
        for use in () if response is None else response.tool_calls:
            result = None
            if use.id is not None:
                result = next(
                    (
                        sent
                        for later in requests[index + 1 :]
                        if later is not None
                        for sent in later.tool_results
                        if sent.id == use.id
                    ),
                    None,
                )
            out.append(
                {
                    "sequence": len(out) + 1,
                    "toolName": use.name or check.MARKER,
                    "input": use.arguments,
                    "inputHash": None,
                    "output": None if result is None else result.output,
                    "outputHash": None,
                    "latencyMs": None,
                    "errorRef": "tool_result.is_error" if result is not None and result.is_error else None,
                }
            )
    return out


def assemble(capture: dict[str, Any], calls: Sequence[Any], problems: list[str]) -> None:
    """Fill ``capture`` from the attached :class:`SeenCall` values (see the module docstring)."""
    grouped = _group([call for call in calls if isinstance(call, SeenCall)])
    if not grouped:
        return
    records: list[dict[str, Any]] = []
    requests: list[WireRequest | None] = []
    responses: list[WireResponse | None] = []
    for sequence, call in enumerate(grouped, start=1):
        record = _record(call, sequence, problems)
        records.append(record)
        requests.append(_parse_request(call, record, problems))
        responses.append(_parse_response(call, record, problems))
    trace = capture["executionTrace"]
    capture["fidelity"] = "wire"
    trace["modelCalls"] = records

    first = requests[0]
    config = capture["agentConfiguration"]
    if first is not None:
        answered = next((r for r in responses if r is not None and r.model), None)
        config = capture["agentConfiguration"] = {
            "systemPromptVersion": config.get("systemPromptVersion"),
            "systemPromptHash": None,
            "systemPromptText": first.system_prompt,
            "toolSchemaVersion": config.get("toolSchemaVersion"),
            "toolSchemaHash": None,
            # the same tools in every request of an agent: sealed once per content
            "toolSchemaJson": sealed_snapshots.shared(first.tools),
            "modelIdentifier": first.model or config.get("modelIdentifier") or check.MARKER,
            "modelVersion": answered.model if answered is not None else config.get("modelVersion"),
            "modelProviderEndpoint": f"{records[0]['endpoint']}{records[0]['path']}",
            "samplingParameters": first.sampling,
        }
        if first.model is None:
            problems.append("model call 1: the request names no model")
    parts = _parts(capture, config.get("systemPromptText"))
    for call, record in zip(grouped, records, strict=True):
        record["spans"] = locate_spans(call.last.request_body, parts)
    if records[0]["requestBodyEncoding"] == "utf-8":
        capture["renderedContext"] = {
            "format": records[0]["format"],
            "text": records[0]["requestBody"],
            "spans": list(records[0]["spans"]),
            "hash": None,
        }

    tool_calls = _tool_calls(requests, responses)
    if tool_calls:
        trace["toolCalls"] = tool_calls
    last = responses[-1]
    if last is not None:
        if last.text is not None:
            trace["finalOutputText"] = last.text
        if trace.get("stopReason") != "error":
            trace["stopReason"] = last.stop_reason
    reasoning = [text for r in responses if r is not None for text in r.reasoning]
    if reasoning and trace.get("reasoningTokens") is None:
        trace["reasoningTokens"] = reasoning

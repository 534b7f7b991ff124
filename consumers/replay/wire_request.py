"""Rebuild the model calls a wire capture records, and prove each body exact before it is sent.

A wire capture (``fidelity = "wire"``) holds every model call's request body exactly as the SDK
sent it. Replay sends those bytes, not a request rebuilt from parts: :func:`rebuild_wire` reads each
recorded call (format, path, the credential-free headers that select the API version, the body and
the byte spans of the system prompt and memory entries inside it), hashes each body again against
its signed ``requestBodyHash`` and the first against ``renderedContext.hash``, and works out what
each later call of the tool loop appended to the history of the call before it
(:func:`producers.wire.body.appended_items`). A run then builds call N as *its own* call N-1 plus
those appended bytes (:mod:`consumers.replay.wire_loop`); a call that is not such an append (the
agent rewrote its history) is sent as recorded.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from consumers.replay.digest import text_hash
from consumers.replay.request import HashCheck, mismatched, require_matching, require_replayable
from producers.context import ContextSpan
from producers.wire.body import appended_items, layout
from producers.wire.formats import WireSpec, spec_for
from schemas.errors import CaptureNotReplayable

__all__ = ["RebuiltWire", "WireCall", "WireInputs", "is_wire", "rebuild_wire"]


def is_wire(capture: Mapping[str, Any]) -> bool:
    """Whether ``capture`` replays by its recorded bytes: a wire capture with model calls."""
    trace = capture.get("executionTrace") or {}
    return capture.get("fidelity") == "wire" and bool(trace.get("modelCalls"))


@dataclass(frozen=True, slots=True)
class WireCall:
    """One recorded model call, and the body a run sends for it when it cannot extend the previous one.

    ``body`` is ``recorded`` with any variation spliced in; ``spans`` locate the parts inside
    ``body``. ``appended`` is what this call added to the previous call's history (None for the
    first call, or when it is not an append). ``tool_calls`` is how many tool calls the recorded
    response asked for (None when the response could not be read).
    """

    sequence: int
    spec: WireSpec
    path: str
    query: str | None
    headers: tuple[tuple[str, str], ...]
    recorded: bytes
    body: bytes
    spans: tuple[ContextSpan, ...]
    appended: bytes | None
    tool_calls: int | None

    @property
    def extends_previous(self) -> bool:
        return self.appended is not None


@dataclass(frozen=True, slots=True)
class WireInputs:
    """Everything a wire run sends or answers from: the recorded calls, the captured world."""

    calls: tuple[WireCall, ...]
    captured_endpoint: str | None = None
    externals: Mapping[str, Any] = field(default_factory=dict)

    @property
    def model(self) -> str:
        """The ``model`` member of the first body (what a run asks for)."""
        first = self.calls[0].body
        member = layout(first).member("model")
        if member is None:
            return ""
        value = json.loads(first[member.start : member.end])
        return value if isinstance(value, str) else json.dumps(value)


@dataclass(frozen=True, slots=True)
class RebuiltWire:
    inputs: WireInputs
    checks: tuple[HashCheck, ...]

    @property
    def mismatches(self) -> tuple[HashCheck, ...]:
        return mismatched(self.checks)

    def require_exact(self) -> None:
        """Raise :class:`ContentHashMismatch` naming the first recorded body that is not exact."""
        require_matching(self.checks, sent="recorded request body")


def rebuild_wire(capture: Mapping[str, Any], *, externals: Mapping[str, Any]) -> RebuiltWire:
    """The recorded calls of a wire capture with their hash checks (enforced by ``require_exact``)."""
    require_replayable(capture)
    records: Sequence[Mapping[str, Any]] = (capture.get("executionTrace") or {}).get("modelCalls") or ()
    if not records:
        raise CaptureNotReplayable("executionTrace.modelCalls: a wire capture without model calls")
    calls: list[WireCall] = []
    checks: list[HashCheck] = []
    for index, record in enumerate(records):
        part = f"executionTrace.modelCalls[{index}]"
        spec = spec_for(str(record.get("format")))
        if spec is None:
            raise CaptureNotReplayable(
                f"{part}.format: model call {index + 1} speaks {record.get('format')!r}, "
                "a format replay cannot send"
            )
        if record.get("requestBodyEncoding") != "utf-8":
            raise CaptureNotReplayable(
                f"{part}.requestBody: model call {index + 1}'s request body is not UTF-8 JSON"
            )
        text = str(record["requestBody"])
        path = _checked_path(str(record.get("path") or ""), spec, part)
        checks.append(HashCheck(f"{part}.requestBody", record.get("requestBodyHash"), text_hash(text)))
        body = text.encode("utf-8")
        try:
            layout(body)
        except ValueError as exc:
            raise CaptureNotReplayable(f"{part}.requestBody: model call {index + 1}: {exc}") from exc
        previous = calls[-1] if calls else None
        calls.append(
            WireCall(
                sequence=index + 1,
                spec=spec,
                path=path,
                query=record.get("query") or None,
                headers=tuple((str(h["name"]), str(h["value"])) for h in record.get("requestHeaders") or ()),
                recorded=body,
                body=body,
                spans=tuple(ContextSpan.from_json(s) for s in record.get("spans") or ()),
                appended=None
                if previous is None or previous.spec is not spec
                else appended_items(previous.recorded, body, spec.history_key),
                tool_calls=_tool_calls(spec, record),
            )
        )
    # The rendered context of a wire capture is the first body: what is sent must hash to it too.
    rendered_hash = (capture.get("renderedContext") or {}).get("hash")
    checks.insert(
        0, HashCheck("renderedContext.text", rendered_hash, text_hash(str(records[0]["requestBody"])))
    )
    config = capture.get("agentConfiguration") or {}
    inputs = WireInputs(
        calls=tuple(calls),
        captured_endpoint=None
        if config.get("modelProviderEndpoint") is None
        else str(config["modelProviderEndpoint"]),
        externals=dict(externals),
    )
    return RebuiltWire(inputs=inputs, checks=tuple(checks))


def _checked_path(path: str, spec: WireSpec, part: str) -> str:
    """The recorded path, if it is a plain path to the format's endpoint (it is appended to the
    operator's endpoint, so it must not climb out of it)."""
    plain = path.startswith("/") and ".." not in path and "//" not in path and not set("?#\\") & set(path)
    if not plain or not path.endswith(spec.path_suffix):
        raise CaptureNotReplayable(
            f"{part}.path: recorded path {path!r} is not a {spec.format} endpoint path (…{spec.path_suffix})"
        )
    return path


def _tool_calls(spec: WireSpec, record: Mapping[str, Any]) -> int | None:
    body = record.get("responseBody")
    if body is None or record.get("responseBodyEncoding") != "utf-8":
        return None
    try:
        return len(spec.reader.parse_response(str(body), streamed=bool(record.get("streamed"))).tool_calls)
    except Exception:  # an unreadable response is evidence too; the count is just unknown
        return None

"""What the decision page shows, built from what the services returned: the stored capture (already
read through the gate), its read-time verdict, the trust store's key and the log's inclusion proof.

Nothing here reads a store or decides access; it arranges values for the template. Content stays
text: the template escapes it (:func:`consumers.console.web.inert`).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from consumers.console.context import ContextView, render_context
from consumers.verify.verdict import Verdict
from producers.evidence import TrustStore
from producers.evidence.keys import key_id_from_ref
from producers.evidence.parts import iter_parts
from schemas.errors import BlackboxError, ContractError

__all__ = ["DecisionView", "LogInclusion", "body_bytes", "decision_view"]

FIDELITY = {
    "wire": (
        "the exact bytes of every model call were captured",
        "nothing about the agent's code between calls beyond what it recorded",
    ),
    "sdk": (
        "what the agent recorded through the SDK, sealed at the source",
        "that these were the exact bytes on the wire",
    ),
    "semantic": (
        "what OpenTelemetry spans or callbacks described, rebuilt into a capture",
        "exact prompts or bytes the spans did not carry (marked absent)",
    ),
}


@dataclass(frozen=True, slots=True)
class LogInclusion:
    held: bool
    leaf_index: int | None = None
    tree_size: int | None = None
    origin: str = ""
    checkpoint: str = ""
    reason: str = ""


@dataclass(frozen=True, slots=True)
class DecisionView:
    decision_id: str
    capture: dict[str, Any]
    row: dict[str, Any]
    content_state: str
    note: str
    verdict: Verdict
    key: dict[str, Any] | None
    parts: list[dict[str, Any]]
    context: ContextView | None
    entries: list[dict[str, Any]]
    tool_calls: list[dict[str, Any]]
    model_calls: list[dict[str, Any]]
    fidelity: tuple[str, str]
    log: LogInclusion
    quarantine: list[dict[str, Any]]


def _key(capture: Mapping[str, Any], trust: TrustStore) -> dict[str, Any] | None:
    key_id = key_id_from_ref((capture.get("signature") or {}).get("publicKeyRef"))
    if not key_id:
        return None
    record = trust.get(key_id)
    if record is None:
        return {"key_id": key_id, "known": False}
    return {
        "key_id": key_id,
        "known": True,
        "not_before": record.not_before,
        "not_after": record.not_after,
        "revoked_at": record.revoked_at,
        "note": record.note,
    }


def _parts(capture: Mapping[str, Any], verdict: Verdict) -> list[dict[str, Any]]:
    out = []
    for ref in iter_parts(capture):
        if ref.content is None and ref.recorded_hash is None:
            continue
        failed = bool(verdict.part) and verdict.part in (ref.path, ref.hash_path, ref.label)
        if failed:
            state = "failed"
        elif ref.content is None:
            state = "absent (hash kept)"
        else:
            state = "held" if verdict.verified else "not checked"
        out.append({"label": ref.label, "hash": ref.recorded_hash, "state": state})
    return out


def inclusion(
    capture: Mapping[str, Any], prover: Callable[[str], dict[str, Any]] | None, decision_id: str
) -> LogInclusion:
    """The log's proof for the capture, checked here against the log's own key."""
    if prover is None:
        return LogInclusion(held=False, reason="the transparency log is off (BLACKBOX_TLOG=false)")
    from producers.evidence.tlog import capture_leaf, verify_inclusion

    try:
        section = prover(decision_id)
        key = section.get("logKey")
        if not key:
            return LogInclusion(held=False, reason="the log has no key yet")
        proof = section["proof"]
        checkpoint = verify_inclusion(capture_leaf(capture), proof, key)
    except BlackboxError as exc:
        return LogInclusion(held=False, reason=str(exc))
    return LogInclusion(
        held=True,
        leaf_index=int(proof["leafIndex"]),
        tree_size=checkpoint.size,
        origin=checkpoint.origin,
        checkpoint=str(proof.get("checkpoint") or ""),
    )


def body_bytes(call: Mapping[str, Any], which: str) -> bytes | None:
    """The exact bytes of a model call's ``request`` or ``response`` body, as captured."""
    body = call.get(f"{which}Body")
    if body is None:
        return None
    encoding = call.get(f"{which}BodyEncoding")
    if encoding == "base64":
        try:
            return base64.b64decode(str(body), validate=True)
        except ValueError as exc:
            raise ContractError("the captured body is not base64", path=f"{which}Body") from exc
    return str(body).encode("utf-8")


def _readable(data: bytes | None) -> str | None:
    if data is None:
        return None
    return data.decode("utf-8", errors="replace")


def _position(entry: Mapping[str, Any]) -> int:
    position = entry.get("contextPosition")
    return position if isinstance(position, int) else 0


def decision_view(
    *,
    decision_id: str,
    capture: dict[str, Any],
    row: dict[str, Any],
    content_state: str,
    note: str,
    verdict: Verdict,
    trust: TrustStore,
    log: LogInclusion,
    quarantine: list[dict[str, Any]],
) -> DecisionView:
    memory = capture.get("memoryState") or {}
    raw_entries = [e for e in memory.get("workingSetEntries") or [] if isinstance(e, dict)]
    raw_entries.sort(key=_position)
    entries = []
    card_of: dict[str, int] = {}
    for number, entry in enumerate(raw_entries):
        content = entry.get("renderedContent")
        card_of.setdefault(str(entry.get("entryId")), number)
        entries.append(
            {"card": number, "bytes": None if content is None else len(str(content).encode()), **entry}
        )
    rendered = capture.get("renderedContext") or {}
    context = None
    if isinstance(rendered.get("text"), str):
        spans = [s for s in rendered.get("spans") or [] if isinstance(s, dict)]
        context = render_context(rendered["text"], spans, card_of)
    trace = capture.get("executionTrace") or {}
    tool_calls = [c for c in trace.get("toolCalls") or [] if isinstance(c, dict)]
    model_calls = []
    for number, call in enumerate(c for c in trace.get("modelCalls") or [] if isinstance(c, dict)):
        try:
            request, response = body_bytes(call, "request"), body_bytes(call, "response")
        except ContractError:
            request = response = None
        model_calls.append(
            {"number": number, "request": _readable(request), "response": _readable(response), **call}
        )
    fidelity = FIDELITY.get(str(capture.get("fidelity") or row.get("fidelity") or "sdk"), ("", ""))
    return DecisionView(
        decision_id=decision_id,
        capture=capture,
        row=row,
        content_state=content_state,
        note=note,
        verdict=verdict,
        key=_key(capture, trust),
        parts=_parts(capture, verdict),
        context=context,
        entries=entries,
        tool_calls=tool_calls,
        model_calls=model_calls,
        fidelity=fidelity,
        log=log,
        quarantine=quarantine,
    )


def expired(at: datetime | None, now: datetime) -> bool:
    return at is not None and at <= now

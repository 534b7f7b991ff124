"""Capture JSON form → index rows (``decisions``, ``tool_calls``, ``memory_entries``), without pydantic.

Ingest turns thousands of captures a second into rows, so this reads the plain camelCase dict directly
(a few microseconds per capture) and trusts the contract the codec already enforced; only the three
fields a row cannot exist without (``decisionId``, ``agentId``, ``capturedAt``) are checked here.

Values are the Python types both engines accept: ``str``, ``int``, ``float``, ``bool``, ``None`` (only in
Nullable columns) and aware UTC ``datetime``.

Defaults when the caller (ingest, with its retention policy) does not pass them:

* ``content_state``: ``structured-only`` for a structured-only capture, ``metadata-only`` when a full
  capture carries no content at all (a compacted capture re-indexed), else ``full``;
* ``retention_class``: ``consequential`` if flagged, ``structured`` for structured-only, else ``routine``;
* ``retention_days``: ``replayPolicy.retentionDays``, else 365 (consequential) / 30;
* ``expires_at``: ``capturedAt + retention_days``; ``key_id``: the part of ``signature.publicKeyRef``
  after ``#``; ``ingested_at``: now; ``version``: 0 (the ingest row; state changes use higher versions).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from producers.privacy.identifiers import is_commitment
from schemas.errors import ContractError

__all__ = [
    "DECISION_COLUMNS",
    "MEMORY_COLUMNS",
    "TOOL_CALL_COLUMNS",
    "CaptureRows",
    "RowBatch",
    "decision_rows",
    "flag_row",
]

DECISION_COLUMNS = (
    "decision_id",
    "agent_id",
    "runtime_id",
    "captured_at",
    "origin_user_id",
    "origin_session_id",
    "capture_level",
    "fidelity",
    "content_state",
    "trust",
    "quarantine_reason",
    "consequential",
    "consequential_reason",
    "failed",
    "outcome_status",
    "outcome_reason",
    "stop_reason",
    "prompt_version",
    "prompt_hash",
    "tool_schema_version",
    "tool_schema_hash",
    "model_id",
    "model_version",
    "model_endpoint",
    "temperature",
    "top_p",
    "max_tokens",
    "seed",
    "total_context_tokens",
    "working_set_entries",
    "working_set_bytes",
    "context_set_hash",
    "rendered_context_hash",
    "reasoning_token_count",
    "tool_call_count",
    "tool_error_count",
    "total_latency_ms",
    "final_output_hash",
    "request_payload_hash",
    "retention_class",
    "retention_days",
    "expires_at",
    "legal_hold",
    "hold_reason",
    "access_scope",
    "pii_redacted",
    "segment_key",
    "segment_offset",
    "segment_length",
    "capture_bytes",
    "content_sha256",
    "manifest_json",
    "key_id",
    "source",
    "ingested_at",
    "version",
)
TOOL_CALL_COLUMNS = (
    "decision_id",
    "agent_id",
    "captured_at",
    "sequence",
    "tool_name",
    "input_hash",
    "output_hash",
    "latency_ms",
    "error_ref",
    "is_error",
)
MEMORY_COLUMNS = (
    "decision_id",
    "agent_id",
    "captured_at",
    "context_position",
    "entry_id",
    "tier",
    "writer_id",
    "written_at",
    "source_type",
    "retrieval_score",
    "retrieval_method",
    "embedding_model",
    "embedding_version",
    "content_hash",
    "content_bytes",
)
_TABLE_COLUMNS = {
    "decisions": DECISION_COLUMNS,
    "tool_calls": TOOL_CALL_COLUMNS,
    "memory_entries": MEMORY_COLUMNS,
}
_EMPTY: Mapping[str, Any] = {}


@dataclass(frozen=True, slots=True)
class CaptureRows:
    """The index rows of one capture."""

    decision: dict[str, Any]
    tool_calls: tuple[dict[str, Any], ...] = ()
    memory_entries: tuple[dict[str, Any], ...] = ()

    @property
    def decision_id(self) -> str:
        return str(self.decision["decision_id"])


@dataclass(slots=True)
class RowBatch:
    """Accumulates :class:`CaptureRows` as per-table column lists, ready for ``Index.insert``."""

    _columns: dict[str, dict[str, list[Any]]] = field(
        default_factory=lambda: {t: {c: [] for c in cols} for t, cols in _TABLE_COLUMNS.items()}
    )
    _count: int = 0

    @classmethod
    def of(cls, captures: Iterable[CaptureRows]) -> RowBatch:
        batch = cls()
        for rows in captures:
            batch.add(rows)
        return batch

    def add(self, rows: CaptureRows) -> None:
        cols = self._columns["decisions"]
        decision = rows.decision
        for name in DECISION_COLUMNS:
            cols[name].append(decision[name])
        for table, children, names in (
            ("tool_calls", rows.tool_calls, TOOL_CALL_COLUMNS),
            ("memory_entries", rows.memory_entries, MEMORY_COLUMNS),
        ):
            if children:
                tcols = self._columns[table]
                for child in children:
                    for name in names:
                        tcols[name].append(child[name])
        self._count += 1

    def columns(self, table: str) -> dict[str, list[Any]]:
        """Column lists for ``table``; empty dict when the batch has no rows for it."""
        cols = self._columns[table]
        first = next(iter(cols.values()))
        return cols if first else {}

    def __len__(self) -> int:
        return self._count


def _ts(value: Any, path: str) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    if not isinstance(value, str):
        raise ContractError("expected an ISO-8601 timestamp", path=path)
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise ContractError(f"not an ISO-8601 timestamp: {value!r}", path=path) from exc
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def _s(value: Any) -> str:
    return "" if value is None else str(value)


def _key_id(public_key_ref: Any) -> str:
    ref = _s(public_key_ref)
    return ref.rpartition("#")[2] if "#" in ref else ref


def _content_state(capture: Mapping[str, Any], level: str) -> str:
    if level == "structured-only":
        return "structured-only"
    rendered = capture.get("renderedContext") or _EMPTY
    config = capture.get("agentConfiguration") or _EMPTY
    trace = capture.get("executionTrace") or _EMPTY
    if (
        rendered.get("text") is None
        and config.get("systemPromptText") is None
        and trace.get("finalOutputText") is None
    ):
        return "metadata-only"
    return "full"


def decision_rows(
    capture: Mapping[str, Any],
    *,
    trust: str = "verified",
    quarantine_reason: str = "",
    segment_key: str = "",
    segment_offset: int = 0,
    segment_length: int = 0,
    capture_bytes: int = 0,
    content_sha256: str = "",
    manifest_json: str = "",
    key_id: str | None = None,
    source: str = "",
    ingested_at: datetime | None = None,
    content_state: str | None = None,
    retention_class: str | None = None,
    retention_days: int | None = None,
    expires_at: datetime | None = None,
    legal_hold: bool = False,
    hold_reason: str = "",
    version: int = 0,
    hash_id: Callable[[str], str] | None = None,
) -> CaptureRows:
    """The rows of one capture (JSON form). See the module docstring for the defaults.

    ``hash_id`` turns ``origin_user_id`` and ``origin_session_id`` into what the index stores (ingest
    passes :meth:`consumers.privacy.ids.IndexIds.of`: keyed hashes); None keeps them raw. A salted
    commitment (:mod:`producers.privacy.identifiers`) is kept as it is: ingest replaces it by the keyed
    hash of the raw id it opens with the vault (:mod:`consumers.privacy.identifiers`).

    ``manifest_json`` is the capture's JSON form with every content part absent and the signature kept
    (the caller builds it with the evidence module), so a compacted decision still verifies from the
    index alone. ``content_sha256`` is the hash of the encoded capture bytes (conflict detection).
    """
    try:
        decision_id = capture["decisionId"]
        agent_id = capture["agentId"]
        captured_raw = capture["capturedAt"]
    except KeyError as exc:
        raise ContractError("required for indexing", path=str(exc.args[0])) from exc
    if not isinstance(decision_id, str) or not decision_id:
        raise ContractError("must be a non-empty string", path="decisionId")
    if not isinstance(agent_id, str) or not agent_id:
        raise ContractError("must be a non-empty string", path="agentId")
    captured_at = _ts(captured_raw, "capturedAt")

    inp = capture.get("input") or _EMPTY
    config = capture.get("agentConfiguration") or _EMPTY
    sampling = config.get("samplingParameters") or _EMPTY
    memory = capture.get("memoryState") or _EMPTY
    trace = capture.get("executionTrace") or _EMPTY
    policy = capture.get("replayPolicy") or _EMPTY
    consequential = capture.get("consequential") or _EMPTY
    outcome = capture.get("outcome") or _EMPTY
    rendered = capture.get("renderedContext") or _EMPTY
    signature = capture.get("signature") or _EMPTY
    level = _s(capture.get("captureLevel")) or "full"
    flagged = bool(consequential.get("flagged"))
    status = _s(outcome.get("status")) or "unknown"

    common = {"decision_id": decision_id, "agent_id": agent_id, "captured_at": captured_at}

    tool_rows: list[dict[str, Any]] = []
    errors = 0
    for call in trace.get("toolCalls") or ():
        error_ref = _s(call.get("errorRef"))
        is_error = bool(error_ref)
        errors += is_error
        tool_rows.append(
            {
                **common,
                "sequence": int(call.get("sequence") or 0),
                "tool_name": _s(call.get("toolName")),
                "input_hash": _s(call.get("inputHash")),
                "output_hash": _s(call.get("outputHash")),
                "latency_ms": call.get("latencyMs"),
                "error_ref": error_ref,
                "is_error": is_error,
            }
        )

    memory_rows: list[dict[str, Any]] = []
    ws_bytes: int | None = 0
    for position, entry in enumerate(memory.get("workingSetEntries") or ()):
        content = entry.get("renderedContent")
        size = len(content.encode("utf-8")) if isinstance(content, str) else None
        if size is None:
            ws_bytes = None
        elif ws_bytes is not None:
            ws_bytes += size
        provenance = entry.get("provenance") or _EMPTY
        written = provenance.get("writtenAt")
        pos = entry.get("contextPosition")
        memory_rows.append(
            {
                **common,
                "context_position": position if pos is None else int(pos),
                "entry_id": _s(entry.get("entryId")),
                "tier": _s(entry.get("tier")),
                "writer_id": _s(provenance.get("writerId")),
                "written_at": None if written is None else _ts(written, "provenance.writtenAt"),
                "source_type": _s(provenance.get("sourceType")),
                "retrieval_score": entry.get("retrievalScore"),
                "retrieval_method": _s(entry.get("retrievalMethod")),
                "embedding_model": _s(entry.get("embeddingModel")),
                "embedding_version": _s(entry.get("embeddingVersion")),
                "content_hash": _s(entry.get("renderedContentHash")),
                "content_bytes": size,
            }
        )

    if retention_class is None:
        retention_class = (
            "consequential" if flagged else ("structured" if level == "structured-only" else "routine")
        )
    if retention_days is None:
        retention_days = policy.get("retentionDays") or (365 if flagged else 30)
    if expires_at is None:
        try:
            expires_at = captured_at + timedelta(days=int(retention_days))
        except OverflowError:  # past year 9999; ingest passes the retention policy's clamped expiry
            expires_at = datetime.max.replace(tzinfo=UTC)

    decision = {
        **common,
        "runtime_id": _s(capture.get("runtimeId")),
        "origin_user_id": _origin_id(inp.get("originUserId"), hash_id),
        "origin_session_id": _origin_id(inp.get("originSessionId"), hash_id),
        "capture_level": level,
        "fidelity": _s(capture.get("fidelity")) or "sdk",  # a v1 capture is recorded by hand
        "content_state": content_state or _content_state(capture, level),
        "trust": trust,
        "quarantine_reason": quarantine_reason,
        "consequential": flagged,
        "consequential_reason": _s(consequential.get("reason")),
        "failed": status == "failure",
        "outcome_status": status,
        "outcome_reason": _s(outcome.get("reason")),
        "stop_reason": _s(trace.get("stopReason")),
        "prompt_version": _s(config.get("systemPromptVersion")),
        "prompt_hash": _s(config.get("systemPromptHash")),
        "tool_schema_version": _s(config.get("toolSchemaVersion")),
        "tool_schema_hash": _s(config.get("toolSchemaHash")),
        "model_id": _s(config.get("modelIdentifier")),
        "model_version": _s(config.get("modelVersion")),
        "model_endpoint": _s(config.get("modelProviderEndpoint")),
        "temperature": sampling.get("temperature"),
        "top_p": sampling.get("top_p"),
        "max_tokens": sampling.get("max_tokens"),
        "seed": sampling.get("seed"),
        "total_context_tokens": memory.get("totalContextTokens"),
        "working_set_entries": len(memory_rows),
        "working_set_bytes": ws_bytes,
        "context_set_hash": _s(memory.get("contextSetHash")),
        "rendered_context_hash": _s(rendered.get("hash")),
        "reasoning_token_count": trace.get("reasoningTokenCount"),
        "tool_call_count": len(tool_rows),
        "tool_error_count": errors,
        "total_latency_ms": trace.get("totalLatencyMs"),
        "final_output_hash": _s(trace.get("finalOutputHash")),
        "request_payload_hash": _s(inp.get("requestPayloadHash")),
        "retention_class": retention_class,
        "retention_days": int(retention_days),
        "expires_at": expires_at,
        "legal_hold": legal_hold,
        "hold_reason": hold_reason,
        "access_scope": _s(policy.get("replayAccessScope")),
        "pii_redacted": bool(policy.get("piiRedacted")),
        "segment_key": segment_key,
        "segment_offset": segment_offset,
        "segment_length": segment_length,
        "capture_bytes": capture_bytes,
        "content_sha256": content_sha256,
        "manifest_json": manifest_json,
        "key_id": _key_id(signature.get("publicKeyRef")) if key_id is None else key_id,
        "source": source,
        "ingested_at": ingested_at or datetime.now(UTC),
        "version": version,
    }
    return CaptureRows(decision=decision, tool_calls=tuple(tool_rows), memory_entries=tuple(memory_rows))


def flag_row(event: Mapping[str, Any], *, received_at: datetime | None = None) -> dict[str, Any]:
    """A ``flags`` row from a flag event value (``{"decisionId","agentId","reason","flaggedAt","failure"}``)."""
    try:
        return {
            "decision_id": str(event["decisionId"]),
            "agent_id": _s(event.get("agentId")),
            "reason": _s(event.get("reason")),
            "failure": bool(event.get("failure")),
            "flagged_at": _ts(event["flaggedAt"], "flaggedAt"),
            "received_at": received_at or datetime.now(UTC),
        }
    except KeyError as exc:
        raise ContractError("required in a flag event", path=str(exc.args[0])) from exc


def decision_ids(rows: Sequence[CaptureRows]) -> list[str]:
    return [r.decision_id for r in rows]


def _origin_id(value: Any, hash_id: Callable[[str], str] | None) -> str:
    text = _s(value)
    if hash_id is None or is_commitment(text):
        return text
    return hash_id(text)

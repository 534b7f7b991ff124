"""Pydantic v2 models mirroring the Avro schemas, for validating untrusted input.

Use them where input comes from outside (``blackbox capture FILE.json``, an HTTP body), never on
the producer's hot path (:mod:`schemas.codec` encodes plain dicts directly).

- Attributes are snake_case, the JSON form is camelCase (aliases); both names are accepted.
- Validation is strict: no coercion of ``"1"`` to ``1`` or ``1`` to ``True``; unknown keys are
  refused (except in ``samplingParameters``, which keeps any other JSON-valued key).
- Enumerated strings are checked where the article is explicit (``stopReason``,
  ``replayAccessScope``, ``retrievalMethod``, ``outcome.status``, ``captureLevel``, span
  ``encoding``) and for blackbox's own (``fidelity``, a model call's body encodings). The Avro schemas store them as plain strings, so widening a set later is a
  model change, not a wire change. ``tier``, ``sourceType`` and ``algorithm`` stay free-form.
- JSON-valued content is kept as the very Python value given (key order, ``-0.0``, big ints).
- ``to_json()`` returns the full JSON form (every field, ``null`` for absent), the same dict
  :func:`schemas.codec.decode` yields.

Errors are :class:`~schemas.errors.ContractError` whose ``path`` names the first bad field, e.g.
``executionTrace.toolCalls[1].sequence``.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    PrivateAttr,
    StringConstraints,
    ValidationError,
    model_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel

from schemas.errors import ContractError

__all__ = [
    "AgentConfiguration",
    "Capture",
    "ClaimCheck",
    "Consequential",
    "ContextSpan",
    "EventSignature",
    "ExecutionTrace",
    "ExternalState",
    "Fidelity",
    "FlagEvent",
    "HttpHeader",
    "Input",
    "MemoryState",
    "ModelCall",
    "ObservableExternal",
    "OriginalHash",
    "Outcome",
    "Privacy",
    "Provenance",
    "Redaction",
    "RenderedContext",
    "ReplayPolicy",
    "SamplingParameters",
    "Signature",
    "ToolCall",
    "WorkingSetEntry",
    "validate_json",
]

CONTRACT_VERSION = "replay/v1"
_LONG_MAX = 2**63 - 1

# --- field types ----------------------------------------------------------------------------------


def _utf8(value: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"not encodable as UTF-8 (lone surrogate at index {exc.start})") from None
    return value


def _json_value(value: Any) -> Any:
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        text.encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise ValueError(f"not a JSON value: {exc}") from None
    if json.loads(text) != value:
        raise ValueError("not a JSON value (non-string object keys or non-JSON types)")
    return value


def _number(value: Any) -> Any:
    if type(value) not in (int, float):
        raise ValueError("Input should be a number")
    return _json_value(value)


_ISO_8601 = re.compile(
    r"^(?P<date>\d{4}-\d{2}-\d{2})[Tt ](?P<time>\d{2}:\d{2}:\d{2})(?P<fraction>\.\d+)?"
    r"(?P<offset>[Zz]|[+-]\d{2}:\d{2})$"
)


def _timestamp(value: str) -> str:
    match = _ISO_8601.match(value)
    if match is None:
        raise ValueError("must be an ISO-8601 timestamp with an offset, e.g. 2026-07-23T13:00:00.456Z")
    fraction = (match["fraction"] or "")[:7]  # datetime takes at most microseconds
    offset = "+00:00" if match["offset"] in ("Z", "z") else match["offset"]
    try:
        datetime.fromisoformat(f"{match['date']}T{match['time']}{fraction}{offset}")
    except ValueError as exc:
        raise ValueError(f"not a valid timestamp: {exc}") from None
    return value


Text = Annotated[str, AfterValidator(_utf8)]
"""Any str that can be stored (UTF-8 encodable), kept exactly."""
Id = Annotated[str, StringConstraints(min_length=1), AfterValidator(_utf8)]
Timestamp = Annotated[str, AfterValidator(_timestamp)]
"""ISO-8601 with an offset, kept verbatim (the string, not a datetime)."""
Hash = Annotated[str, StringConstraints(pattern=r"^sha256:[0-9a-f]{64}$")]
PactVersionId = Annotated[str, StringConstraints(pattern=r"^pv_[0-9a-f]{24}$")]
"""A pact version's id (``producers.pacts.signed``): ``pv_`` + 24 lowercase hex digits."""
JsonValue = Annotated[Any, AfterValidator(_json_value)]
"""Any JSON value, kept as given (key order, -0.0, big ints)."""
Number = Annotated[float, PlainValidator(_number)]
"""A JSON number kept as given (an int stays an int)."""
Count = Annotated[int, Field(ge=0, le=_LONG_MAX)]
Long = Annotated[int, Field(ge=-(2**63), le=_LONG_MAX)]

CaptureLevel = Literal["full", "structured-only", "sampled"]
Fidelity = Literal["wire", "sdk", "semantic"]
"""How a capture was taken: exact bytes of every model call, by hand, or rebuilt from spans."""
BodyEncoding = Literal["utf-8", "base64"]
OutcomeStatus = Literal["success", "failure", "unknown"]
RetrievalMethod = Literal["semantic", "bm25", "tag_filter", "other"]
StopReason = Literal["end_turn", "max_tokens", "tool_call", "error"]
AccessScope = Literal["operator", "regulator", "counterparty"]
SpanEncoding = Literal["json-string", "raw"]


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        extra="forbid",
        strict=True,
        protected_namespaces=(),
    )


# --- the capture ----------------------------------------------------------------------------------


class Consequential(_Model):
    flagged: bool
    reason: Text | None = None


class Outcome(_Model):
    status: OutcomeStatus
    reason: Text | None = None


class Input(_Model):
    origin_user_id: Text | None = None
    origin_session_id: Text | None = None
    request_payload: JsonValue = None
    request_payload_hash: Hash | None = None


class SamplingParameters(BaseModel):
    """Known sampling keys are typed; any other key is kept (a JSON value), as is key order.

    Only the keys that were given are written back (absent stays absent, ``null`` stays null).
    """

    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="allow", strict=True)
    _keys: tuple[str, ...] = PrivateAttr(default=())

    temperature: Number | None = None
    top_p: Number | None = None
    max_tokens: Count | None = None
    stop: list[Text] | None = None
    seed: Long | None = None
    presence_penalty: Number | None = None
    frequency_penalty: Number | None = None

    @model_validator(mode="wrap")
    @classmethod
    def _remember_keys(cls, data: Any, handler: Any) -> Any:
        instance = handler(data)
        if isinstance(data, dict):
            instance.__pydantic_private__["_keys"] = tuple(data)
        return instance

    @model_validator(mode="after")
    def _extra_are_json(self) -> Self:
        for key, value in (self.__pydantic_extra__ or {}).items():
            try:
                _json_value(value)
            except ValueError as exc:
                raise ValueError(f"{key}: {exc}") from None
        return self

    @model_serializer(mode="wrap")
    def _given_keys_in_order(self, handler: Any) -> dict[str, Any]:
        dumped: dict[str, Any] = handler(self)
        keys = self._keys or tuple(self.model_fields_set) + tuple(self.__pydantic_extra__ or ())
        return {key: dumped[key] for key in keys if key in dumped}


class AgentConfiguration(_Model):
    system_prompt_version: Text | None = None
    system_prompt_hash: Hash | None = None
    system_prompt_text: Text | None = None
    tool_schema_version: Text | None = None
    tool_schema_hash: Hash | None = None
    tool_schema_json: JsonValue = None
    model_identifier: Id
    model_version: Text | None = None
    model_provider_endpoint: Text | None = None
    sampling_parameters: SamplingParameters


class ContextSpan(_Model):
    part: Id
    start: Count
    end: Count
    encoding: SpanEncoding

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.end < self.start:
            raise ValueError(f"span end {self.end} is before start {self.start}")
        return self


class RenderedContext(_Model):
    format: Id
    text: Text | None = None
    spans: list[ContextSpan]
    hash: Hash | None = None


class Provenance(_Model):
    writer_id: Text | None = None
    written_at: Text | None = None
    source_type: Text | None = None


class WorkingSetEntry(_Model):
    entry_id: Id
    tier: Id
    provenance: Provenance
    rendered_content: Text | None = None
    context_position: Count
    retrieval_score: float | None = None
    retrieval_method: RetrievalMethod | None = None
    embedding_model: Text | None = None
    embedding_version: Text | None = None
    rendered_content_hash: Hash | None = None


class MemoryState(_Model):
    working_set_entries: list[WorkingSetEntry]
    total_context_tokens: Count | None = None
    context_set_hash: Hash | None = None
    context_set_algorithm: Text | None = None
    context_set_leaf_count: Count | None = None


class ToolCall(_Model):
    sequence: Count
    tool_name: Id
    input: JsonValue = None
    input_hash: Hash | None = None
    output: JsonValue = None
    output_hash: Hash | None = None
    latency_ms: Count | None = None
    error_ref: Text | None = None


class HttpHeader(_Model):
    name: Id
    value: Text


class ModelCall(_Model):
    """One logical model call of a wire capture (capture/v2): exact request and response bodies."""

    sequence: Count
    format: Id
    method: Id
    endpoint: Text | None = None
    path: Text
    query: Text | None = None
    request_headers: list[HttpHeader]
    request_body: Text | None = None
    request_body_encoding: BodyEncoding
    request_body_hash: Hash | None = None
    status: Count | None = None
    response_body: Text | None = None
    response_body_encoding: BodyEncoding
    response_body_hash: Hash | None = None
    response_content_encoding: Text | None = None
    streamed: bool
    complete: bool
    attempts: Count
    error: Text | None = None
    started_at: Text | None = None
    latency_ms: Count | None = None
    spans: list[ContextSpan]


class ExecutionTrace(_Model):
    reasoning_tokens: list[Text] | None = None
    reasoning_tokens_hash: Hash | None = None
    reasoning_token_count: Count | None = None
    tool_calls: list[ToolCall]
    model_calls: list[ModelCall] = Field(default_factory=list)
    final_output_text: Text | None = None
    final_output_hash: Hash | None = None
    stop_reason: StopReason | None = None
    total_latency_ms: Count | None = None


class ObservableExternal(_Model):
    key: Id
    captured_value: JsonValue = None
    captured_value_hash: Hash | None = None
    captured_at: Text | None = None
    source_endpoint: Text | None = None


class ExternalState(_Model):
    observable_externals: list[ObservableExternal]


class ReplayPolicy(_Model):
    retention_days: Count | None = None
    pii_redacted: bool
    replay_access_scope: AccessScope


class Redaction(_Model):
    """One span of personal data replaced at capture (capture/v3)."""

    part: Id
    pointer: Text
    start: Count
    end: Count
    kind: Id
    placeholder: Id

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.end < self.start:
            raise ValueError(f"redaction end {self.end} is before start {self.start}")
        return self


class OriginalHash(_Model):
    part: Id
    hash: Annotated[str, StringConstraints(pattern=r"^hmac-sha256:[0-9a-f]{64}$")]


class Privacy(_Model):
    """What the producer redacted and the sealed original (capture/v3; null: nothing redacted)."""

    detectors: Id
    redactions: list[Redaction]
    original_hashes: list[OriginalHash]
    cipher: Literal["AES-256-GCM"] | None = None
    sealed_original: Text | None = None
    sealed_original_hash: Hash | None = None


class Signature(_Model):
    algorithm: Text | None = None
    public_key_ref: Text | None = None
    signature_bytes: Text | None = None


class _JsonForm(_Model):
    """``from_json`` / ``to_json`` with errors that name the field path."""

    def to_json(self) -> dict[str, Any]:
        """The JSON form (camelCase, every field, ``null`` for absent values)."""
        return self.model_dump(by_alias=True)

    @classmethod
    def from_json(cls, value: Any) -> Self:
        """Validate a JSON-form dict; raise ContractError naming the first bad field."""
        try:
            return cls.model_validate(value)
        except ValidationError as exc:
            raise _contract_error(exc) from exc


class Capture(_JsonForm):
    """One replay/v1 capture. Hash and signature fields are optional (an unsealed capture)."""

    version: Literal["replay/v1"]
    decision_id: Id
    agent_id: Id
    runtime_id: Text | None = None
    captured_at: Timestamp
    capture_level: CaptureLevel
    fidelity: Fidelity = "sdk"
    consequential: Consequential
    outcome: Outcome
    input: Input
    agent_configuration: AgentConfiguration
    rendered_context: RenderedContext | None = None
    memory_state: MemoryState
    execution_trace: ExecutionTrace
    external_state: ExternalState
    replay_policy: ReplayPolicy
    privacy: Privacy | None = None
    signature: Signature
    # capture/v4: the pact version the runtime judged the decision under (null: none bound the agent)
    pact_version: PactVersionId | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON form; ``pactVersion`` only when set (as :func:`schemas.codec.decode`)."""
        value = super().to_json()
        if value.get("pactVersion") is None:
            value.pop("pactVersion", None)
        return value


# --- events ---------------------------------------------------------------------------------------


class EventSignature(_Model):
    algorithm: Id
    public_key_ref: Id
    signature_bytes: Id


class FlagEvent(_JsonForm):
    """flag_consequential: upgrade a decision to consequential (``failure``: it failed)."""

    decision_id: Id
    agent_id: Id
    reason: Text
    flagged_at: Timestamp
    failure: bool
    signature: EventSignature | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON form; ``signature`` only when present (as :func:`schemas.codec.decode`)."""
        value = super().to_json()
        if value.get("signature") is None:
            value.pop("signature", None)
        return value


class ClaimCheck(_JsonForm):
    """A reference to a capture body written to the blob store (too large for the broker)."""

    decision_id: Id
    agent_id: Id
    blob_key: Id
    sha256: Hash
    size: Count
    capture_level: CaptureLevel
    consequential: bool


_MODELS: dict[str, type[_JsonForm]] = {"capture": Capture, "flag": FlagEvent, "claim_check": ClaimCheck}


def validate_json(kind: str, value: Any) -> _JsonForm:
    """Validate a JSON-form value of ``kind`` (``capture``, ``flag``, ``claim_check``)."""
    try:
        model = _MODELS[kind]
    except KeyError:
        raise ContractError(f"unknown kind {kind!r}; known: {sorted(_MODELS)}") from None
    return model.from_json(value)


# --- errors ---------------------------------------------------------------------------------------


def _path(loc: tuple[int | str, ...]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else part
    return path


def _contract_error(exc: ValidationError) -> ContractError:
    errors = exc.errors(include_url=False)
    first = errors[0]
    path = _path(first["loc"])
    message = first["msg"].removeprefix("Value error, ")
    if first["type"] == "missing":
        message = "required field is missing"
    if len(errors) > 1:
        others = ", ".join(_path(e["loc"]) or "<root>" for e in errors[1:6])
        more = "" if len(errors) <= 6 else f", +{len(errors) - 6} more"
        message += f" (also: {others}{more})"
    return ContractError(message, path=path)

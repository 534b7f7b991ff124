"""The pydantic models: mirror the Avro schema, keep the JSON form exactly, name bad fields."""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError
from schemas_testdata import (
    claim_check_event,
    dumps_ordered,
    example,
    flag_event,
    hard_capture,
    structured_only_capture,
)

from schemas import codec
from schemas.errors import ContractError
from schemas.models import (
    Capture,
    ClaimCheck,
    FlagEvent,
    SamplingParameters,
    ToolCall,
    validate_json,
)

# --- the models mirror the schema -------------------------------------------------------------------


@pytest.fixture
def capture() -> dict[str, Any]:
    """A fresh copy of the example capture (mutate freely)."""
    return example()


@pytest.fixture
def hard() -> dict[str, Any]:
    return hard_capture()


def _record_fields(schema: Any) -> dict[str, list[str]]:
    """Record name -> its field names in order, for every record in an .avsc."""
    records: dict[str, list[str]] = {}

    def walk(node: Any) -> None:
        if isinstance(node, list):
            for branch in node:
                walk(branch)
        elif isinstance(node, dict):
            if node.get("type") == "record":
                records[node["name"]] = [field["name"] for field in node["fields"]]
                for field in node["fields"]:
                    walk(field["type"])
            elif node.get("type") == "array":
                walk(node["items"])

    walk(schema)
    return records


def _model_aliases(model: type[BaseModel]) -> list[str]:
    return [field.alias or name for name, field in model.model_fields.items()]


def _models_by_record(root: type[BaseModel]) -> dict[str, type[BaseModel]]:
    found: dict[str, type[BaseModel]] = {}

    def walk(model: type[BaseModel]) -> None:
        found[model.__name__] = model
        for field in model.model_fields.values():
            for arg in _flatten(field.annotation):
                if isinstance(arg, type) and issubclass(arg, BaseModel) and arg.__name__ not in found:
                    walk(arg)

    walk(root)
    return found


def _flatten(annotation: Any) -> list[Any]:
    args = getattr(annotation, "__args__", None)
    if not args:
        return [annotation]
    return [leaf for arg in args for leaf in _flatten(arg)]


@pytest.mark.parametrize(
    ("schema_name", "root", "renames"),
    [
        ("capture/v4", Capture, {"Capture": "Capture"}),
        ("flag/v1", FlagEvent, {"FlagConsequential": "FlagEvent"}),
        ("claim_check/v1", ClaimCheck, {"ClaimCheck": "ClaimCheck"}),
    ],
)
def test_every_avro_record_has_a_model_with_the_same_fields_in_order(
    schema_name: str, root: type[BaseModel], renames: dict[str, str]
) -> None:
    records = _record_fields(codec.KNOWN_SCHEMAS[schema_name].raw)
    models = _models_by_record(root)
    for record, fields in records.items():
        model = models[renames.get(record, record)]
        if model is SamplingParameters:
            # Typed slots mirror the known keys; the two bookkeeping fields are wire-only.
            assert fields[:-2] == _model_aliases(model)
            assert fields[-2:] == ["otherParametersJson", "presentKeys"]
        else:
            assert fields == _model_aliases(model), record


# --- the JSON form is kept exactly ------------------------------------------------------------------


@pytest.mark.parametrize("build", [example, hard_capture, structured_only_capture])
def test_from_json_to_json_is_exact_and_equals_the_decoded_form(build: Any) -> None:
    capture = build()
    model = Capture.from_json(capture)
    assert dumps_ordered(model.to_json()) == dumps_ordered(capture)
    assert dumps_ordered(model.to_json()) == dumps_ordered(codec.normalize_capture(capture))


def test_hard_values_survive_the_model(hard: dict[str, Any]) -> None:
    out = Capture.from_json(hard).to_json()
    floats = out["input"]["requestPayload"]["floats"]
    assert math.copysign(1.0, floats[2]) == -1.0 and floats[1] == 1e-300 and floats[0] == 0.1
    assert out["input"]["requestPayload"]["ints"][-1] == 10**30
    assert list(out["agentConfiguration"]["toolSchemaJson"]["z"]) == ["z", "a"]
    sampling = out["agentConfiguration"]["samplingParameters"]
    assert list(sampling) == list(hard["agentConfiguration"]["samplingParameters"])
    assert type(sampling["temperature"]) is int and sampling["max_tokens"] is None


def test_unsealed_capture_validates_with_null_hashes(capture: dict[str, Any]) -> None:
    model = Capture.from_json(capture)
    assert model.signature.signature_bytes is None
    assert model.memory_state.working_set_entries[0].rendered_content_hash is None


def test_models_are_frozen_and_accept_field_names(capture: dict[str, Any]) -> None:
    model = Capture.from_json(capture)
    with pytest.raises(ValidationError):
        model.decision_id = "other"  # type: ignore[misc]
    call = ToolCall(sequence=1, tool_name="get_balance", input={"z": 1, "a": 2})
    assert call.model_dump(by_alias=True)["toolName"] == "get_balance"
    assert list(call.model_dump(by_alias=True)["input"]) == ["z", "a"]


def test_absent_optional_fields_become_null(capture: dict[str, Any]) -> None:
    del capture["runtimeId"]
    del capture["executionTrace"]["toolCalls"][0]["errorRef"]
    out = Capture.from_json(capture).to_json()
    assert out["runtimeId"] is None and out["executionTrace"]["toolCalls"][0]["errorRef"] is None


def test_sampling_parameters_keep_given_keys_only() -> None:
    params = SamplingParameters.model_validate({"seed": 1, "vendor": {"z": 1, "a": 2}, "temperature": None})
    assert params.model_dump() == {"seed": 1, "vendor": {"z": 1, "a": 2}, "temperature": None}
    assert list(params.model_dump()) == ["seed", "vendor", "temperature"]
    assert SamplingParameters(temperature=0.5).model_dump() == {"temperature": 0.5}


# --- bad input names the field --------------------------------------------------------------------


def _set(capture: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    node: Any = capture
    for part in parents:
        name, _, index = part.partition("[")
        node = node[name]
        if index:
            node = node[int(index.rstrip("]"))]
    node[last] = value


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        ("version", "replay/v2", "replay/v1"),
        ("decisionId", "", "at least 1"),
        ("decisionId", 42, "string"),
        ("capturedAt", "yesterday", "ISO-8601"),
        ("capturedAt", "2026-07-23T13:00:00", "ISO-8601"),
        ("capturedAt", "2026-02-30T13:00:00Z", "timestamp"),
        ("captureLevel", "partial", "full"),
        ("outcome.status", "ok", "success"),
        ("consequential.flagged", "true", "boolean"),
        ("agentConfiguration.samplingParameters.temperature", "0.2", "number"),
        ("agentConfiguration.samplingParameters.max_tokens", 4096.0, "integer"),
        ("agentConfiguration.samplingParameters.stop", "</done>", "list"),
        ("agentConfiguration.samplingParameters.seed", True, "integer"),
        ("agentConfiguration.systemPromptHash", "sha256:XYZ", "pattern"),
        ("agentConfiguration.modelIdentifier", None, "string"),
        ("input.requestPayload", {"x": float("nan")}, "JSON"),
        ("input.requestPayload", {1: "int key"}, "JSON"),
        ("input.requestPayload", {"x": {1, 2}}, "JSON"),
        ("renderedContext.spans[1].encoding", "utf-16", "json-string"),
        ("renderedContext.spans[0].end", -1, "greater than or equal"),
        ("memoryState.workingSetEntries[1].retrievalMethod", "vector", "semantic"),
        ("memoryState.workingSetEntries[0].contextPosition", "0", "integer"),
        ("memoryState.workingSetEntries[1].provenance.writerId", 7, "string"),
        ("executionTrace.toolCalls[1].sequence", "2", "integer"),
        ("executionTrace.toolCalls[0].latencyMs", 1.5, "integer"),
        ("executionTrace.stopReason", "stop", "end_turn"),
        ("executionTrace.reasoningTokens", "one string", "list"),
        ("externalState.observableExternals[0].capturedValue", float("inf"), "JSON"),
        ("replayPolicy.replayAccessScope", "public", "operator"),
        ("replayPolicy.retentionDays", -1, "greater than or equal"),
        ("signature.publicKeyRef", 5, "string"),
        ("agentConfiguration.systemPromptText", "lone \udc00", "UTF-8"),
        ("executionTrace.toolCalls[0].surprise", 1, "Extra inputs"),
    ],
)
def test_bad_input_raises_contract_error_naming_the_path(
    capture: dict[str, Any], path: str, value: Any, message: str
) -> None:
    _set(capture, path, value)
    with pytest.raises(ContractError) as info:
        Capture.from_json(capture)
    assert info.value.path == path
    assert message in str(info.value)
    assert str(info.value).startswith(f"{path}: ")


@pytest.mark.parametrize(
    "path",
    [
        "decisionId",
        "agentConfiguration.modelIdentifier",
        "executionTrace.toolCalls[1].toolName",
        "replayPolicy.piiRedacted",
    ],
)
def test_missing_required_field_names_the_path(capture: dict[str, Any], path: str) -> None:
    *parents, last = path.split(".")
    node: Any = capture
    for part in parents:
        name, _, index = part.partition("[")
        node = node[name][int(index.rstrip("]"))] if index else node[name]
    del node[last]
    with pytest.raises(ContractError, match="required field is missing") as info:
        Capture.from_json(capture)
    assert info.value.path == path


def test_span_end_before_start_is_refused(capture: dict[str, Any]) -> None:
    capture["renderedContext"]["spans"][0]["end"] = 1
    with pytest.raises(ContractError) as info:
        Capture.from_json(capture)
    assert info.value.path == "renderedContext.spans[0]"


def test_several_errors_report_the_first_and_list_the_rest(capture: dict[str, Any]) -> None:
    capture["decisionId"] = 1
    capture["executionTrace"]["stopReason"] = "nope"
    with pytest.raises(ContractError) as info:
        Capture.from_json(capture)
    assert info.value.path == "decisionId"
    assert "executionTrace.stopReason" in str(info.value)


@pytest.mark.parametrize("value", [None, [], "capture", 3])
def test_non_object_input_is_refused(value: Any) -> None:
    with pytest.raises(ContractError):
        Capture.from_json(value)


def test_timestamps_are_kept_verbatim(capture: dict[str, Any]) -> None:
    for stamp in ("2026-07-23T13:00:00.456789123Z", "2026-07-23T15:00:00+02:00", "2026-07-23 13:00:00z"):
        capture["capturedAt"] = stamp
        assert Capture.from_json(capture).to_json()["capturedAt"] == stamp


# --- events ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("signed", [False, True])
def test_flag_event_model(signed: bool) -> None:
    value = flag_event(signed=signed)
    assert dumps_ordered(FlagEvent.from_json(value).to_json()) == dumps_ordered(value)
    assert dumps_ordered(validate_json("flag", value).to_json()) == dumps_ordered(value)


def test_claim_check_model() -> None:
    value = claim_check_event()
    assert dumps_ordered(ClaimCheck.from_json(value).to_json()) == dumps_ordered(value)
    value["sha256"] = "abc"
    with pytest.raises(ContractError) as info:
        ClaimCheck.from_json(value)
    assert info.value.path == "sha256"


def test_flag_event_errors() -> None:
    value = flag_event(signed=True)
    value["signature"]["signatureBytes"] = ""
    with pytest.raises(ContractError) as info:
        FlagEvent.from_json(value)
    assert info.value.path == "signature.signatureBytes"
    with pytest.raises(ContractError, match="unknown kind"):
        validate_json("nope", {})

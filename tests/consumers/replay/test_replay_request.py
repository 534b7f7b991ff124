"""Rebuilding the exact model request: verbatim messages, hash checks before sending, the HTTP client."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from replay_servers import GOLDEN, ModelServer

from consumers.app.settings import load_service_settings
from consumers.replay import (
    ModelNotFound,
    OpenAICompatibleClient,
    Replayer,
    UnverifiedCapture,
    rebuild_request,
)
from producers.wire.openai_chat import ChatRequest, append_messages
from schemas.errors import ContentHashMismatch, ContractError, ModelClientError


def _golden(name: str = "replay-identical.json") -> dict[str, Any]:
    return json.loads((GOLDEN / name).read_text(encoding="utf-8"))


def test_rebuilt_request_matches_every_captured_hash() -> None:
    rebuilt = rebuild_request(_golden())
    assert [c.part for c in rebuilt.checks] == [
        "renderedContext.text",
        "agentConfiguration.systemPromptText",
        "agentConfiguration.toolSchemaJson",
    ]
    assert all(c.ok for c in rebuilt.checks)
    rebuilt.require_exact()


@pytest.mark.parametrize(
    ("edit", "part"),
    [
        (
            lambda c: c["renderedContext"].update(text=c["renderedContext"]["text"].replace("v4.7", "v4.6")),
            "renderedContext.text",
        ),
        (
            lambda c: c["agentConfiguration"].update(systemPromptText="edited"),
            "agentConfiguration.systemPromptText",
        ),
        (
            lambda c: c["agentConfiguration"]["toolSchemaJson"]["tools"].pop(),
            "agentConfiguration.toolSchemaJson",
        ),
    ],
)
def test_a_request_that_differs_from_the_capture_is_caught_before_sending(
    edit: Callable[[dict[str, Any]], Any], part: str
) -> None:
    capture = _golden()
    edit(capture)
    rebuilt = rebuild_request(capture)
    assert [c.part for c in rebuilt.mismatches] == [part]
    with pytest.raises(ContentHashMismatch) as caught:
        rebuilt.require_exact()
    assert caught.value.part == part


def test_allow_unverified_records_the_rebuild_mismatch(
    make_replayer: Callable[..., Replayer], golden_dir: Path
) -> None:
    path = golden_dir / "replay-identical.json"
    capture = json.loads(path.read_text(encoding="utf-8"))
    capture["renderedContext"]["text"] = capture["renderedContext"]["text"].replace("twice", "thrice")
    path.write_text(json.dumps(capture), encoding="utf-8")

    with pytest.raises(ContentHashMismatch):
        make_replayer().replay("dec_golden_identical")
    result = make_replayer(allow_unverified=True).replay(
        "dec_golden_identical", raise_on_replay_failure=False
    )
    assert not result.verified
    assert "rebuilt request differs from the capture in renderedContext.text" in (
        result.verification_note or ""
    )


def test_no_verifier_means_refused_unless_allowed(make_replayer: Callable[..., Replayer]) -> None:
    with pytest.raises(UnverifiedCapture):
        make_replayer(verifier=None).replay("dec_golden_identical")
    result = make_replayer(verifier=None, allow_unverified=True).replay("dec_golden_identical")
    assert not result.verified and "no trust store" in (result.verification_note or "")


def test_body_is_concatenated_around_the_verbatim_messages() -> None:
    text = '[{"role": "user",   "content": "spacing \\u00e9 kept"}]'
    request = ChatRequest(
        model="m", messages_text=text, tools=[{"type": "function"}], sampling={"temperature": 0, "stop": None}
    )
    body = request.body()
    assert (
        body == '{"model": "m", "messages": ' + text + ', "tools": [{"type": "function"}], "temperature": 0}'
    )
    later = request.body([{"role": "tool", "tool_call_id": "c1", "content": "{}"}])
    assert later.startswith('{"model": "m", "messages": ' + text[:-1] + ", {")
    assert json.loads(later)["messages"][1]["role"] == "tool"


def test_append_messages_to_an_empty_array_and_bad_text() -> None:
    assert json.loads(append_messages("[ ]", [{"a": 1}])) == [{"a": 1}]
    assert append_messages("[1]", []) == "[1]"
    with pytest.raises(ContractError):
        append_messages('{"not": "an array"}', [{"a": 1}])


def test_client_endpoint_and_key_from_flags_then_settings(model_server: ModelServer, tmp_path: Path) -> None:
    configured = load_service_settings(
        data_dir=tmp_path, model_endpoint="http://env/v1", model_api_key="env-key"
    )
    assert OpenAICompatibleClient.from_settings(configured).endpoint == "http://env/v1"
    flagged = OpenAICompatibleClient.from_settings(configured, endpoint="http://flag/v1")
    assert flagged.endpoint == "http://flag/v1"
    # No operator endpoint: none at all (the captured one is never dialled on its own; issue 8).
    assert OpenAICompatibleClient.from_settings(load_service_settings(data_dir=tmp_path)).endpoint is None

    with OpenAICompatibleClient.from_settings(
        load_service_settings(data_dir=tmp_path), endpoint=model_server.endpoint + "/", api_key="flag-key"
    ) as client:
        request = ChatRequest(
            model="acme-support",
            messages_text='[{"role": "user", "content": "cus_0042: balance?"}]',
            endpoint="http://127.0.0.1:9/v1",  # the captured endpoint: shown, not used
        )
        response = client.complete(request)
    assert response.message["tool_calls"][0]["function"]["name"] == "lookup_customer"
    assert response.finish_reason == "tool_calls"
    (path, body), headers = model_server.requests[0], model_server.headers[0]
    assert path == "/v1/chat/completions"
    assert headers["authorization"] == "Bearer flag-key"
    assert body == request.body().encode("utf-8")


def test_client_errors_are_model_client_errors(model_server: ModelServer) -> None:
    with (
        OpenAICompatibleClient(endpoint=model_server.url + "/nowhere") as client,
        pytest.raises(ModelClientError, match="answered 404"),
    ):
        client.complete(ChatRequest(model="acme-support", messages_text="[]"))
    with (
        OpenAICompatibleClient(endpoint=model_server.endpoint) as client,
        pytest.raises(ModelNotFound, match="retired-model"),
    ):
        client.complete(ChatRequest(model="retired-model", messages_text="[]"))
    with pytest.raises(ModelClientError, match="no model endpoint"):
        OpenAICompatibleClient().complete(ChatRequest(model="m", messages_text="[]"))

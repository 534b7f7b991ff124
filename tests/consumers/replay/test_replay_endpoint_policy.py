"""Replay dials only endpoints the operator configured, never one because a capture names it
(issue 8, item 2)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr
from replay_scripted import ScriptedModel, record_decision
from replay_servers import ModelServer
from typer.testing import CliRunner

from consumers.app.settings import load_service_settings
from consumers.cli import app
from consumers.replay import CallableModelClient, OpenAICompatibleClient, Replayer
from consumers.replay.endpoints import (
    EndpointNotAllowed,
    EndpointPolicy,
    InsecureEndpoint,
    ModelEndpoint,
    load_allow_list,
    normalize_url,
    require_safe_transport,
)
from producers.evidence import Signer, TrustStore, seal
from producers.wire.openai_chat import ChatRequest
from schemas.errors import ContractError

BLACKBOX = [sys.executable, "-c", "from consumers.cli import main; main()"]
SECRET = "sk-global-operator-key"


@pytest.fixture
def listener() -> Iterator[ModelServer]:
    """A listener the capture names: it answers like a model, so a dial would succeed."""
    server = ModelServer(ScriptedModel(served=("acme-support",)))
    yield server
    server.close()


def _capture_naming(endpoint: str, *, directory: Path, signer: Signer) -> Path:
    capture = record_decision(decision_id="dec_names_endpoint")
    capture["agentConfiguration"]["modelProviderEndpoint"] = endpoint
    path = directory / "names-endpoint.json"
    path.write_text(json.dumps(seal(capture, signer)), encoding="utf-8")
    return path


def _blackbox(args: list[str], *, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("BLACKBOX_")}
    return subprocess.run(
        [*BLACKBOX, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**clean, "COLUMNS": "400", **env},
        check=False,
    )


def test_a_capture_naming_a_listener_gets_no_request_and_no_key(
    tmp_path: Path, listener: ModelServer, signer: Signer, trust: TrustStore
) -> None:
    trust.save(tmp_path / "trust.toml")
    (tmp_path / "bb" / "index").mkdir(parents=True)  # an existing (empty) data directory
    capture = _capture_naming(listener.endpoint, directory=tmp_path, signer=signer)
    out = _blackbox(
        ["replay", "--file", str(capture), "--json"],
        env={
            "BLACKBOX_DATA_DIR": str(tmp_path / "bb"),
            "BLACKBOX_TRUST_STORE": str(tmp_path / "trust.toml"),
            "BLACKBOX_MODEL_API_KEY": SECRET,
        },
    )
    assert listener.requests == []
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    assert out.stderr.startswith("error: ")
    assert listener.endpoint in out.stderr  # the captured endpoint is shown ...
    assert (
        "--model-endpoint" in out.stderr and "model_endpoints.toml" in out.stderr
    )  # ... and how to allow it
    assert SECRET not in out.stderr + out.stdout


# -- in-process CLI: allow-list and flags --------------------------------------------------------
@pytest.fixture
def second_server() -> Iterator[ModelServer]:
    server = ModelServer(ScriptedModel(served=("acme-support",)))
    yield server
    server.close()


def _cli(tmp_path: Path, chdb_root: Path, trust: TrustStore, **env: str) -> Callable[..., Any]:
    trust.save(tmp_path / "trust.toml")
    base = {
        "BLACKBOX_DATA_DIR": str(tmp_path / "bb"),
        "BLACKBOX_CHDB_PATH": str(chdb_root),
        "BLACKBOX_TRUST_STORE": str(tmp_path / "trust.toml"),
        "BLACKBOX_CALLER": f"endpoint-{uuid.uuid4().hex[:8]}",
        "COLUMNS": "400",
        **env,
    }

    def invoke(*args: str) -> Any:
        return CliRunner().invoke(app, list(args), env=base, catch_exceptions=True)

    return invoke


def test_an_allow_listed_captured_endpoint_gets_its_own_key_not_the_global_one(
    tmp_path: Path, listener: ModelServer, signer: Signer, trust: TrustStore, chdb_root: Path
) -> None:
    allow_list = tmp_path / "endpoints.toml"
    # A different spelling of the same endpoint: the match is on the normalized URL.
    spelled = listener.endpoint.replace("http://", "HTTP://") + "/"
    allow_list.write_text(
        f'[[endpoint]]\nname = "local-vllm"\nurl = "{spelled}"\napi_key_env = "REPLAY_TEST_ENTRY_KEY"\n',
        encoding="utf-8",
    )
    capture = _capture_naming(listener.endpoint, directory=tmp_path, signer=signer)
    cli = _cli(
        tmp_path,
        chdb_root,
        trust,
        BLACKBOX_MODEL_ENDPOINTS=str(allow_list),
        BLACKBOX_MODEL_API_KEY=SECRET,
        REPLAY_TEST_ENTRY_KEY="sk-entry-key",
    )
    result = cli("replay", "--file", str(capture), "--json")
    assert result.exit_code == 0, result.output
    assert listener.requests, "the allow-listed endpoint was not used"
    assert {h.get("authorization") for h in listener.headers} == {"Bearer sk-entry-key"}
    body = json.loads(result.stdout)
    assert body["capturedEndpoint"] == listener.endpoint
    assert body["modelEndpoint"].startswith(listener.endpoint + " (allow-list entry 'local-vllm'")
    assert "$REPLAY_TEST_ENTRY_KEY" in body["modelEndpoint"] and SECRET not in result.stdout


def test_the_flag_endpoint_wins_and_the_global_key_stays_with_its_endpoint(
    tmp_path: Path,
    listener: ModelServer,
    second_server: ModelServer,
    model_server: ModelServer,
    signer: Signer,
    trust: TrustStore,
    chdb_root: Path,
) -> None:
    allow_list = tmp_path / "endpoints.toml"
    allow_list.write_text(f'[[endpoint]]\nname = "captured"\nurl = "{listener.endpoint}"\n', encoding="utf-8")
    capture = _capture_naming(listener.endpoint, directory=tmp_path, signer=signer)
    cli = _cli(
        tmp_path,
        chdb_root,
        trust,
        BLACKBOX_MODEL_ENDPOINTS=str(allow_list),
        BLACKBOX_MODEL_ENDPOINT=model_server.endpoint,
        BLACKBOX_MODEL_API_KEY=SECRET,
    )
    result = cli("replay", "--file", str(capture), "--model-endpoint", second_server.endpoint)
    assert result.exit_code == 0, result.output
    assert listener.requests == [] and model_server.requests == []
    assert second_server.requests
    # BLACKBOX_MODEL_API_KEY belongs to BLACKBOX_MODEL_ENDPOINT, not to the endpoint of the flag.
    assert all("authorization" not in h for h in second_server.headers)
    assert f"model endpoint: {second_server.endpoint} (--model-endpoint; no key)" in result.stdout
    assert f"captured: {listener.endpoint}" in result.stdout

    keyed = cli("replay", "--file", str(capture), "--json")  # the setting, with its key
    assert keyed.exit_code == 0, keyed.output
    assert {h.get("authorization") for h in model_server.headers} == {f"Bearer {SECRET}"}
    assert listener.requests == []


# -- the policy, no network ----------------------------------------------------------------------
def _recording_client(policy: EndpointPolicy) -> tuple[OpenAICompatibleClient, list[httpx.Request]]:
    sent: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(
            200, json={"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}
        )

    return OpenAICompatibleClient(
        policy=policy, http=httpx.Client(transport=httpx.MockTransport(handle))
    ), sent


@pytest.mark.parametrize(
    ("url", "sends_key", "allowed", "refused"),
    [
        ("http://models.example.com/v1", True, False, True),
        ("http://10.0.0.7:8000/v1", True, False, True),
        ("http://models.example.com/v1", True, True, False),
        ("http://models.example.com/v1", False, False, False),
        ("https://models.example.com/v1", True, False, False),
        ("http://127.0.0.1:8000/v1", True, False, False),
        ("http://localhost:8000/v1", True, False, False),
        ("http://[::1]:8000/v1", True, False, False),
    ],
)
def test_a_key_never_travels_over_plain_http_to_a_host_that_is_not_loopback(
    url: str, sends_key: bool, allowed: bool, refused: bool
) -> None:
    if refused:
        with pytest.raises(InsecureEndpoint, match="plain http"):
            require_safe_transport(url, sends_key=sends_key, allow_insecure_http=allowed)
    else:
        require_safe_transport(url, sends_key=sends_key, allow_insecure_http=allowed)


def test_the_client_refuses_before_sending_the_key_over_plain_http() -> None:
    client, sent = _recording_client(
        EndpointPolicy.build(endpoint="http://models.example.com/v1", api_key="k")
    )
    request = ChatRequest(model="m", messages_text="[]")
    with pytest.raises(InsecureEndpoint):
        client.complete(request)
    assert sent == []

    allowed = EndpointPolicy.build(
        endpoint="http://models.example.com/v1", api_key="k", allow_insecure_http=True
    )
    client, sent = _recording_client(allowed)
    client.complete(request)
    assert [r.headers["authorization"] for r in sent] == ["Bearer k"]


def test_an_unlisted_or_unconfigured_endpoint_is_never_dialled() -> None:
    entry = ModelEndpoint(url="https://models.example.com/v1", source="allow-list entry 'x'")
    policy = EndpointPolicy.build(
        allowed=(entry,),
        configured_key=SecretStr("global"),
        allow_list_path=Path("/etc/bb/model_endpoints.toml"),
    )
    client, sent = _recording_client(policy)
    for captured in (
        "https://models.example.com/v2",  # another path
        "https://models.example.com:8443/v1",  # another port
        "http://models.example.com/v1",  # another scheme
        "https://user:pw@models.example.com/v1",  # credentials in the URL
        "inproc://somewhere",
        None,
    ):
        with pytest.raises(EndpointNotAllowed) as refused:
            client.complete(ChatRequest(model="m", messages_text="[]", endpoint=captured))
        assert captured is None or repr(captured) in str(refused.value)
    assert sent == []
    assert "BLACKBOX_MODEL_API_KEY is sent only to" in str(refused.value)

    client.complete(ChatRequest(model="m", messages_text="[]", endpoint="HTTPS://Models.Example.com:443/v1/"))
    assert [str(r.url) for r in sent] == ["https://models.example.com/v1/chat/completions"]
    assert "authorization" not in sent[0].headers  # the global key is not this entry's key


def test_an_allow_listed_entry_whose_key_is_unset_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "model_endpoints.toml"
    path.write_text('[[endpoint]]\nname = "e"\nurl = "https://m.example/v1"\napi_key_env = "NOPE"\n')
    settings = load_service_settings(data_dir=tmp_path)
    policy = EndpointPolicy.from_settings(settings, environ={})
    with pytest.raises(EndpointNotAllowed, match=r"\$NOPE, which is not set"):
        policy.resolve("https://m.example/v1")
    assert policy.allowed[0].source.startswith("allow-list entry 'e'")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[endpoint]]\nname = 1\n", "endpoint[0]"),
        ('[[endpoint]]\nname = "e"\nurl = "https://m/v1"\nkey = "inline"\n', "Extra inputs"),
        ('[[endpoint]]\nname = "e"\nurl = "ftp://m/v1"\n', "not an http"),
        ("endpoint = [", "cannot read model endpoints"),
    ],
)
def test_a_bad_allow_list_is_a_clear_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "model_endpoints.toml"
    path.write_text(text)
    with pytest.raises(ContractError, match=re.escape(message)):
        load_allow_list(path, environ={})


def test_an_api_key_flag_needs_an_endpoint_to_go_with() -> None:
    with pytest.raises(EndpointNotAllowed, match="--model-api-key is sent only to --model-endpoint"):
        EndpointPolicy.build(api_key="k")


def test_normalized_urls() -> None:
    assert normalize_url("HTTP://Host.Example:80/v1//") == "http://host.example/v1"
    assert normalize_url("https://h:443") == "https://h"
    assert normalize_url("http://[::1]:8000/v1/") == "http://[::1]:8000/v1"
    assert normalize_url("http://h:8080/v1") != normalize_url("http://h/v1")


# -- the Replayer: refusal before any model call, the in-process path unaffected ------------------
def test_replays_without_an_operator_endpoint_are_refused_one_by_one(
    make_replayer: Callable[..., Replayer], model_server: ModelServer
) -> None:
    replayer = make_replayer(client=OpenAICompatibleClient())
    results = replayer.replay_many(["dec_golden_identical", "dec_golden_diverging"])
    assert {type(e) for e in results.replay_failures.values()} == {EndpointNotAllowed}
    assert model_server.requests == []


def test_the_in_process_model_is_unaffected(make_replayer: Callable[..., Replayer]) -> None:
    replayer = make_replayer(client=CallableModelClient(ScriptedModel(), name="tests:ScriptedModel"))
    prepared = replayer.prepare("dec_golden_identical")
    assert prepared.model_endpoint == "in-process tests:ScriptedModel"
    assert prepared.captured_endpoint == "http://127.0.0.1:9/v1"
    assert replayer.run(prepared).replay_failure is None

"""Trust records name the agents a key may sign for (issue 8, item 4)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import typer
from conftest import KEY_WINDOW_START, golden_signer
from typer.testing import CliRunner

from consumers.commands import keys as keys_command
from producers.evidence import Signer, TrustStore, seal, sign_event, verify_capture, verify_event
from schemas.errors import ContractError, KeyNotAuthorizedForAgent, KeyNotTrusted

FLAG = {
    "decisionId": "dec_01J9Z8K2V6XAMPLE",
    "agentId": "agt_support_1",
    "reason": "customer disputed the refund",
    "flaggedAt": "2026-07-24T08:00:00.000Z",
    "failure": True,
}


def _store(signer: Signer, agents: list[str] | None) -> TrustStore:
    store = TrustStore()
    store.add(signer.public_raw, not_before=KEY_WINDOW_START, agents=agents)
    return store


# --- the record --------------------------------------------------------------------------------------------


def test_absent_list_means_any_agent() -> None:
    key = _store(golden_signer(), None).get(golden_signer().key_id)
    assert key is not None and key.agents is None
    assert key.allows("agt_support_1") and key.allows("anything at all")


@pytest.mark.parametrize(
    ("agent", "allowed"),
    [
        ("billing-eu-1", True),
        ("billing-", True),
        ("support-agent", True),
        ("support-agent-2", False),
        ("Billing-eu-1", False),  # case-sensitive on every platform
        ("agt_billing-1", False),  # a glob matches the whole id, not a substring
        ("", False),
    ],
)
def test_glob_patterns_match_the_whole_agent_id(agent: str, allowed: bool) -> None:
    store = _store(golden_signer(), ["billing-*", "support-agent"])
    key = store.get(golden_signer().key_id)
    assert key is not None and key.allows(agent) is allowed
    if allowed:
        store.check_agent(golden_signer().key_id, agent)
    else:
        with pytest.raises(KeyNotAuthorizedForAgent) as info:
            store.check_agent(golden_signer().key_id, agent)
        assert info.value.key_id == golden_signer().key_id and info.value.agent_id == agent
        assert golden_signer().key_id in str(info.value) and repr(agent) in str(info.value)
        assert isinstance(info.value, KeyNotTrusted) and info.value.part == "agentId"


def test_agents_round_trip_through_toml(tmp_path: Path) -> None:
    path = tmp_path / "trust.toml"
    store = _store(golden_signer(), ["billing-*", 'odd "quoted" \\ agent'])
    other = Signer.from_seed(bytes(32))
    store.add(other.public_raw, not_before=KEY_WINDOW_START)  # no list: any agent
    store.save(path)
    text = path.read_text()
    assert 'agents = ["billing-*", "odd \\"quoted\\" \\\\ agent"]' in text
    loaded = TrustStore.load(path)
    assert loaded.get(golden_signer().key_id) == store.get(golden_signer().key_id)
    assert loaded.get(other.key_id) == store.get(other.key_id)
    assert loaded.get(other.key_id).agents is None  # type: ignore[union-attr]
    assert text.count("agents =") == 1  # an absent list stays absent


def test_an_existing_store_without_agents_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "trust.toml"
    _store(golden_signer(), None).save(path)
    assert "agents =" not in path.read_text()
    assert TrustStore.load(path).get(golden_signer().key_id).agents is None  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("'billing-*'", "agents must be an array of strings"),
        ("[1]", "agents must be an array of strings"),
        ("[]", "agents is empty"),
        ('[""]', "empty pattern"),
    ],
)
def test_bad_agent_lists_are_refused_on_load(tmp_path: Path, value: str, message: str) -> None:
    path = tmp_path / "trust.toml"
    _store(golden_signer(), None).save(path)
    path.write_text(path.read_text() + f"agents = {value}\n")
    with pytest.raises(ContractError, match=message) as info:
        TrustStore.load(path)
    assert info.value.path.endswith("keys[0].agents")


def test_add_without_agents_keeps_an_existing_binding() -> None:
    store = _store(golden_signer(), ["billing-*"])
    store.add(golden_signer().public_raw, not_before=KEY_WINDOW_START, note="renewed")
    assert store.get(golden_signer().key_id).agents == ("billing-*",)  # type: ignore[union-attr]
    store.add(golden_signer().public_raw, not_before=KEY_WINDOW_START, agents=["*"])
    assert store.get(golden_signer().key_id).agents == ("*",)  # type: ignore[union-attr]
    with pytest.raises(ContractError, match="agents is empty"):
        store.add(golden_signer().public_raw, not_before=KEY_WINDOW_START, agents=[])


# --- verification ----------------------------------------------------------------------------------------------


def test_verify_capture_refuses_an_agent_outside_the_key(example: dict[str, Any], signer: Signer) -> None:
    sealed = seal(copy.deepcopy(example), signer)
    at = datetime(2026, 7, 24, tzinfo=UTC)
    assert verify_capture(sealed, _store(signer, ["agt_support_*"]), at=at).key_id == signer.key_id
    assert verify_capture(sealed, _store(signer, None), at=at).key_id == signer.key_id
    with pytest.raises(KeyNotAuthorizedForAgent) as info:
        verify_capture(sealed, _store(signer, ["billing-*"]), at=at)
    assert info.value.agent_id == example["agentId"] and info.value.key_id == signer.key_id
    assert str(info.value).startswith("agentId: key sha256:")


def test_a_tampered_agent_id_is_still_a_signature_failure(example: dict[str, Any], signer: Signer) -> None:
    """The agent check runs after the signature: a changed agentId is reported as tampering."""
    sealed = seal(copy.deepcopy(example), signer)
    sealed["agentId"] = "billing-eu-1"
    from schemas.errors import SignatureInvalid

    with pytest.raises(SignatureInvalid):
        verify_capture(sealed, _store(signer, ["agt_support_*"]), at=datetime(2026, 7, 24, tzinfo=UTC))


def test_verify_event_refuses_a_flag_for_another_agent(signer: Signer) -> None:
    envelope = sign_event(FLAG, signer)
    assert verify_event(envelope, _store(signer, ["agt_support_*"])) == FLAG
    with pytest.raises(KeyNotAuthorizedForAgent, match="agt_support_1"):
        verify_event(envelope, _store(signer, ["billing-*"]))
    no_agent = {k: v for k, v in FLAG.items() if k != "agentId"}
    with pytest.raises(KeyNotAuthorizedForAgent):
        verify_event(sign_event(no_agent, signer), _store(signer, ["billing-*"]))
    assert verify_event(sign_event(no_agent, signer), _store(signer, None)) == no_agent


# --- the CLI ----------------------------------------------------------------------------------------------------


@pytest.fixture
def app() -> typer.Typer:
    app = typer.Typer()
    keys_command.register(app)
    return app


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BLACKBOX_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("BLACKBOX_TRUST_STORE", raising=False)
    return tmp_path


def test_keys_trust_and_generate_take_agents_and_list_shows_them(app: typer.Typer, env: Path) -> None:
    pub = env / "other.pub"
    pub.write_text(__import__("base64").b64encode(golden_signer().public_raw).decode())
    result = CliRunner().invoke(
        app, ["keys", "trust", str(pub), "--agent", "billing-*", "--agent", "support-agent"]
    )
    assert result.exit_code == 0, result.output
    store = TrustStore.load(env / "data" / "trust.toml")
    assert store.get(golden_signer().key_id).agents == ("billing-*", "support-agent")  # type: ignore[union-attr]

    result = CliRunner().invoke(app, ["keys", "generate", "--dir", str(env / "k"), "--agent", "ops-*"])
    assert result.exit_code == 0, result.output
    assert "agents:      ops-*" in result.output
    listed = CliRunner().invoke(app, ["keys", "list"])
    assert listed.exit_code == 0, listed.output
    lines = listed.output.splitlines()
    mine = next(line for line in lines if golden_signer().key_id in line)
    assert "agents=billing-*,support-agent" in mine
    assert any("agents=ops-*" in line for line in lines)

    # no --agent: any agent, said so in the listing
    other = env / "third.pub"
    other.write_text(__import__("base64").b64encode(Signer.from_seed(bytes(32)).public_raw).decode())
    assert CliRunner().invoke(app, ["keys", "trust", str(other)]).exit_code == 0
    listed = CliRunner().invoke(app, ["keys", "list"])
    third = next(line for line in listed.output.splitlines() if Signer.from_seed(bytes(32)).key_id in line)
    assert "agents=any" in third


def test_keys_trust_refuses_an_empty_pattern(app: typer.Typer, env: Path) -> None:
    pub = env / "other.pub"
    pub.write_text(__import__("base64").b64encode(golden_signer().public_raw).decode())
    result = CliRunner().invoke(app, ["keys", "trust", str(pub), "--agent", ""])
    assert result.exit_code != 0
    assert isinstance(result.exception, ContractError) and "empty pattern" in str(result.exception)

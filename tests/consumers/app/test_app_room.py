"""The app room (issue 9, item 3): the SDK's settings hold only what a runtime needs, the services'
settings add the rest under the same ``BLACKBOX_*`` names, every setting (the fault hook included) is
read through them, and one runtime opens each resource once and closes them all, last first."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

import consumers.index
import producers.transports
from consumers.app.runtime import open_runtime
from consumers.app.settings import ServiceSettings, load_service_settings
from consumers.ingest.service import build_service
from producers.evidence import TrustStore
from producers.settings import BlackboxSettings, load_settings
from schemas.errors import SettingsInvalid

ROOT = Path(__file__).resolve().parents[3]

SERVICE_ONLY = {
    "clickhouse_url",
    "query_clickhouse_url",
    "chdb_path",
    "trust_store",
    "retention_policy",
    "caller",
    "scope",
    "model_endpoint",
    "model_api_key",
    "model_endpoints",
    "model_allow_insecure_http",
    "fault",
}


# --- settings ---------------------------------------------------------------------------------------------
# What an agent runtime needs to produce, redact, seal and deliver a capture, and nothing else: a
# service setting added to the SDK model fails here (and a runtime setting must be added on purpose).
SDK_ONLY = {
    "data_dir",
    "native",
    "transport",
    "spool_dir",
    "kafka_bootstrap",
    "topic",
    "dlq_topic",
    "consumer_group",
    "max_message_bytes",
    "capture_sample_one_in",
    "flight_window_seconds",
    "flight_max_bytes",
    "flight_spill_dir",
    "redact",
    "kek_file",
    "blob",
    "blob_dir",
    "s3_endpoint",
    "s3_access_key",
    "s3_secret_key",
    "s3_bucket",
    "s3_secure",
    "signing_key",
    "signing_key_b64",
    # the runtime's pact (issue 30): the version its Recorder judges by, the key it trusts, how often it rereads
    "pact",
    "pact_trust",
    "pact_refresh",
}


def test_the_sdk_settings_hold_only_what_a_runtime_needs() -> None:
    assert not SERVICE_ONLY & set(BlackboxSettings.model_fields)
    assert set(BlackboxSettings.model_fields) == SDK_ONLY
    assert set(ServiceSettings.model_fields) >= SDK_ONLY | SERVICE_ONLY


def test_service_settings_read_the_same_environment_names(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("BLACKBOX_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("BLACKBOX_CHDB_PATH", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("BLACKBOX_MODEL_ENDPOINT", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("BLACKBOX_MODEL_API_KEY", "k")
    monkeypatch.setenv("BLACKBOX_FAULT", "after_index")
    monkeypatch.setenv("BLACKBOX_TOPIC", "t.v1")
    settings = load_service_settings()
    assert settings.data_dir == tmp_path and settings.topic == "t.v1"
    assert settings.resolved_chdb_path == tmp_path / "elsewhere"
    assert settings.model_endpoint == "http://127.0.0.1:9/v1"
    assert settings.model_api_key is not None and settings.model_api_key.get_secret_value() == "k"
    assert settings.fault == "after_index"
    assert load_settings().topic == "t.v1"  # the runtime's model reads its own fields, ignores the rest


def test_a_bad_service_setting_is_named_with_what_is_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BLACKBOX_SCOPE", "root")
    with pytest.raises(SettingsInvalid, match=r"BLACKBOX_SCOPE='root' is not allowed: one of 'operator'"):
        load_service_settings()
    load_settings()  # the SDK has no scope: an agent runtime is not stopped by a service setting


def test_an_override_naming_no_setting_is_refused_never_dropped(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="BlackboxSettings has no setting chdb_path"):
        load_settings(data_dir=tmp_path, chdb_path=tmp_path)
    assert load_service_settings(data_dir=tmp_path, chdb_path=tmp_path).chdb_path == tmp_path


def test_the_fault_hook_comes_from_the_settings_not_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    settings = load_service_settings(data_dir=tmp_path / "bb")
    monkeypatch.setenv("BLACKBOX_FAULT", "no_such_point")  # build_service itself no longer looks
    with open_runtime(settings) as rt:
        build_service(settings, index=rt.index, trust=TrustStore()).close()
    with (
        open_runtime(load_service_settings(data_dir=tmp_path / "bb")) as rt,
        pytest.raises(ValueError, match="unknown fault point 'no_such_point'"),
    ):
        rt.ingest()


# --- the runtime --------------------------------------------------------------------------------------------
def test_resources_open_on_first_use_once(tmp_path: Path) -> None:
    settings = load_service_settings(data_dir=tmp_path / "bb")
    with open_runtime(settings) as rt:
        assert not settings.resolved_chdb_path.exists(), "nothing opens before it is used"
        assert rt.index is rt.index and rt.gate is rt.gate and rt.trust_store is rt.trust_store
        assert settings.resolved_chdb_path.is_dir()
        assert rt.caller("why").identity == settings.caller


class _Closes:
    def __init__(self, name: str, log: list[str], *, fails: bool = False) -> None:
        self.name, self.log, self.fails = name, log, fails

    def close(self) -> None:
        self.log.append(self.name)
        if self.fails:
            raise RuntimeError(f"{self.name} would not close")


def test_close_runs_last_opened_first_and_every_step_even_after_a_failure(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    closed: list[str] = []
    monkeypatch.setattr(consumers.index, "open_index", lambda *a, **k: _Closes("index", closed))
    monkeypatch.setattr(
        producers.transports, "open_sender", lambda *a, **k: _Closes("sender", closed, fails=True)
    )
    rt = open_runtime(load_service_settings(data_dir=tmp_path / "bb"))
    rt.index, rt.sender, rt.index  # noqa: B018 - opening is the point
    with pytest.raises(RuntimeError, match="sender would not close"):
        rt.close()
    assert closed == ["sender", "index"]


def test_one_place_wires_the_replayer(tmp_path: Path) -> None:
    """The replay commands and the demo build their Replayer with :meth:`Runtime.replayer`."""
    for path in ("consumers/commands/replay.py", "consumers/demo/story.py"):
        calls = _called_names(ROOT / path)
        assert "replayer" in calls and "Replayer" not in calls, path


# --- where settings are read, and who imports whom ---------------------------------------------------------
LOWER_ROOMS = (
    "index",
    "access",
    "observability",
    "storage",
    "report",
    "retention",
    "replay",
    "verify",
    "ingest",
)


def test_no_lower_room_imports_the_app_and_the_sdk_imports_no_consumer() -> None:
    for room in LOWER_ROOMS:
        for path in sorted((ROOT / "consumers" / room).rglob("*.py")):
            upward = {
                m
                for m in _imported(path)
                if m.split(".")[:2] in (["consumers", "app"], ["consumers", "commands"])
            }
            assert not upward, f"{path.relative_to(ROOT)} imports {upward}"
    for path in sorted((ROOT / "producers").rglob("*.py")):
        assert not {m for m in _imported(path) if m.startswith("consumers")}, path.relative_to(ROOT)


def _imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def _called_names(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            func: Any = node.func
            names.add(func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", ""))
    return names

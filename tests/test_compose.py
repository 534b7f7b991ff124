"""deploy/compose.yaml parses with a real Compose implementation and matches the settings the code reads."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from consumers.app.settings import ServiceSettings

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "deploy" / "compose.yaml"


def _compose_command() -> list[str]:
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0:
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    if legacy:
        return [legacy]
    pytest.fail("no Compose implementation: deploy/local/test.sh installs Debian's docker-compose")


@pytest.fixture(scope="module")
def resolved() -> dict:
    out = subprocess.run(
        [*_compose_command(), "-f", str(COMPOSE), "config"], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    return yaml.safe_load(out.stdout)


def test_services_present(resolved: dict) -> None:
    assert set(resolved["services"]) == {"kafka", "minio", "clickhouse", "ingest", "compaction"}


def test_blackbox_environment_names_are_settings(resolved: dict) -> None:
    fields = {f"BLACKBOX_{name.upper()}" for name in ServiceSettings.model_fields}
    for service in ("ingest", "compaction"):
        env = resolved["services"][service]["environment"]
        unknown = {k for k in env if k.startswith("BLACKBOX_")} - fields
        assert not unknown, f"{service} sets variables no setting reads: {unknown}"


def test_environment_points_at_the_services(resolved: dict) -> None:
    services = resolved["services"]
    env = services["ingest"]["environment"]
    settings = ServiceSettings(**{k.removeprefix("BLACKBOX_").lower(): v for k, v in env.items()})
    assert settings.transport == "kafka" and settings.blob == "s3" and settings.index_engine == "clickhouse"
    host, port = settings.kafka_bootstrap.split(":")
    assert host == "kafka" and port in services["kafka"]["environment"]["KAFKA_LISTENERS"]
    host, port = settings.s3_endpoint.split(":")
    command = services["minio"]["command"]
    command = command if isinstance(command, str) else " ".join(command)
    assert host == "minio" and f"--address :{port}" in command
    assert settings.s3_access_key == services["minio"]["environment"]["MINIO_ROOT_USER"]
    assert (
        settings.s3_secret_key.get_secret_value() == services["minio"]["environment"]["MINIO_ROOT_PASSWORD"]
    )
    assert settings.clickhouse_url is not None and "@clickhouse:8123" in settings.clickhouse_url
    published = {
        p["target"] if isinstance(p, dict) else int(str(p).split(":")[-1].split("/")[0])
        for p in services["clickhouse"].get("ports", [])
    }
    assert 8123 in published


def test_ports_bind_loopback_only(resolved: dict) -> None:
    for name, service in resolved["services"].items():
        for port in service.get("ports", []):
            host_ip = port.get("host_ip") if isinstance(port, dict) else str(port).split(":")[0]
            assert host_ip == "127.0.0.1", f"{name} publishes {port} beyond loopback"

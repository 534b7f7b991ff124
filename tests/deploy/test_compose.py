"""deploy/compose.yaml resolves with a real Compose implementation and matches the one application: the
settings the code reads, commands and flags the CLI accepts, health checks on /readyz where each
service listens, ports on loopback only, the blackbox containers locked down like the Helm chart's.

No Docker engine runs on these machines: the file is resolved (``docker compose config``), never
started; the image it builds is the tested wheel (tests/deploy/test_wheel.py, deploy/Dockerfile).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_args import cli_refuses, listening_problem

from consumers.app.settings import ServiceSettings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "deploy" / "compose.yaml"
BLACKBOX = {"serve", "ingest", "otlp", "compaction"}
LONG_RUNNING = {"serve", "ingest", "otlp"}


def _compose_command() -> list[str]:
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0:
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    if legacy:
        return [legacy]
    pytest.fail("no Compose implementation: deploy/local/test.sh installs Debian's docker-compose")


def _target(port: Any) -> int:
    """The container port of a published port (long syntax, or Compose v1's "host:published:target")."""
    return int(port["target"]) if isinstance(port, dict) else int(str(port).split(":")[-1].split("/")[0])


def _config(*args: str) -> dict[str, Any]:
    out = subprocess.run(
        [*_compose_command(), "-f", str(COMPOSE), *args, "config"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    resolved: dict[str, Any] = yaml.safe_load(out.stdout)
    return resolved


@pytest.fixture(scope="module")
def resolved() -> dict[str, Any]:
    # with the "jobs" profile, so the one-shot compaction job is resolved too
    return _config("--profile", "jobs")


def test_services_present(resolved: dict) -> None:
    assert set(resolved["services"]) == {"kafka", "minio", "clickhouse"} | BLACKBOX


def test_up_starts_the_services_and_leaves_compaction_to_a_scheduled_run(resolved: dict) -> None:
    # `up` starts the services of no profile; compaction is in "jobs", started by `run` only
    profiled = {name: s["profiles"] for name, s in resolved["services"].items() if s.get("profiles")}
    assert profiled == {"compaction": ["jobs"]}
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "docker compose -f deploy/compose.yaml run --rm compaction" in readme


def test_blackbox_environment_names_are_settings(resolved: dict) -> None:
    fields = {f"BLACKBOX_{name.upper()}" for name in ServiceSettings.model_fields}
    for service in BLACKBOX:
        env = resolved["services"][service]["environment"]
        unknown = {k for k in env if k.startswith("BLACKBOX_")} - fields
        assert not unknown, f"{service} sets variables no setting reads: {unknown}"


def test_every_command_and_flag_is_one_the_cli_accepts(resolved: dict) -> None:
    for name in BLACKBOX:
        command = resolved["services"][name]["command"]
        assert cli_refuses([str(a) for a in command]) is None, name
        assert listening_problem([str(a) for a in command]) is None, name
    assert resolved["services"]["compaction"]["command"][0] == "compact"
    assert resolved["services"]["compaction"]["restart"] == "no"


def test_the_services_are_health_checked_on_readyz_where_they_listen(resolved: dict) -> None:
    for name in LONG_RUNNING:
        service = resolved["services"][name]
        listens = [a for a in service["command"] if re.fullmatch(r"0\.0\.0\.0:\d+", str(a))]
        (address,) = listens
        port = address.rsplit(":", 1)[1]
        check = " ".join(service["healthcheck"]["test"])
        assert f"http://127.0.0.1:{port}/readyz" in check, check
        assert {_target(p) for p in service.get("ports", [])} <= {int(port)}


def test_the_blackbox_containers_run_locked_down_from_one_image(resolved: dict) -> None:
    services = resolved["services"]
    images = {services[name]["image"] for name in BLACKBOX}
    assert len(images) == 1  # built once, from deploy/Dockerfile
    for name in BLACKBOX:
        service = services[name]
        assert service["build"]["dockerfile"] == "deploy/Dockerfile"
        assert service["user"].isdigit() and int(service["user"]) > 0
        assert service["read_only"] is True and "/tmp" in service["tmpfs"]
        assert service["cap_drop"] == ["ALL"] and "no-new-privileges:true" in service["security_opt"]
    assert services["ingest"]["deploy"]["replicas"] > 1


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
    assert 8123 in {_target(p) for p in services["clickhouse"].get("ports", [])}


def test_ports_bind_loopback_only(resolved: dict) -> None:
    for name, service in resolved["services"].items():
        for port in service.get("ports", []):
            host_ip = port.get("host_ip") if isinstance(port, dict) else str(port).split(":")[0]
            assert host_ip == "127.0.0.1", f"{name} publishes {port} beyond loopback"


def test_only_the_receiver_holds_a_signing_key_and_every_service_reads_the_hosts_trust_store(
    resolved: dict,
) -> None:
    secrets = resolved["secrets"]
    assert {name: Path(s["file"]).relative_to(COMPOSE.parent).as_posix() for name, s in secrets.items()} == {
        "trust_store": "trust.toml",
        "otlp_signing_key": "otlp-signing.key",
    }
    ignored = (COMPOSE.parent / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert {"trust.toml", "otlp-signing.key", "otlp-key/"} <= set(ignored)  # never committed
    for name in BLACKBOX:
        service = resolved["services"][name]
        mounted = {s["source"] if isinstance(s, dict) else s for s in service["secrets"]}
        env = service["environment"]
        assert env["BLACKBOX_TRUST_STORE"] == "/run/secrets/trust_store" and "trust_store" in mounted
        assert ("otlp_signing_key" in mounted) == (name == "otlp") == ("BLACKBOX_SIGNING_KEY" in env)
    assert (
        resolved["services"]["otlp"]["environment"]["BLACKBOX_SIGNING_KEY"] == "/run/secrets/otlp_signing_key"
    )


def test_the_readmes_compose_key_lines_make_the_files_compose_reads(tmp_path: Path) -> None:
    from producers.evidence import TrustStore, load_signer

    section = (ROOT / "README.md").read_text(encoding="utf-8").split("## Install and deploy", 1)[1]
    block = re.findall(r"```bash\n(.*?)```", section, flags=re.DOTALL)[1]
    (tmp_path / "deploy").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("BLACKBOX_")}
    env["BLACKBOX_DATA_DIR"] = str(tmp_path / "data")
    subprocess.run(["bash", "-euc", block], cwd=tmp_path, env=env, check=True, timeout=120)
    key = tmp_path / "deploy" / "otlp-signing.key"
    assert key.stat().st_uid == 10001  # the image's user reads it
    signer = load_signer(key)
    record = TrustStore.load(tmp_path / "deploy" / "trust.toml").get(signer.key_id)
    assert record is not None and record.note == "OTLP receiver"

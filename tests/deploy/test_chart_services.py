"""The chart's services, started here as its pods would run them, answer their probes.

Each Deployment's command line and environment come from the rendered chart (default values): the
settings ConfigMap, the Secret and the container's own variables, with the evidence keys made as the
chart README says. What only a cluster has is swapped for this machine's: the real Kafka and MinIO
(a topic, group and log prefix of the test's own), chdb in place of the ClickHouse server, and
127.0.0.1 with a free port in place of 0.0.0.0. Then GET on the liveness and the readiness probe's
path, at the port the probe names, must answer 200 before the service is stopped with SIGTERM.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from helm_chart import find_helm, kinds, pod_specs, render

ORDER = ("ingest", "serve", "otlp")  # ingest first: it creates the index serve reads


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _keys(directory: Path) -> None:
    """What the chart's Secrets hold, as files: the evidence keys and the OTLP receiver's signing key."""
    directory.mkdir()
    (directory / "kek.key").write_bytes(os.urandom(32))
    (directory / "index_id.key").write_bytes(os.urandom(32))
    for name in ("tlog.key", "signing.key"):
        pem = Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        (directory / name).write_bytes(pem)


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")
    except (urllib.error.URLError, OSError) as exc:
        return 0, str(exc)


def _environment(
    docs: list[dict[str, Any]], container: dict[str, Any], local: dict[str, str]
) -> dict[str, str]:
    env: dict[str, str] = {}
    for source in container["envFrom"]:
        if "configMapRef" in source:
            env |= kinds(docs, "ConfigMap")[source["configMapRef"]["name"]]["data"]
        else:
            env |= kinds(docs, "Secret")[source["secretRef"]["name"]]["stringData"]
    # the Secrets' mount points, here a directory of the same files
    env |= {
        e["name"]: re.sub(r"^/etc/blackbox/(keys|signing)", local["keys"], e["value"])
        for e in container["env"]
    }
    env.pop("BLACKBOX_CLICKHOUSE_URL")  # no ClickHouse server here: embedded chdb in the data dir
    base = {k: v for k, v in os.environ.items() if not k.startswith("BLACKBOX_")}
    return base | env | {k: v for k, v in local.items() if k.startswith("BLACKBOX_")}


@pytest.mark.kafka
@pytest.mark.minio
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_each_service_answers_its_liveness_and_readiness_probes(
    tmp_path: Path,
    kafka_bootstrap: str,
    minio_config: dict[str, Any],
    new_kafka_topic: Callable[..., str],
) -> None:
    docs = render(find_helm())
    topic = new_kafka_topic("bbchart")
    dlq = new_kafka_topic("bbchart-dlq")
    keys = tmp_path / "keys"
    _keys(keys)
    local = {
        "BLACKBOX_KAFKA_BOOTSTRAP": kafka_bootstrap,
        "BLACKBOX_TOPIC": topic,
        "BLACKBOX_DLQ_TOPIC": dlq,
        "BLACKBOX_CONSUMER_GROUP": f"bbchart-{uuid.uuid4().hex[:8]}",
        "BLACKBOX_S3_ENDPOINT": minio_config["endpoint"],
        "BLACKBOX_S3_ACCESS_KEY": minio_config["access_key"],
        "BLACKBOX_S3_SECRET_KEY": minio_config["secret_key"],
        "BLACKBOX_S3_BUCKET": minio_config["bucket"],
        "BLACKBOX_DATA_DIR": str(tmp_path / "data"),
        "keys": str(keys),
    }
    blackbox = shutil.which("blackbox") or pytest.fail("the blackbox console script is not on PATH")
    deployments = {component: template for component, template, _ in pod_specs(docs)}
    for component in ORDER:
        (container,) = deployments[component]["spec"]["containers"]
        env = _environment(docs, container, local)
        # every key file the chart mounts from a Secret is one of this test's
        files = {v for k, v in env.items() if k.startswith("BLACKBOX_") and v.startswith(str(keys))}
        assert files and files <= {str(p) for p in keys.iterdir()}, files
        assert ("BLACKBOX_SIGNING_KEY" in env) == (component == "otlp")
        port = _free_port()
        args = [re.sub(r"^0\.0\.0\.0:\d+$", f"127.0.0.1:{port}", str(a)) for a in container["args"]]
        assert f"127.0.0.1:{port}" in args, args
        log = tmp_path / f"{component}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen([blackbox, *args], env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            answers: dict[str, tuple[int, str]] = {}
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and proc.poll() is None:
                answers = {
                    probe: _get(f"http://127.0.0.1:{port}{container[probe]['httpGet']['path']}")
                    for probe in ("livenessProbe", "readinessProbe")
                }
                if all(status == 200 for status, _ in answers.values()):
                    break
                time.sleep(0.5)
            output = log.read_text(encoding="utf-8", errors="replace")
            assert proc.poll() is None, f"blackbox {' '.join(args)} exited {proc.returncode}:\n{output}"
            assert all(status == 200 for status, _ in answers.values()), f"{component}: {answers}\n{output}"
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

"""Session fixtures for the real services started by ``bash deploy/local/up.sh``.

Kafka (127.0.0.1:9092) and MinIO (127.0.0.1:9000) are checked once per session. A missing service
FAILS the tests that need it, with the command that starts it; nothing is ever skipped.
``services`` drives fault tests: pause/resume MinIO (SIGSTOP/SIGCONT), stop/start/restart Kafka.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from consumers.app.settings import ServiceSettings, load_service_settings

ROOT = Path(__file__).resolve().parents[1]
LOCAL = ROOT / "deploy" / "local"
STATE_DIR = Path(os.environ.get("BLACKBOX_LOCAL_STATE", LOCAL / ".state"))
START_HINT = "start the services with: bash deploy/local/up.sh (status: bash deploy/local/status.sh)"


def _kafka_answers(bootstrap: str, timeout: float) -> str | None:
    """None when the broker answers a metadata request, else why not."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 3000, "log_level": 0})
    try:
        meta = admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        return str(exc)
    return None if meta.brokers else "no brokers in metadata"


def _minio_answers(endpoint: str, timeout: float) -> str | None:
    try:
        with urllib.request.urlopen(f"http://{endpoint}/minio/health/ready", timeout=timeout) as resp:
            return None if resp.status == 200 else f"HTTP {resp.status}"
    except (urllib.error.URLError, OSError) as exc:
        return str(exc)


def _wait(probe: Callable[[float], str | None], what: str, *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    why: str | None = "not checked"
    while time.monotonic() < deadline:
        why = probe(min(5.0, max(1.0, deadline - time.monotonic())))
        if why is None:
            return
        time.sleep(0.3)
    pytest.fail(f"{what} is not answering after {timeout:.0f}s ({why}); {START_HINT}", pytrace=False)


def _all_threads_stopped(pid: int) -> bool:
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            state = stat.read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in ("T", "t"):
            return False
    return True


@pytest.fixture(scope="session")
def service_state_dir() -> Path:
    """deploy/local/.state: logs/, pids/kafka.pid, pids/minio.pid, kafka-data/, minio-data/."""
    return STATE_DIR


@pytest.fixture(scope="session")
def kafka_bootstrap() -> str:
    """Bootstrap servers of the real broker (env BLACKBOX_KAFKA_BOOTSTRAP overrides)."""
    bootstrap = os.environ.get("BLACKBOX_KAFKA_BOOTSTRAP", "127.0.0.1:9092")
    _wait(lambda t: _kafka_answers(bootstrap, t), f"Kafka at {bootstrap}", timeout=10)
    return bootstrap


@pytest.fixture(scope="session")
def minio_config() -> dict[str, Any]:
    """Connection settings for the real MinIO (env BLACKBOX_S3_* override), bucket already created."""
    cfg: dict[str, Any] = {
        "endpoint": os.environ.get("BLACKBOX_S3_ENDPOINT", "127.0.0.1:9000"),
        "access_key": os.environ.get("BLACKBOX_S3_ACCESS_KEY", "blackbox"),
        "secret_key": os.environ.get("BLACKBOX_S3_SECRET_KEY", "blackbox-secret"),
        "bucket": os.environ.get("BLACKBOX_S3_BUCKET", "blackbox"),
        "secure": False,
    }
    _wait(lambda t: _minio_answers(cfg["endpoint"], t), f"MinIO at {cfg['endpoint']}", timeout=10)
    from minio import Minio

    client = Minio(cfg["endpoint"], access_key=cfg["access_key"], secret_key=cfg["secret_key"], secure=False)
    if not client.bucket_exists(cfg["bucket"]):
        pytest.fail(f"MinIO bucket {cfg['bucket']!r} is missing; {START_HINT}", pytrace=False)
    return cfg


@pytest.fixture
def new_kafka_topic(kafka_bootstrap: str) -> Iterator[Callable[..., str]]:
    """``new_kafka_topic("prefix", partitions=3)`` creates a fresh topic on the real broker and returns its
    name; every topic made this way is deleted when the test ends."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    made: list[str] = []

    def make(prefix: str = "bbtest", *, partitions: int = 1) -> str:
        name = f"{prefix}.{uuid.uuid4().hex[:10]}"
        for future in admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=1)]
        ).values():
            future.result(30)
        made.append(name)
        return name

    yield make
    if made:
        for future in admin.delete_topics(made).values():
            with suppress(Exception):
                future.result(30)


@dataclass(frozen=True)
class Services:
    """Fault injection on the local services. Every method returns once the change took effect."""

    state_dir: Path
    kafka_bootstrap: str
    minio_endpoint: str

    @property
    def kafka_pid_file(self) -> Path:
        return self.state_dir / "pids" / "kafka.pid"

    @property
    def minio_pid_file(self) -> Path:
        return self.state_dir / "pids" / "minio.pid"

    def _pid(self, pid_file: Path) -> int:
        try:
            pid = int(pid_file.read_text().strip())
            os.kill(pid, 0)
        except (OSError, ValueError):
            pytest.fail(f"no live process behind {pid_file}; {START_HINT}", pytrace=False)
        return pid

    def _ctl(self, *args: str) -> None:
        out = subprocess.run(
            ["bash", str(LOCAL / "ctl.sh"), *args], capture_output=True, text=True, check=False, timeout=240
        )
        if out.returncode != 0:
            pytest.fail(
                f"deploy/local/ctl.sh {' '.join(args)} failed:\n{out.stdout}{out.stderr}", pytrace=False
            )

    def pause_minio(self) -> None:
        """SIGSTOP MinIO: connections are accepted by the kernel but nothing answers.

        Returns once every thread of the process is stopped (a group stop is asynchronous).
        """
        pid = self._pid(self.minio_pid_file)
        os.kill(pid, signal.SIGSTOP)
        deadline = time.monotonic() + 10
        while not _all_threads_stopped(pid):
            if time.monotonic() > deadline:
                pytest.fail(f"MinIO pid {pid} did not stop after SIGSTOP", pytrace=False)
            time.sleep(0.02)

    def resume_minio(self) -> None:
        """SIGCONT MinIO and wait until its readiness probe answers."""
        os.kill(self._pid(self.minio_pid_file), signal.SIGCONT)
        _wait(lambda t: _minio_answers(self.minio_endpoint, t), "MinIO after resume", timeout=30)

    def stop_kafka(self) -> None:
        """Stop the broker (SIGTERM, SIGKILL fallback). Its data is kept."""
        self._ctl("stop", "kafka")

    def start_kafka(self) -> None:
        """Start the broker again and wait until it answers metadata requests."""
        self._ctl("start", "kafka")
        _wait(lambda t: _kafka_answers(self.kafka_bootstrap, t), "Kafka after start", timeout=60)

    def restart_kafka(self) -> None:
        self.stop_kafka()
        self.start_kafka()

    @contextmanager
    def minio_paused(self) -> Iterator[None]:
        self.pause_minio()
        try:
            yield
        finally:
            self.resume_minio()

    @contextmanager
    def kafka_stopped(self) -> Iterator[None]:
        self.stop_kafka()
        try:
            yield
        finally:
            self.start_kafka()


@pytest.fixture(scope="session")
def services(
    kafka_bootstrap: str, minio_config: dict[str, Any], service_state_dir: Path
) -> Iterator[Services]:
    """Fault-injection handle; at session end MinIO is resumed and Kafka restarted if a test left them down."""
    svc = Services(
        state_dir=service_state_dir, kafka_bootstrap=kafka_bootstrap, minio_endpoint=minio_config["endpoint"]
    )
    yield svc
    try:
        pid = int(svc.minio_pid_file.read_text().strip())
        os.kill(pid, signal.SIGCONT)
    except (OSError, ValueError):
        pass
    if _kafka_answers(kafka_bootstrap, 5) is not None:
        svc.start_kafka()


@pytest.fixture
def tmp_settings(tmp_path: Path) -> ServiceSettings:
    """Embedded-default settings rooted in a fresh temporary data dir."""
    return load_service_settings(data_dir=tmp_path / "bb")


@pytest.fixture
def object_lock_store(minio_config: dict[str, Any]) -> Iterator[Any]:
    """An :class:`~producers.blobstore.S3BlobStore` in governance mode on a fresh bucket of the real MinIO
    created with object locking; emptied (legal holds cleared, governance bypassed) and removed after."""
    from minio import Minio
    from minio.deleteobjects import DeleteObject

    from producers.blobstore import S3BlobStore

    cfg = minio_config
    bucket = f"bb-lock-{uuid.uuid4().hex[:10]}"
    store = S3BlobStore(
        cfg["endpoint"], cfg["access_key"], cfg["secret_key"], bucket, cfg["secure"], object_lock="governance"
    )
    try:
        yield store
    finally:
        client = Minio(
            cfg["endpoint"], access_key=cfg["access_key"], secret_key=cfg["secret_key"], secure=False
        )
        if client.bucket_exists(bucket):
            versions = [
                (obj.object_name, obj.version_id)
                for obj in client.list_objects(bucket, recursive=True, include_version=True)
                if obj.object_name
            ]
            for name, version in versions:
                with suppress(Exception):
                    client.disable_object_legal_hold(bucket, name, version_id=version)
            errors = list(
                client.remove_objects(
                    bucket, [DeleteObject(n, v) for n, v in versions], bypass_governance_mode=True
                )
            )
            assert not errors, errors
            client.remove_bucket(bucket)


@pytest.fixture(scope="session")
def core() -> Any:
    """The compiled native core (tests/producers/native); a missing or stale build FAILS, never skips.

    Here rather than in tests/producers/native/conftest.py: a second ``conftest`` module there would
    shadow the other folders' ``from conftest import ...`` when pytest collects them together.
    """
    from producers import native

    native.reset()
    try:
        loaded = native.core()
        assert loaded is not None, f"the native core did not load: {native.status()}"
        return loaded
    finally:
        native.reset()

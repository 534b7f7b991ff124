"""``blackbox consume --metrics-listen``: counters, lag, latency and health over HTTP; JSON logs."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.error
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from ingest_testdata import create_topics
from observed import BLACKBOX, GOOD, cli_env, free_port, get, run_cli, samples, wait_for, write_spool
from prometheus_client import CollectorRegistry

from consumers.ingest.batch import BatchResult
from consumers.ingest.loop import IngestLoop, LoopConfig
from consumers.ingest.telemetry import IngestTelemetry
from consumers.observability.health import Health
from consumers.observability.metrics import INGEST_REGISTRY
from consumers.observability.routes import observability_router
from consumers.web.app import build_app
from consumers.web.server import Listen, ListenRefused, WebServer, parse_listen
from producers.transports.base import SourceMessage
from producers.transports.kafka.source import KafkaSource
from schemas.errors import BlobStoreError, TransportError


def test_consume_serves_its_counters_lag_latency_and_health(tmp_path: Path) -> None:
    data = tmp_path / "bb"
    write_spool(data)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [
            BLACKBOX,
            "consume",
            "--max-wait",
            "0.1",
            "--metrics-listen",
            f"127.0.0.1:{port}",
            "--log-format",
            "json",
        ],
        env=cli_env(data),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def consumed_everything() -> bool:
        try:
            return samples(get(f"{base}/metrics")[1]).get(("blackbox_ingest_consumed_total", ())) == GOOD + 3
        except urllib.error.URLError:  # not listening yet
            return proc.poll() is not None

    try:
        wait_for("the spool to be consumed", consumed_everything, timeout=90)
        assert proc.poll() is None, proc.communicate()[1]
        values = samples(get(f"{base}/metrics")[1])
        health = get(f"{base}/healthz")
        missing = get(f"{base}/nope")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert values[("blackbox_ingest_indexed_total", ())] == GOOD
    assert values[("blackbox_ingest_deduplicated_total", ())] == 1
    assert values[("blackbox_ingest_quarantined_total", ())] == 1
    assert values[("blackbox_ingest_dead_lettered_total", ())] == 1
    assert values[("blackbox_ingest_commit_lag", (("partition", "spool"),))] == 0  # every file committed
    assert values[("blackbox_ingest_batch_seconds_count", ())] == 1
    assert values[("process_cpu_seconds_total", ())] > 0
    assert health[0] == 200 and health[1].startswith("ok: polled")
    assert missing[0] == 404
    assert proc.returncode == 0, err

    lines = [json.loads(line) for line in err.splitlines()]  # every stderr line is one JSON object
    assert lines and all({"ts", "level", "logger", "message"} <= line.keys() for line in lines)
    stopped = [line for line in lines if line["message"] == "ingest stopped"]
    assert stopped and stopped[0]["stats"]["indexed"] == GOOD and stopped[0]["level"] == "info"
    assert any(line.get("listen") == f"http://127.0.0.1:{port}" for line in lines)


def serving(health: Health, listen: Listen | None = None) -> WebServer:
    """The one application with its observability surface alone, as ``consume --metrics-listen`` runs it."""
    router = observability_router(registry=CollectorRegistry(), health=lambda: health, checks={})
    return WebServer(build_app(routers=[router]), listen)


def test_healthz_says_why_it_is_unhealthy() -> None:
    now = [100.0]
    health = Health(stale_after=30, clock=lambda: now[0])
    with serving(health) as server:
        url = f"{server.url}/healthz"
        assert get(url) == (503, "starting: the source has not been polled yet\n")
        health.polled()
        assert get(url)[0] == 200
        health.committed(TransportError("broker unreachable"))
        assert get(url) == (503, "last commit failed: TransportError: broker unreachable\n")
        health.committed(None)
        assert get(url)[0] == 200
        health.batch_failed(BlobStoreError("minio paused"))
        now[0] += 31
        status, body = get(url)
        assert status == 503 and body.startswith("no poll for 31.0s (limit 30s)") and "minio paused" in body


@dataclass
class _FailingCommits:
    batches: list[list[SourceMessage]]
    topic: str = "t"
    commits: list[dict[object, int]] = field(default_factory=list)

    def consume(self, max_messages: int, timeout: float) -> Sequence[SourceMessage]:
        return self.batches.pop(0) if self.batches else []

    def commit(self, offsets: dict[object, int]) -> bool:
        raise TransportError("broker unreachable")

    def caught_up(self) -> bool:
        return not self.batches

    def keepalive(self, seconds: float) -> None: ...
    def resume(self) -> None: ...
    def owns(self, partitions: object) -> bool:
        return True

    def rewind(self, offsets: object) -> None: ...
    def lag(self) -> dict[object, int]:
        return {0: 3}

    def close(self) -> None: ...


class _Processor:
    def process(self, batch: Sequence[SourceMessage], *, hook: object = None) -> BatchResult:
        return BatchResult(messages=len(batch), indexed=len(batch) - 1, duplicates=1)


def _value(name: str, **labels: str) -> float:
    return INGEST_REGISTRY.get_sample_value(name, labels) or 0.0


def test_the_loop_feeds_metrics_and_a_failed_commit_makes_it_unhealthy() -> None:
    """The observer hooks in the loop itself (no HTTP): counts from the batch result, commit failures."""
    before = {
        n: _value(n) for n in ("blackbox_ingest_consumed_total", "blackbox_ingest_commit_failures_total")
    }
    src = _FailingCommits([[SourceMessage("t", 0, o, None, b"") for o in range(4)]])
    telemetry = IngestTelemetry(health=Health(stale_after=30), lag=src.lag)
    loop = IngestLoop(
        source=src,  # type: ignore[arg-type]
        processor=_Processor(),  # type: ignore[arg-type]
        config=LoopConfig(drain_idle=0),
        observer=telemetry,
    )
    with pytest.raises(TransportError, match="uncommitted offsets"):
        loop.run(drain=True)
    assert _value("blackbox_ingest_consumed_total") - before["blackbox_ingest_consumed_total"] == 4
    assert (
        _value("blackbox_ingest_commit_failures_total") - before["blackbox_ingest_commit_failures_total"] >= 1
    )
    status = telemetry.health.status()
    assert not status.ok and status.reason == "last commit failed: TransportError: broker unreachable"


def test_a_bad_listen_address_or_a_busy_port_is_one_clear_error(tmp_path: Path) -> None:
    def metrics_listen(text: str) -> Listen:
        return parse_listen(text, option="--metrics-listen", default_host="127.0.0.1")

    assert metrics_listen("9464") == Listen("127.0.0.1", 9464)  # a bare port stays on loopback
    assert metrics_listen("[::1]:9464") == Listen("::1", 9464)
    assert metrics_listen("0.0.0.0:0") == Listen("0.0.0.0", 0)
    result = run_cli(["consume", "--drain", "--metrics-listen", "localhost:http"], tmp_path / "bb")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: --metrics-listen wants HOST:PORT with a port 0-65535, got 'localhost:http'"
    ]
    with serving(Health()) as server:
        busy = Listen("127.0.0.1", int(server.url.rsplit(":", 1)[1]))
        with pytest.raises(ListenRefused, match=f"cannot serve HTTP on {busy}"):
            serving(Health(), busy).start()


@pytest.mark.kafka
@pytest.mark.timeout(120)
def test_kafka_commit_lag_is_high_watermark_minus_committed(kafka_bootstrap: str) -> None:
    from confluent_kafka import Producer

    topic = f"bb-lag-{uuid.uuid4().hex[:8]}"
    create_topics(kafka_bootstrap, topic, partitions=1)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for i in range(5):
        producer.produce(topic, value=f"m{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    source = KafkaSource(bootstrap=kafka_bootstrap, topic=topic, group=f"g-{uuid.uuid4().hex[:8]}")
    try:
        got: list[SourceMessage] = []
        deadline = time.monotonic() + 60
        while len(got) < 5 and time.monotonic() < deadline:
            got.extend(source.consume(5 - len(got), 1.0))
        assert len(got) == 5
        assert source.lag() == {0: 5}  # nothing committed yet: counted from the low watermark
        assert source.commit({0: 3})
        assert source.lag() == {0: 2}
        assert source.commit({0: 5})
        assert source.lag() == {0: 0}
    finally:
        source.close()

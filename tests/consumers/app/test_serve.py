"""``blackbox serve`` on embedded defaults is the whole system (issue 25, items 1 and 2): one process
serves the audit API, ``POST /v1/traces``, ``/metrics``, ``/healthz`` and ``/readyz`` from one
application, and ingests what ``blackbox capture``, the Recorder and OTLP senders spool while it
serves; another command against the index it holds says so and points to it. The real CLI in
subprocesses, real HTTP, a real spool and chdb.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from consumers.app.settings import load_service_settings
from consumers.cli import app as cli
from producers import Recorder
from producers.evidence import TrustStore, load_signer

ROOT = Path(__file__).resolve().parents[3]
SEED_B64 = base64.b64encode(bytes(range(32))).decode()
BLACKBOX = [sys.executable, "-c", "from consumers.entry import main; main()"]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    data = tmp_path / "bb"
    trust = TrustStore()
    trust.add(load_signer(b64=SEED_B64).public_raw, not_before=datetime(2000, 1, 1, tzinfo=UTC))
    trust.save(data / "trust.toml")
    return data


def env_for(data: Path) -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("BLACKBOX_")} | {
        "BLACKBOX_DATA_DIR": str(data),
        "BLACKBOX_TRANSPORT": "spool",
        "BLACKBOX_BLOB": "local",
        "BLACKBOX_SIGNING_KEY_B64": SEED_B64,
        "BLACKBOX_CAPTURE_SAMPLE_ONE_IN": "1",
    }


@pytest.fixture
def serving(data: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    proc = subprocess.Popen(
        [*BLACKBOX, "serve", "--listen", "127.0.0.1:0"],
        env=env_for(data),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = serving_line(proc)
    assert "(audit, otlp, ingest, metrics)" in line, line
    url = line.split()[2]
    yield proc, url
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)


def serving_line(proc: subprocess.Popen[str]) -> str:
    """serve's "serving on URL (surfaces)" line on stderr (after any warnings before it)."""
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        if line.startswith("serving on http://127.0.0.1:"):
            return line
        seen.append(line)
    raise AssertionError("serve stopped before listening: " + "".join(seen))


def wait_for(what: str, check: Any, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def otlp_request() -> bytes:
    messages = [{"role": "user", "parts": [{"type": "text", "content": "Bonjour?"}]}]
    span = {
        "traceId": "5bf92f3577b34da6a3ce929d0e0e4736",
        "spanId": "10f067aa0ba902b7",
        "name": "chat gpt-x",
        "startTimeUnixNano": "1767225600000000000",
        "endTimeUnixNano": "1767225600250000000",
        "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
            {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-x"}},
            {"key": "gen_ai.input.messages", "value": {"stringValue": json.dumps(messages)}},
        ],
    }
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "agt_otlp"}}]}
    return json.dumps({"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": [span]}]}]}).encode()


def test_serve_alone_ingests_what_capture_the_recorder_and_otlp_spool_while_serving(
    data: Path, serving: tuple[subprocess.Popen[str], str]
) -> None:
    proc, url = serving
    env = env_for(data)
    token = (
        CliRunner()
        .invoke(cli, ["access", "token", "create", "--caller", "ops", "--scope", "operator"], env=env)
        .stdout.splitlines()[0]
    )
    auth = {"Authorization": f"Bearer {token}"}

    # 1. the CLI's capture, while serve holds the index
    captured = subprocess.run(
        [*BLACKBOX, "capture", str(ROOT / "schemas" / "examples" / "capture.unsealed.json")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert captured.returncode == 0, captured.stderr
    from_cli = captured.stdout.strip().splitlines()[-1]
    # 2. the Recorder, in an agent's process
    recorder = Recorder.from_settings(load_service_settings(**_settings(data)), agent_id="agt_recorder")
    with recorder.decision(request={"message": "hi"}) as decision:
        decision.configure(model="m", system_prompt="Be brief.")
        decision.finish(output="Hello.")
    from_recorder = decision.decision_id
    assert recorder.close(30)
    # 3. an OTLP sender, to the same address
    sent = httpx.post(
        f"{url}/v1/traces", content=otlp_request(), headers={"Content-Type": "application/json"}
    )
    assert sent.status_code == 200, sent.text

    for decision_id in (from_cli, from_recorder):
        shown = wait_for(
            f"{decision_id} to be ingested by serve",
            lambda d=decision_id: (
                (r := httpx.get(f"{url}/v1/decisions/{d}", headers=auth, timeout=30)).status_code == 200 and r
            ),
        )
        assert shown.json()["verification"]["verdict"] == "verified"
    metrics = wait_for(
        "three captures indexed",
        lambda: "blackbox_ingest_indexed_total 3.0" in (m := httpx.get(f"{url}/metrics").text) and m,
    )
    assert "blackbox_ingest_consumed_total" in metrics
    health = httpx.get(f"{url}/healthz")
    assert health.status_code == 200 and health.text.startswith("ok: polled")
    ready = httpx.get(f"{url}/readyz")
    assert ready.status_code == 200 and ready.json() == {
        "ready": True,
        "checks": {"index": "ok", "blob_store": "ok", "transport": "ok"},
    }
    for answer in (health, ready, sent, httpx.get(f"{url}/openapi.json")):
        assert (
            answer.headers["cache-control"] == "no-store"
            and answer.headers["x-content-type-options"] == "nosniff"
        )
    assert httpx.get(f"{url}/docs").status_code == 404  # no Swagger UI from a CDN

    # another command against the index serve holds: told so, pointed to the service, no traceback
    shown = subprocess.run(
        [*BLACKBOX, "show", from_cli], env=env, capture_output=True, text=True, timeout=120
    )
    assert shown.returncode == 2, shown.stdout + shown.stderr
    assert (
        "held by `blackbox serve`" in shown.stderr and url in shown.stderr and "Traceback" not in shown.stderr
    )

    # a flood of requests no route answers: cheap, limited per address, never an access-log row
    with httpx.Client() as client:
        strays = [client.get(f"{url}/v1/nothing/{i}").status_code for i in range(100)]
    assert strays.count(404) >= 1 and strays.count(429) >= 1 and set(strays) <= {404, 429}

    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    # once serve stopped, the CLI reads the index again; the log holds the reads, not the strays
    runner = CliRunner()
    assert runner.invoke(cli, ["show", from_recorder], env=env).exit_code == 0
    logged = runner.invoke(
        cli, ["query", "SELECT action, outcome, detail FROM access_log", "--json"], env=env
    )
    assert logged.exit_code == 0, logged.output
    assert "nothing" not in logged.stdout and '"show"' in logged.stdout


def _settings(data: Path) -> dict[str, Any]:
    return {
        "data_dir": data,
        "transport": "spool",
        "blob": "local",
        "signing_key_b64": SEED_B64,
        "capture_sample_one_in": 1,
    }


def test_serve_without_ingest_or_otlp_and_a_bad_address(data: Path) -> None:
    refused = subprocess.run(
        [*BLACKBOX, "serve", "--listen", "0.0.0.0:0"],
        env=env_for(data),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2 and "not a loopback address" in refused.stderr
    assert "Traceback" not in refused.stderr
    consumed = CliRunner().invoke(cli, ["consume", "--drain", "--max-wait", "0.1"], env=env_for(data))
    assert consumed.exit_code == 0, consumed.output  # the index exists
    proc = subprocess.Popen(
        [*BLACKBOX, "serve", "--listen", "127.0.0.1:0", "--no-ingest", "--no-otlp"],
        env=env_for(data),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = serving_line(proc)
        assert "(audit, metrics)" in line, line
        url = line.split()[2]
        assert (
            httpx.post(
                f"{url}/v1/traces", content=b"{}", headers={"Content-Type": "application/json"}
            ).status_code
            == 404
        )
        assert httpx.get(f"{url}/healthz").text == "ok\n"
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
    assert proc.returncode == 0


def test_the_receiver_on_an_address_of_its_own(data: Path) -> None:
    CliRunner().invoke(
        cli, ["consume", "--drain", "--max-wait", "0.1"], env=env_for(data)
    )  # creates the index
    proc = subprocess.Popen(
        [*BLACKBOX, "serve", "--listen", "127.0.0.1:0", "--otlp-listen", "127.0.0.1:0", "--no-ingest"],
        env=env_for(data),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = serving_line(proc)
        assert "(audit, otlp, metrics)" in line, line
        main, receiver = line.split()[2], line.split()[4]
        json_type = {"Content-Type": "application/json"}
        assert (
            httpx.post(f"{receiver}/v1/traces", content=otlp_request(), headers=json_type).status_code == 200
        )
        assert httpx.post(f"{main}/v1/traces", content=otlp_request(), headers=json_type).status_code == 404
        assert httpx.get(f"{receiver}/v1/decisions/x").status_code == 404  # the audit API is not there
        assert httpx.get(f"{main}/v1/decisions/x").status_code == 401
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "otlp: requests=1 rejected=0 spans=1 decisions=1 delivered=all" in err

"""Helpers of the interop tests: a data directory on embedded defaults, ``blackbox serve`` in a
subprocess, and the installed exporters (``deploy/local/test.sh``: ``npm ci`` from the committed
lock file, ``go build`` from the module proxy). A missing install FAILS the test with the command
that makes it, never skips it."""

from __future__ import annotations

import base64
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from producers.evidence import TrustStore, load_signer

HERE = Path(__file__).resolve().parent
SEED_B64 = base64.b64encode(bytes(range(32))).decode()
BLACKBOX = [sys.executable, "-c", "from consumers.entry import main; main()"]


def installed(what: Path, command: str) -> Path:
    if not what.exists():
        pytest.fail(f"{what} is missing: run `{command}` (deploy/local/test.sh does)")
    return what


@pytest.fixture
def blackbox_env(tmp_path: Path) -> dict[str, str]:
    """A fresh data directory on embedded defaults whose trust store holds the receiver's key."""
    data = tmp_path / "bb"
    trust = TrustStore()
    trust.add(load_signer(b64=SEED_B64).public_raw, not_before=datetime(2000, 1, 1, tzinfo=UTC))
    trust.save(data / "trust.toml")
    return {k: v for k, v in os.environ.items() if not k.startswith("BLACKBOX_")} | {
        "BLACKBOX_DATA_DIR": str(data),
        "BLACKBOX_TRANSPORT": "spool",
        "BLACKBOX_BLOB": "local",
        "BLACKBOX_SIGNING_KEY_B64": SEED_B64,
        "BLACKBOX_CAPTURE_SAMPLE_ONE_IN": "1",
    }


class Serving:
    """A running ``blackbox serve``: :attr:`url`, and :meth:`stop` (SIGTERM, which must exit 0)."""

    def __init__(self, proc: subprocess.Popen[str], url: str) -> None:
        self.proc, self.url = proc, url

    def stop(self) -> None:
        if self.proc.returncode is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        _, err = self.proc.communicate(timeout=60)
        assert self.proc.returncode == 0 and "Traceback" not in err, err


@pytest.fixture
def serve(blackbox_env: dict[str, str]) -> Iterator[Serving]:
    """``blackbox serve`` on embedded defaults (receiver and ingest in one process)."""
    proc = subprocess.Popen(
        [*BLACKBOX, "serve", "--listen", "127.0.0.1:0"],
        env=blackbox_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    url = ""
    for line in proc.stderr:
        if line.startswith("serving on "):
            url = line.split()[2]
            break
    assert url, f"blackbox serve did not start (exit {proc.wait(30)})"
    serving = Serving(proc, url)
    try:
        yield serving
    finally:
        serving.stop()


def ingested(serving: Serving, env: dict[str, str], count: int) -> list[str]:
    """Wait until serve has indexed ``count`` decisions, stop it (the embedded index is then free for
    the CLI) and return their ids, read from the index (the spool is deleted once committed)."""
    import json
    import time

    import httpx
    from typer.testing import CliRunner

    from consumers.cli import app as cli

    deadline = time.monotonic() + 60
    while f"blackbox_ingest_indexed_total {float(count)}" not in httpx.get(f"{serving.url}/metrics").text:
        assert time.monotonic() < deadline, "the decisions were not ingested"
        time.sleep(0.2)
    serving.stop()
    listed = CliRunner().invoke(
        cli, ["query", "SELECT decision_id FROM decisions FINAL ORDER BY decision_id", "--json"], env=env
    )
    assert listed.exit_code == 0, listed.output
    return [row["decision_id"] for row in json.loads(listed.stdout)]


def which(tool: str) -> str:
    found = shutil.which(tool)
    if found is None:
        pytest.fail(f"{tool} is not on PATH (the interop tests need it)")
    return found

"""Witnessed checkpoints with the real witness (DESIGN 24, issue 33 item 4): transparency-dev/witness's
``omniwitness`` (installed by deploy/local/test.sh with ``go install``, pinned), configured from
``blackbox log witness-config``, cosigns blackbox's checkpoints; blackbox verifies the cosignatures, and
so does a small Go program using golang.org/x/mod/sumdb/note and transparency-dev/formats. A split view
(another log with the same origin and key, other leaves) is refused by the witness and its bundle fails
``--witness-quorum 1``; with two witnesses, one stopped, publishing goes on and a quorum of one verifies.

Embedded setup: spool, local blobs, chdb (as tests/consumers/tlog/test_tlog_retention_cli.py)."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from ingest_testdata import make_capture, new_signer, sealed, trust_for
from typer.testing import CliRunner

from consumers.cli import app
from consumers.observability.metrics import INGEST_REGISTRY
from consumers.tlog.checkpoints import load_log_signer
from consumers.tlog.witness import latest_cosigned_key, state_key
from producers.blobstore import LocalBlobStore
from producers.evidence.cosignature import WitnessKey
from producers.evidence.keys import public_raw
from producers.evidence.tlog import note_key_id
from producers.transports.spool.files import SpoolWriter
from schemas.codec import encode_capture

pytestmark = pytest.mark.slow
PREFIX = "tlog/blackbox.captures.v1"
GO_PROGRAM = Path(__file__).resolve().parent / "go-witness"


def _omniwitness() -> str:
    found = os.environ.get("BLACKBOX_OMNIWITNESS") or shutil.which("omniwitness")
    gopath = subprocess.run(["go", "env", "GOPATH"], capture_output=True, text=True).stdout.strip()
    found = found or (str(Path(gopath) / "bin" / "omniwitness") if gopath else None)
    if not found or not Path(found).is_file():
        pytest.fail("omniwitness is not installed: run deploy/local/test.sh (it runs go install, pinned)")
    return found


@pytest.fixture(scope="module")
def verify_cosigned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Go verifier, built from tests/interop/go-witness."""
    out = tmp_path_factory.mktemp("go") / "verify-cosigned"
    subprocess.run(["go", "build", "-o", str(out), "."], cwd=GO_PROGRAM, check=True, timeout=600)
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Witness:
    name: str
    url: str
    vkey: str
    process: subprocess.Popen[bytes] | None = None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)


def _start_witness(tmp: Path, name: str, config: Path) -> Witness:
    """omniwitness with a fresh ed25519 key (signed-note skey format) and this log as an additional log."""
    seed = os.urandom(32)
    public = public_raw(Ed25519PrivateKey.from_private_bytes(seed).public_key())
    skey = (
        f"PRIVATE+KEY+{name}+{note_key_id(name, public).hex()}+" + base64.b64encode(b"\x01" + seed).decode()
    )
    file = name.replace("/", "_")
    key_file = tmp / f"{file}.key"
    key_file.write_text(skey)
    port = _free_port()
    log = (tmp / f"{file}.log").open("wb")
    process = subprocess.Popen(
        [
            _omniwitness(),
            f"--listen=127.0.0.1:{port}",
            "--metrics_listen=",
            f"--private_key_path={key_file}",
            f"--additional_logs={config}",
            f"--db_file={tmp / (file + '.db')}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"omniwitness did not start: {(tmp / f'{file}.log').read_text()[-2000:]}")
            time.sleep(0.1)
    vkey = WitnessKey.from_public(name, Ed25519PrivateKey.from_private_bytes(seed).public_key()).vkey
    return Witness(name, f"http://127.0.0.1:{port}", vkey, process)


@pytest.fixture
def witnesses() -> Iterator[list[Witness]]:
    started: list[Witness] = []
    yield started
    for w in started:
        w.stop()


class Log:
    """One embedded blackbox (its own data directory and blobs), sharing the log key file given."""

    def __init__(self, data: Path, key: Path, runner: CliRunner) -> None:
        self.data = data
        self.runner = runner
        self.signer = new_signer()
        trust_for(self.signer).save(data / "trust.toml")
        self.env = {
            "BLACKBOX_DATA_DIR": str(data),
            "BLACKBOX_TRANSPORT": "spool",
            "BLACKBOX_BLOB": "local",
            "BLACKBOX_TLOG_KEY": str(key),
            "BLACKBOX_TLOG_ORIGIN": "blackbox.test/witnessed",
            "BLACKBOX_TLOG_CHECKPOINT_INTERVAL": "3600",
        }
        self.store = LocalBlobStore(data / "blobs")
        self.captures: list[dict[str, Any]] = []

    def cli(self, *args: str) -> Any:
        return self.runner.invoke(app, list(args), env=self.env)

    def ingest(self, first: int, n: int, witnesses: list[Witness]) -> None:
        self.env["BLACKBOX_TLOG_WITNESSES"] = json.dumps(
            [{"name": w.name, "url": w.url, "vkey": w.vkey} for w in witnesses]
        )
        writer = SpoolWriter(self.data / "spool")
        for i in range(first, first + n):
            capture = sealed(make_capture(i, size=200), self.signer)
            self.captures.append(capture)
            writer.append(b"agt_support_1", encode_capture(capture))
        writer.publish()
        result = self.cli("consume", "--drain", "--max-wait", "0.1")
        assert result.exit_code == 0, result.output

    def bundle(self, tmp: Path, index: int) -> Path:
        out = tmp / f"bundle-{self.data.name}-{index}.json"
        result = self.cli("export", self.captures[index]["decisionId"], "--out", str(out))
        assert result.exit_code == 0, result.output
        return out


def test_the_real_witness_cosigns_blackbox_checkpoints_and_refuses_a_split_view(
    tmp_path: Path, witnesses: list[Witness], verify_cosigned: Path
) -> None:
    runner = CliRunner()
    key = tmp_path / "tlog.key"
    load_log_signer(key, "blackbox.test/witnessed")  # the operator's log key (created on first use)
    log = Log(tmp_path / "a", key, runner)

    # the witness is configured from `blackbox log witness-config`, in its own format
    config = log.cli("log", "witness-config", "--url", "https://logs.example/blackbox")
    assert config.exit_code == 0, config.output
    log_vkey = log.cli("log", "key").output.strip()
    assert config.output == (
        'Logs:\n  - Origin: "blackbox.test/witnessed"\n'
        f'    PublicKey: "{log_vkey}"\n    URL: "https://logs.example/blackbox"\n'
    )
    (tmp_path / "witness.yaml").write_text(config.output)
    w1 = _start_witness(tmp_path, "witness.test/one", tmp_path / "witness.yaml")
    w2 = _start_witness(tmp_path, "witness.test/two", tmp_path / "witness.yaml")
    witnesses += [w1, w2]
    w2.stop()  # two witnesses configured, one stopped: publishing goes on

    log.ingest(0, 12, [w1, w2])
    status = log.cli("log", "status")
    assert status.exit_code == 0, status.output
    assert "checkpoint of 12 leaves" in status.output
    assert "witness witness.test/one (" in status.output and "cosigned 12 leaves" in status.output
    assert "witness witness.test/two" in status.output and "has not cosigned yet" in status.output
    metric = "blackbox_tlog_witness_cosigned_size"  # consume ran in this process: its registry has it
    assert INGEST_REGISTRY.get_sample_value(metric, {"witness": w1.name}) == 12
    assert INGEST_REGISTRY.get_sample_value(metric, {"witness": w2.name}) is None

    # blackbox verifies the witness's cosignature; so do the Go note libraries
    cosigned = tmp_path / "cosigned-12"
    cosigned.write_bytes(log.store.get(latest_cosigned_key(PREFIX)))
    go = subprocess.run(
        [str(verify_cosigned), str(cosigned), log_vkey, w1.vkey], capture_output=True, text=True, timeout=60
    )
    assert go.returncode == 0 and go.stdout.strip() == "ok blackbox.test/witnessed 12 1 witnesses", go.stderr
    go_wrong = subprocess.run(
        [str(verify_cosigned), str(cosigned), log_vkey, w2.vkey], capture_output=True, text=True, timeout=60
    )
    assert go_wrong.returncode == 1 and "witness.test/two" in go_wrong.stderr

    bundle = log.bundle(tmp_path, 3)
    trust = str(log.data / "trust.toml")
    base = ["verify", "--bundle", str(bundle), "--trust", trust, "--log-key", log_vkey]
    one_of_two = log.cli(*base, "--witness", w1.vkey, "--witness", w2.vkey, "--witness-quorum", "1")
    assert one_of_two.exit_code == 0, one_of_two.output
    assert "witnessed by 1 of 2 (quorum 1): witness.test/one" in one_of_two.output
    two_of_two = log.cli(*base, "--witness", w1.vkey, "--witness", w2.vkey)
    assert two_of_two.exit_code == 1 and "cosigned by 1 of the 2 witnesses" in two_of_two.output
    sdk = subprocess.run(  # the SDK's own verifier, without the CLI
        [sys.executable, "-m", "producers.evidence.bundle", str(bundle), "--trust", trust, "--log-key", log_vkey,
         "--witness", w1.vkey, "--witness-quorum", "1"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert sdk.returncode == 0 and "witnessed by 1 of 1" in sdk.stdout, sdk.stdout + sdk.stderr
    audited = log.cli("log", "verify", "--witness", w1.vkey, "--witness-quorum", "1")
    assert audited.exit_code == 0 and "witnessed by 1 of 1" in audited.output, audited.output

    # the next checkpoint goes with a consistency proof from the witness's last size
    log.ingest(12, 5, [w1])
    assert "cosigned 17 leaves" in log.cli("log", "status").output
    # a log that forgot what the witness saw starts from 0: the witness's 409 names 17, blackbox goes on
    log.store.delete(state_key(PREFIX, w1.name))
    log.ingest(17, 3, [w1])
    assert "cosigned 20 leaves" in log.cli("log", "status").output
    cosigned.write_bytes(log.store.get(latest_cosigned_key(PREFIX)))
    go = subprocess.run(
        [str(verify_cosigned), str(cosigned), log_vkey, w1.vkey], capture_output=True, text=True, timeout=60
    )
    assert go.returncode == 0 and " 20 1 witnesses" in go.stdout, go.stderr

    # while no witness answers, bundles of leaves a cosigned checkpoint covers still carry its cosignature
    log.ingest(20, 3, [w2])
    assert "checkpoint of 23 leaves" in log.cli("log", "status").output
    covered = json.loads(log.bundle(tmp_path, 5).read_text())
    assert covered["transparency"]["proof"]["treeSize"] == 20
    w1_only = ["--log-key", log_vkey, "--witness", w1.vkey, "--witness-quorum", "1"]
    assert (
        log.cli("verify", "--bundle", str(log.bundle(tmp_path, 5)), "--trust", trust, *w1_only).exit_code == 0
    )
    newest = log.cli("verify", "--bundle", str(log.bundle(tmp_path, 21)), "--trust", trust, *w1_only)
    assert newest.exit_code == 1 and "cosigned by 0 of the 1" in newest.output

    # a split view: same origin and key, other leaves; the witness refuses, its bundle fails the quorum
    split = Log(tmp_path / "b", key, runner)
    split.ingest(100, 21, [w1])
    assert "has not cosigned yet" in split.cli("log", "status").output
    assert not split.store.exists(latest_cosigned_key(PREFIX))
    forked = split.bundle(tmp_path, 0)
    refused = split.cli(
        "verify", "--bundle", str(forked), "--trust", str(split.data / "trust.toml"), "--log-key", log_vkey,
        "--witness", w1.vkey, "--witness-quorum", "1",
    )  # fmt: skip
    assert refused.exit_code == 1, refused.output
    assert "part=transparency.witness" in refused.output and "cosigned by 0 of the 1" in refused.output
    unwitnessed = split.cli("log", "verify", "--witness", w1.vkey, "--witness-quorum", "1")
    assert unwitnessed.exit_code == 1 and "FINDING witness: no cosigned checkpoint" in unwitnessed.output
    # while the log's own signature on it verifies: only the witness tells the histories apart
    plain = split.cli(
        "verify", "--bundle", str(forked), "--trust", str(split.data / "trust.toml"), "--log-key", log_vkey
    )
    assert plain.exit_code == 0, plain.output


def test_the_readme_and_the_test_command_pin_the_same_witness() -> None:
    root = Path(__file__).resolve().parents[2]
    pinned = re.search(r"OMNIWITNESS_VERSION=(\S+)", (root / "deploy/local/test.sh").read_text())
    assert pinned is not None
    shown = re.findall(r"cmd/omniwitness@(\S+)", (root / "README.md").read_text())
    assert shown == [pinned.group(1)]

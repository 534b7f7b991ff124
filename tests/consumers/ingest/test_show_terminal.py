"""``show`` on a terminal, with a capture whose every text field is an attack (issue 24 item 2).

The capture carries ESC sequences (clear screen, cursor up), a carriage return, bidi overrides, C1 CSI
and Rich markup in its decision id, agent id, model, prompt version, stop reason and output, and is
signed by a key the trust store does not hold. ``blackbox show`` runs in a pseudo-terminal, as an
operator would run it: no control byte reaches the terminal, nothing crashes, every field is visible
escaped, and the ``NOT VERIFIED`` banner is the first line and the last.
"""

from __future__ import annotations

import os
import pty
import re
import selectors
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from ingest_testdata import make_capture, new_signer, sealed, trust_for

from producers.transports.spool.files import SpoolWriter
from schemas.codec import encode_capture

ROOT = Path(__file__).resolve().parents[3]
ATTACK = "\x1b[2J\x1b[1A\rverified: OK\u202eKO\u2066[/INST][link=http://x]y[/link]\x9b31m:smile:\x07"
ESCAPED = (
    "\\x1b[2J\\x1b[1A\\rverified: OK"
    + "U+202EKO"
    + "U+2066[/INST][link=http://x]y[/link]\\x9b31m:smile:\\x07"
)
DECISION = "dec_evil" + ATTACK


def _hostile_capture() -> dict[str, Any]:
    capture = make_capture(1)
    capture["decisionId"] = DECISION
    capture["agentId"] = "agt" + ATTACK
    config = capture["agentConfiguration"]
    config["modelIdentifier"] = "model" + ATTACK
    config["modelVersion"] = "v" + ATTACK
    config["systemPromptVersion"] = "p" + ATTACK
    trace = capture["executionTrace"]
    trace["stopReason"] = "stop" + ATTACK
    trace["finalOutputText"] = "out" + ATTACK + "\nverified: forged second line"
    return capture


def _env(data: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith("BLACKBOX_")}
    return {
        **keep,
        "PYTHONPATH": str(ROOT),
        "BLACKBOX_DATA_DIR": str(data),
        "BLACKBOX_TRANSPORT": "spool",
        "BLACKBOX_BLOB": "local",
        "TERM": "xterm-256color",
        "COLUMNS": "100",
    }


def _run_in_pty(args: list[str], env: dict[str, str], timeout: float = 120.0) -> tuple[int, bytes]:
    """Run ``blackbox ARGS`` with stdout and stderr on a pseudo-terminal; (exit code, every byte written)."""
    controller, terminal = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-c", "from consumers.cli import main; main()", *args],
        stdin=subprocess.DEVNULL,
        stdout=terminal,
        stderr=terminal,
        env=env,
        cwd=ROOT,
    )
    os.close(terminal)
    out = bytearray()
    deadline = time.monotonic() + timeout
    # a selector, not select.select: late in a long session the descriptor number can pass 1024
    watch = selectors.DefaultSelector()
    watch.register(controller, selectors.EVENT_READ)
    while time.monotonic() < deadline:
        if watch.select(0.5):
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            break
    watch.close()
    os.close(controller)
    return proc.wait(timeout=30), bytes(out)


@pytest.fixture(scope="module")
def hostile_world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    data = tmp_path_factory.mktemp("hostile") / "bb"
    trusted, stranger = new_signer(), new_signer("did:test:stranger")
    trust_for(trusted).save(data / "trust.toml")
    writer = SpoolWriter(data / "spool")
    writer.append(b"agt_support_1", encode_capture(sealed(_hostile_capture(), stranger)))
    writer.publish()
    env = _env(data)
    consumed = subprocess.run(
        [
            sys.executable,
            "-c",
            "from consumers.cli import main; main()",
            "consume",
            "--drain",
            "--max-wait",
            "0.1",
        ],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert consumed.returncode == 0 and "indexed=" in consumed.stdout, consumed.stdout + consumed.stderr
    return env


def _control_bytes(out: bytes) -> set[int]:
    """Bytes a terminal acts on, other than the line breaks (the pty writes \\r\\n for each \\n)."""
    text = out.replace(b"\r\n", b"\n").decode("utf-8")
    found = {ord(ch) for ch in text if (ord(ch) < 0x20 and ch != "\n") or 0x7F <= ord(ch) <= 0x9F}
    found |= {ord(ch) for ch in text if "\u202a" <= ch <= "\u202e" or "\u2066" <= ch <= "\u2069"}
    return found


def test_show_writes_no_control_byte_and_keeps_the_verdict_last(hostile_world: dict[str, str]) -> None:
    code, out = _run_in_pty(["show", DECISION], hostile_world)
    assert not _control_bytes(out), sorted(_control_bytes(out))
    lines = out.replace(b"\r\n", b"\n").decode("utf-8").strip("\n").split("\n")
    assert code == 1, lines
    assert lines[0].startswith("NOT VERIFIED: dec_evil") and lines[-1] == lines[0], lines
    shown = "\n".join(lines)
    for field in ("agt", "model", "p", "stop", "out"):
        assert field + ESCAPED in shown, field
    assert not any(line.startswith("verified") for line in lines)  # the output's own line break neither


def test_show_json_in_a_terminal_is_exact_json_without_control_bytes(hostile_world: dict[str, str]) -> None:
    import json

    code, out = _run_in_pty(["show", DECISION, "--json"], hostile_world)
    assert not _control_bytes(out), sorted(_control_bytes(out))
    view = json.loads(out.replace(b"\r\n", b"\n"))
    assert code == 1 and view["capture"]["agentId"] == "agt" + ATTACK  # the exact value, escaped as JSON
    assert view["verification"]["verdict"] == "not-verified"


_SGR = re.compile(rb"\x1b\[[0-9;]*m")  # the styles Rich itself writes on a terminal (bold headers)


def test_query_on_a_terminal_styles_its_table_but_never_writes_data_bytes(
    hostile_world: dict[str, str],
) -> None:
    """On a TTY Rich draws the table (and may style it); the hostile index values inside stay text."""
    code, out = _run_in_pty(
        ["query", "SELECT decision_id, agent_id, reason FROM quarantine"],  # an untrusted key: quarantined
        {**hostile_world, "COLUMNS": "600"},
    )
    shown = _SGR.sub(b"", out)
    assert code == 0, shown.decode("utf-8", "replace")
    assert not _control_bytes(shown), sorted(_control_bytes(shown))
    row = next(line for line in shown.decode("utf-8").splitlines() if "dec_evil" in line)
    assert "dec_evil" + ESCAPED in row and "agt" + ESCAPED in row and "KeyNotTrusted" in row

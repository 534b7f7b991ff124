"""Helpers of the observability tests: a spool with known outcomes, the CLI as a subprocess, scrapes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from ingest_testdata import encoded, make_capture, new_signer, sealed, trust_for
from prometheus_client.parser import text_string_to_metric_families

from producers.transports.spool.files import SpoolWriter
from schemas.codec import encode_capture

BLACKBOX = str(Path(sys.executable).with_name("blackbox"))
GOOD = 5
"""The spool of :func:`write_spool`: GOOD captures, then one duplicate, one bad signature, one junk message."""


def write_spool(data: Path) -> None:
    signer = new_signer()
    trust_for(signer).save(data / "trust.toml")
    writer = SpoolWriter(data / "spool")
    good = [encoded(make_capture(i), signer) for i in range(GOOD)]
    for value in good:
        writer.append(b"agt_support_1", value)
    writer.append(b"agt_support_1", good[0])  # redelivered: deduplicated
    forged = sealed(make_capture(90), signer)
    forged["outcome"]["status"] = "failure"  # a signed manifest field changed: the signature fails
    writer.append(b"agt_support_1", encode_capture(forged))
    writer.append(b"agt_support_1", b"\xc3\x01 not avro")  # dead-lettered
    writer.publish()


def cli_env(data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BLACKBOX_")}
    return env | {"BLACKBOX_DATA_DIR": str(data), "BLACKBOX_TRANSPORT": "spool", "BLACKBOX_BLOB": "local"}


def run_cli(args: list[str], data: Path, *, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [BLACKBOX, *args], env=cli_env(data), capture_output=True, text=True, timeout=timeout, check=False
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str) -> tuple[int, str]:
    """Status and body of a GET (an HTTP error status is an answer, not an exception)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of an exposition, keyed by (name, sorted labels)."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def wait_for(what: str, probe: Callable[[], bool], *, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if probe():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")

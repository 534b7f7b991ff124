"""Worker processes of ``blackbox consume --workers N`` die with their parent, even when it is SIGKILLed.

Runs the real CLI on the embedded spool as a subprocess, waits until its worker processes have done a
batch, SIGKILLs the parent and watches ``/proc`` for every process it had started (the workers and
multiprocessing's resource tracker, which follows them once they are gone).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ingest_testdata import encoded, make_capture, new_signer, trust_for

from consumers.ingest.lifeline import Lifeline, watch_parent
from producers.transports.spool.files import SpoolWriter

BLACKBOX = str(Path(sys.executable).with_name("blackbox"))


def _stat(pid: int) -> list[str] | None:
    """Fields after ``comm`` in /proc/PID/stat (state, ppid, ...); None when the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields is not None and int(fields[1]) == pid:
                out.append(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"  # a zombie has exited; only its reaper is missing


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@pytest.fixture
def spawned() -> Iterator[list[int]]:
    """Pids the test saw; any still alive at the end are killed (by pid) so a failure leaks nothing."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_sigkilled_consume_takes_its_worker_processes_with_it(tmp_path: Path, spawned: list[int]) -> None:
    data = tmp_path / "bb"
    signer = new_signer()
    trust_for(signer).save(data / "trust.toml")
    writer = SpoolWriter(data / "spool")
    for i in range(8):  # >= 2 x workers in one batch: the pool is used, so the workers are spawned
        writer.append(b"agt_support_1", encoded(make_capture(i), signer))
    writer.publish()
    env = {k: v for k, v in os.environ.items() if not k.startswith("BLACKBOX_")}
    env |= {"BLACKBOX_DATA_DIR": str(data), "BLACKBOX_TRANSPORT": "spool", "BLACKBOX_BLOB": "local"}
    proc = subprocess.Popen(
        [BLACKBOX, "consume", "--workers", "2", "--max-wait", "0.1"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    spawned.append(proc.pid)
    checkpoint = data / "ingest" / "spool-checkpoint.json"
    deadline = time.monotonic() + 90
    workers: list[int] = []
    while time.monotonic() < deadline and proc.poll() is None:
        kids = _children(proc.pid)
        spawned.extend(k for k in kids if k not in spawned)
        workers = [k for k in kids if "spawn_main" in _cmdline(k)]
        if len(workers) == 2 and checkpoint.exists():  # the workers did a batch and it was committed
            break
        time.sleep(0.1)
    assert proc.poll() is None, proc.communicate()[1].decode(errors="replace")
    assert len(workers) == 2 and checkpoint.exists(), f"workers never ran: children {kids}"
    kids = _children(proc.pid)

    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(k) for k in kids):
        time.sleep(0.1)
    left = {k: _cmdline(k) for k in kids if _alive(k)}
    assert not left, f"still running after the parent was SIGKILLed: {left}"
    assert proc.stderr is not None
    assert b"parent process is gone" in proc.stderr.read()


def test_a_worker_started_after_its_parent_died_exits_at_once(tmp_path: Path) -> None:
    """The race a parent-death signal needs a second check for: the lifeline is already closed."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    lifeline = Lifeline(ctx)
    child_end = lifeline.child_end
    lifeline._writer.close()  # the parent "died" before the worker got going
    worker = ctx.Process(target=_watch_then_sleep, args=(child_end,))
    worker.start()
    worker.join(30)
    alive = worker.is_alive()
    if alive:
        worker.kill()
    lifeline.close()
    assert not alive and worker.exitcode == 1


def _watch_then_sleep(child_end: object) -> None:
    watch_parent(child_end)  # type: ignore[arg-type]
    time.sleep(60)

"""Owner-only files (issue 24, item 5): another local account cannot read the data directory.

An agent process with the usual umask 022 records through the Recorder (spool, local key records),
then ``blackbox consume`` and ``blackbox compact`` run as real processes; every file under the data
directory is then 0600 and every directory 0700, and a second account (``nobody``, through
``runuser`` when the tests run as root) is refused - while it can read a 0644 control file beside it,
so the refusal is the modes' doing, not an unreachable path.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from producers.owner_only import create_private, private_dirs, too_open, warn_if_too_open

ROOT = Path(__file__).resolve().parents[2]


def test_private_dirs_and_files_ignore_a_permissive_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        private_dirs(tmp_path / "a" / "b" / "c")
        os.close(create_private(tmp_path / "a" / "b" / "c" / "f"))
        (tmp_path / "a" / "open").mkdir()  # made the ordinary way: 0755
    finally:
        os.umask(old)
    for d in ("a", "a/b", "a/b/c"):
        assert stat.S_IMODE((tmp_path / d).stat().st_mode) == 0o700, d
    assert stat.S_IMODE((tmp_path / "a/b/c/f").stat().st_mode) == 0o600
    assert too_open(tmp_path / "a") == [f"{tmp_path / 'a' / 'open'} (0755)"]


def test_the_start_warning_names_what_is_too_open(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    data = tmp_path / "bb"
    private_dirs(data / "spool")
    (data / "spool" / "x.avro").write_bytes(b"x")
    os.chmod(data / "spool" / "x.avro", 0o644)
    assert warn_if_too_open(data) == [f"{data / 'spool' / 'x.avro'} (0644)"]
    assert f"{data / 'spool' / 'x.avro'} (0644)" in caplog.text and "chmod -R go-rwx" in caplog.text
    os.chmod(data / "spool" / "x.avro", 0o600)
    assert warn_if_too_open(data) == []


@pytest.fixture
def shared_parent() -> Iterator[Path]:
    """A directory every account may traverse (pytest's own temp root is 0700, which would hide the point)."""
    parent = Path(tempfile.mkdtemp(prefix="bb-owner-only-", dir="/tmp"))
    os.chmod(parent, 0o755)
    try:
        yield parent
    finally:
        shutil.rmtree(parent, ignore_errors=True)


AGENT = textwrap.dedent(
    """
    import os, sys
    os.umask(0o022)  # the agent's ordinary umask: the Recorder must not depend on it
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from producers.evidence import Signer
    from producers.policy import CapturePolicy
    from producers.recorder import Recorder
    from producers.settings import load_settings

    rec = Recorder.from_settings(
        load_settings(data_dir=sys.argv[1], transport="spool", blob="local"),
        agent_id="agt_owner_only",
        signer=Signer(Ed25519PrivateKey.generate(), name="did:test:owner-only"),
        policy=CapturePolicy(sample_one_in=1),
    )
    with rec.decision(request={"message": "hi"}, origin_user_id="cus_1", consequential=True) as d:
        d.configure(model="acme", system_prompt="You help.", sampling={})
        d.add_memory(entry_id="m", tier="hot", content="writes from jane@example.com")
        d.render_context(user_message="hi")
        d.finish(output="hello", outcome="success")
    assert rec.close(10)
    """
)


def _blackbox(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "BLACKBOX_DATA_DIR": str(data),
        "BLACKBOX_TRANSPORT": "spool",
        "BLACKBOX_BLOB": "local",
    }
    env.pop("BLACKBOX_CHDB_PATH", None)  # the index under the data directory, as a user's would be
    return subprocess.run(
        [sys.executable, "-c", "from consumers.entry import main; main()", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        preexec_fn=lambda: os.umask(0o022),
    )


def _as_nobody(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["runuser", "-u", "nobody", "--", *command], capture_output=True, text=True, timeout=30
    )


@pytest.mark.timeout(300)
def test_a_second_local_user_cannot_read_the_data_directory(shared_parent: Path) -> None:
    data = shared_parent / "bb"
    agent = subprocess.run(
        [sys.executable, "-c", AGENT, str(data)], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert agent.returncode == 0, agent.stderr
    consumed = _blackbox(data, "consume", "--drain", "--max-wait", "0.2")
    assert consumed.returncode == 0, consumed.stderr
    assert "readable beyond its owner" not in consumed.stderr, consumed.stderr
    compacted = _blackbox(data, "compact")
    assert compacted.returncode == 0, compacted.stderr

    files = [p for p in data.rglob("*") if p.is_file() and not p.is_symlink()]
    assert any("datakeys" in p.parts for p in files) and any("segments" in p.parts for p in files)
    assert any("index" in p.parts for p in files)  # chdb's own files
    walked = [p for p in (data, *data.rglob("*")) if not p.is_symlink()]
    wide = [f"{p} ({stat.S_IMODE(p.stat().st_mode):04o})" for p in walked if p.stat().st_mode & 0o077]
    assert wide == []

    if os.geteuid() != 0 or shutil.which("runuser") is None:
        return  # no second account to become: the modes above are the whole of the property
    control = shared_parent / "control.txt"
    control.write_text("readable", encoding="utf-8")
    os.chmod(control, 0o644)
    assert _as_nobody("cat", str(control)).stdout == "readable"  # the path is reachable for nobody
    listing = _as_nobody("ls", str(data))
    assert listing.returncode != 0 and "Permission denied" in listing.stderr, listing
    for path in files[:20]:
        read = _as_nobody("cat", str(path))
        assert read.returncode != 0 and "Permission denied" in read.stderr, (path, read)

    # a data directory made readable again is named at the next start
    os.chmod(data, 0o755)
    warned = _blackbox(data, "consume", "--drain", "--max-wait", "0.1")
    assert warned.returncode == 0, warned.stderr
    assert f"readable beyond its owner: {data} (0755)" in warned.stderr, warned.stderr

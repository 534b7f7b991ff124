"""Bad settings and a wrong data directory get one clear line naming what was wrong, never a traceback
(issue 8, item 10). Each runs the real CLI in a subprocess, as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from consumers.app.settings import load_service_settings
from schemas.errors import SettingsInvalid

BLACKBOX = [sys.executable, "-c", "from consumers.cli import main; main()"]


def blackbox(args: list[str], *, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("BLACKBOX_")}
    return subprocess.run(
        [*BLACKBOX, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**clean, "COLUMNS": "200", **env},
        check=False,
    )


@pytest.mark.parametrize(
    ("env", "names", "allowed"),
    [
        ({"BLACKBOX_SCOPE": "admin"}, ["BLACKBOX_SCOPE='admin'"], "'operator', 'regulator', 'counterparty'"),
        ({"BLACKBOX_TRANSPORT": "rabbitmq"}, ["BLACKBOX_TRANSPORT='rabbitmq'"], "'spool', 'kafka'"),
        ({"BLACKBOX_MAX_MESSAGE_BYTES": "lots"}, ["BLACKBOX_MAX_MESSAGE_BYTES='lots'"], "valid integer"),
        (
            {"BLACKBOX_CAPTURE_SAMPLE_ONE_IN": "-1", "BLACKBOX_BLOB": "ftp"},
            ["BLACKBOX_CAPTURE_SAMPLE_ONE_IN='-1'", "BLACKBOX_BLOB='ftp'"],
            "greater than or equal to 0",
        ),
    ],
)
def test_a_bad_setting_names_itself_the_value_and_what_is_allowed(
    tmp_path: Path, env: dict[str, str], names: list[str], allowed: str
) -> None:
    out = blackbox(["show", "0" * 32], env={"BLACKBOX_DATA_DIR": str(tmp_path), **env})
    assert out.returncode == 2
    assert "Traceback" not in out.stderr and "pydantic" not in out.stderr
    assert out.stderr.startswith("error: invalid settings: ")
    for name in names:
        assert name in out.stderr
    assert allowed in out.stderr


def test_load_settings_raises_the_blackbox_error_not_pydantics(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BLACKBOX_SCOPE", "root")
    with pytest.raises(SettingsInvalid, match=r"BLACKBOX_SCOPE='root' is not allowed: one of 'operator'"):
        load_service_settings()


@pytest.mark.parametrize(
    "command",
    [
        ["show", "0" * 32],
        ["compact"],
        ["query", "SELECT 1"],
        ["trends", "failure_rate"],
        ["hold", "0" * 32, "--reason", "audit"],
        ["replay", "0" * 32],
        ["report", "--out", "r.html"],
    ],
)
def test_a_read_command_on_a_missing_data_dir_says_so_and_creates_nothing(
    tmp_path: Path, command: list[str]
) -> None:
    missing = tmp_path / "blackbx"  # a typo of the real directory
    out = blackbox(command, env={"BLACKBOX_DATA_DIR": str(missing)})
    assert out.returncode == 2, out.stderr
    assert f"no blackbox index at {missing / 'index'}" in out.stderr
    assert f"BLACKBOX_DATA_DIR={missing}" in out.stderr
    assert "Traceback" not in out.stderr
    assert not missing.exists(), "a read command must not create an empty index"


def test_a_second_process_on_the_embedded_index_is_told_to_stop_consume_or_use_a_server(
    tmp_path: Path,
) -> None:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("BLACKBOX_")}}
    env["BLACKBOX_DATA_DIR"] = str(tmp_path)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from consumers.index import open_index\n"
            "from consumers.app.settings import load_service_settings\n"
            "index = open_index(load_service_settings()); print('open', flush=True); sys.stdin.read()",
        ],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        deadline = time.monotonic() + 60
        assert holder.stdout.readline().strip() == "open" and time.monotonic() < deadline
        out = blackbox(["show", "0" * 32], env={"BLACKBOX_DATA_DIR": str(tmp_path)})
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
    assert out.returncode == 2
    assert "is in use by another process (is `blackbox consume` running on it?)" in out.stderr
    assert "BLACKBOX_CLICKHOUSE_URL" in out.stderr
    assert "Traceback" not in out.stderr


def test_a_chdb_path_that_is_a_file_is_named_not_a_traceback(tmp_path: Path) -> None:
    in_the_way = tmp_path / "index"
    in_the_way.write_text("not a directory")
    out = blackbox(["consume", "--drain"], env={"BLACKBOX_DATA_DIR": str(tmp_path)})
    assert out.returncode == 2
    assert f"cannot use {in_the_way} as the chdb data directory" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("command", ["show", "verify", "query", "compact", "replay", "report", "trends"])
def test_help_works_without_a_data_dir(tmp_path: Path, command: str) -> None:
    missing = tmp_path / "nowhere"
    out = blackbox([command, "--help"], env={"BLACKBOX_DATA_DIR": str(missing)})
    assert out.returncode == 0, out.stderr
    assert "Usage" in out.stdout
    assert not missing.exists()

"""The console's test world: what the session fixture builds (the demo's data, hostile and big captures,
tokens, a real ``blackbox serve``) and the helpers the tests share."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

BLACKBOX = [sys.executable, "-c", "from consumers.cli import main; main()"]
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
SHOTS = Path(__file__).resolve().parents[3] / "test-output" / "console"


@dataclass(frozen=True)
class ConsoleWorld:
    url: str  # the server's origin, http://127.0.0.1:PORT
    data_dir: Path
    env: dict[str, str]
    link: str  # the demo's one-time sign-in link, pointed at this server
    failed_id: str
    hostile_id: str
    big_id: str
    counterparty_token: str
    counterparty_ids: frozenset[str]
    regulator_token: str
    log_key: str
    user: str = ""  # the raw originUserId of the counterparty's decisions
    idp: Any = None  # the OpenID provider the console signs in at (idp.Idp)

    @property
    def console(self) -> str:
        return f"{self.url}/console"


def run(args: list[str], env: dict[str, str], *, ok: bool = True) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(
        [*BLACKBOX, *args], capture_output=True, text=True, timeout=300, env=env, check=False
    )
    if ok:
        assert out.returncode == 0, f"blackbox {' '.join(args)}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def token(env: dict[str, str], *args: str) -> str:
    out = run(["access", "token", "create", *args], env).stdout
    match = re.search(r"bbx_[0-9a-f]{12}_[A-Za-z0-9_-]+", out)
    assert match, out
    return match.group(0)


def ids_of_user(data_dir: Path, user: str) -> frozenset[str]:
    code = (
        "import json, sys\n"
        "from consumers.app.runtime import open_runtime\n"
        "from consumers.privacy.ids import index_ids\n"
        "with open_runtime(existing_index=True) as rt:\n"
        "    forms = list(index_ids(rt.settings).lookup(sys.argv[1]))\n"
        "    rows = rt.index.query('SELECT decision_id FROM decisions FINAL WHERE origin_user_id IN "
        "{f:Array(String)}', {'f': forms})\n"
        "print(json.dumps([r['decision_id'] for r in rows]))\n"
    )
    env = {**clean_env(), "BLACKBOX_DATA_DIR": str(data_dir)}
    out = subprocess.run(
        [sys.executable, "-c", code, user], capture_output=True, text=True, env=env, check=True
    )
    return frozenset(json.loads(out.stdout))


def clean_env() -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if not k.startswith("BLACKBOX_")}, "COLUMNS": "200"}


def shot(page: Any, name: str) -> None:
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=False)


@contextmanager
def serving(env: dict[str, str], log: Path) -> Iterator[str]:
    """A real ``blackbox serve`` on a free loopback port with ``env``; yields its origin, stops it after."""
    port = free_port()
    server = subprocess.Popen(
        [*BLACKBOX, "serve", "--listen", f"127.0.0.1:{port}"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log.open("w"),
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/console/signin", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            pytest.fail(f"blackbox serve did not start:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)
    try:
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()

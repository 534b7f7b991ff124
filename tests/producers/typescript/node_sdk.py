"""Building and running the TypeScript SDK from pytest: ``npm ci`` once per session, then ``tsc``."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[3] / "producers" / "typescript"


def _run(command: list[str], *, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=PACKAGE, capture_output=True, text=True, timeout=timeout, check=False)


def build_package() -> Path:
    """``npm ci`` (when the lock file changed since the last install) and the strict ``tsc`` build."""
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.fail("node and npm are needed for the TypeScript SDK (deploy/local/test.sh installs them)")
    lock = PACKAGE / "package-lock.json"
    stamp = PACKAGE / "node_modules" / ".package-lock.json"
    if not stamp.exists() or stamp.stat().st_mtime < lock.stat().st_mtime:
        done = _run(["npm", "ci", "--no-audit", "--no-fund"], timeout=600)
        assert done.returncode == 0, f"npm ci failed:\n{done.stdout}\n{done.stderr}"
    done = _run(["npx", "tsc", "-p", "tsconfig.json"], timeout=300)
    assert done.returncode == 0, f"tsc (strict) failed:\n{done.stdout}\n{done.stderr}"
    return PACKAGE


def node(
    script: list[str],
    *,
    env: dict[str, str] | None = None,
    cwd: Path = PACKAGE,
    timeout: float = 300,
    input_text: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """``node`` (in the package directory unless ``cwd``) with ``env`` added to this process's environment,
    ``input_text`` on its standard input."""
    return subprocess.run(
        ["node", *script],
        cwd=cwd,
        input=input_text,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **(env or {})},
    )

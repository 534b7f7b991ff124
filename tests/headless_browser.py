"""Open a page in Debian's headless Chromium and return the DOM after its scripts ran."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("chromium is missing: deploy/local/test.sh installs Debian's chromium package")


def dump_dom(page: Path) -> str:
    """The DOM after the page's scripts ran, as headless Chromium sees it."""
    out = subprocess.run(
        [
            _chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={page.parent / 'chromium-profile'}",
            "--virtual-time-budget=2000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout

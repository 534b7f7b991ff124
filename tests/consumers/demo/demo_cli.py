"""Run ``blackbox`` in a subprocess, as a newcomer does; one demo shared by the demo and README tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BLACKBOX = [sys.executable, "-c", "from consumers.cli import main; main()"]


def run(
    args: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None, ok: bool = True
) -> str:
    out = subprocess.run(
        [*BLACKBOX, *args],
        capture_output=True,
        text=True,
        timeout=300,
        # Embedded defaults plus what the test sets, whatever the developer's shell exports.
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("BLACKBOX_")},
            "COLUMNS": "200",
            **(env or {}),
        },
        cwd=cwd,
        check=False,
    )
    if ok:
        assert out.returncode == 0, (
            f"blackbox {' '.join(args)} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
        )
    return out.stdout

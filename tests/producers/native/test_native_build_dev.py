"""The README's rebuild command for the native core: ``bash producers/native/build-dev.sh``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "producers" / "native" / "build-dev.sh"


def test_the_readme_names_the_rebuild_command() -> None:
    assert "bash producers/native/build-dev.sh" in (ROOT / "README.md").read_text(encoding="utf-8")


@pytest.mark.slow
def test_build_dev_rebuilds_a_core_that_loads_with_this_codes_abi() -> None:
    built = subprocess.run(["bash", str(SCRIPT)], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stderr
    target = ROOT / "producers" / "native" / "_core.abi3.so"
    assert target.is_file()
    # no other build of the module beside it that Python would pick first
    assert sorted(p.name for p in target.parent.glob("_core*.so")) == ["_core.abi3.so"]
    probe = (
        "import producers.native as n, producers.native._core as c; "
        "assert c.__file__.endswith('_core.abi3.so'), c.__file__; print(n.status(), c.ABI == n.ABI)"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60, env=None
    )
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.split() == ["native", "True"]

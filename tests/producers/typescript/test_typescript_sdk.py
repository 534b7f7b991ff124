"""The TypeScript SDK's own suite (``node --test``) passes, after a strict ``tsc`` build.

The suite reproduces every byte of the committed vectors (see ``generate_vectors.py``); its
output is shown on failure.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from node_sdk import build_package, node


@pytest.fixture(scope="session")
def package() -> Path:
    return build_package()


def test_the_node_test_suite_passes(package: Path) -> None:
    done = node(["--test", "dist/test/"])
    report = done.stdout + done.stderr
    assert done.returncode == 0, report[-6000:]
    passed = re.search(r"^# pass (\d+)$", report, re.MULTILINE)
    assert passed is not None and int(passed.group(1)) >= 38, report[-3000:]
    assert re.search(r"^# fail 0$", report, re.MULTILINE), report[-3000:]

"""The Helm chart as the tests see it: the pinned helm binary, rendered manifests and their workloads."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "blackbox"
PRODUCTION = CHART / "ci" / "production-values.yaml"
TEST_SH = ROOT / "deploy" / "local" / "test.sh"
STATE_DIR = Path(os.environ.get("BLACKBOX_LOCAL_STATE", ROOT / "deploy" / "local" / ".state"))


def find_helm() -> Path:
    """The pinned helm deploy/local/test.sh builds (its version checked), or a failure naming how to get it."""
    pinned = re.search(r"^HELM_VERSION=(v[\d.]+)$", TEST_SH.read_text(encoding="utf-8"), re.MULTILINE)
    assert pinned, "deploy/local/test.sh pins HELM_VERSION"
    found = STATE_DIR / "bin" / "helm"
    binary = found if found.exists() else Path(shutil.which("helm") or found)
    if not binary.exists():
        pytest.fail(
            f"helm is missing at {found}: bash deploy/local/test.sh installs it (go install, {pinned[1]})"
        )
    info = subprocess.run(["go", "version", "-m", binary], capture_output=True, text=True, check=True).stdout
    assert re.search(rf"^\s+mod\s+helm\.sh/helm/v4\s+{re.escape(pinned[1])}\s", info, re.MULTILINE), info
    return binary


def helm_out(helm: Path, *args: str | Path) -> str:
    proc = subprocess.run([helm, *args], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, f"helm {' '.join(map(str, args))}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def render(helm: Path, *values: Path, sets: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    args: list[str | Path] = ["template", "evidence", CHART, "--namespace", "agents"]
    for path in values:
        args += ["-f", path]
    for assignment in sets:
        args += ["--set", assignment]
    return [doc for doc in yaml.safe_load_all(helm_out(helm, *args)) if doc]


def kinds(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def pod_specs(docs: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(component, pod template, owner) of every Deployment and CronJob."""
    for doc in docs:
        if doc["kind"] == "Deployment":
            template = doc["spec"]["template"]
        elif doc["kind"] == "CronJob":
            template = doc["spec"]["jobTemplate"]["spec"]["template"]
        else:
            continue
        yield template["metadata"]["labels"]["app.kubernetes.io/component"], template, doc

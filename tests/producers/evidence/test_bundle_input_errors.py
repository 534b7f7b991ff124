"""``blackbox verify --bundle`` on hostile files (issue 24 item 8): a file nested 100,000 levels deep is an
input error (exit 2, one line naming the file), never a RecursionError traceback that exits 1 as if it were
a NOT VERIFIED verdict; a sealed bundle whose capture is nested deep inside is judged or refused, no
traceback either way."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from conftest import golden_signer, load_example

from producers.evidence import TrustStore, seal
from producers.evidence.bundle import build_bundle

ROOT = Path(__file__).resolve().parents[3]


def _verify(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from consumers.cli import main; main()", "verify", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )


def _trust(tmp_path: Path) -> tuple[Path, TrustStore]:
    trust = TrustStore()
    trust.add(golden_signer().public_raw, not_before=datetime(2000, 1, 1, tzinfo=UTC))
    path = tmp_path / "trust.toml"
    trust.save(path)
    return path, trust


def test_a_file_nested_100k_deep_is_an_input_error(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    depth = 100_000
    deep.write_text('{"bundleFormat": ' + "[" * depth + "]" * depth + "}", encoding="utf-8")
    trust, _ = _trust(tmp_path)
    result = _verify("--bundle", str(deep), "--trust", str(trust))
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and "RecursionError" not in result.stderr
    assert result.stderr.strip() == f"error: {deep}: JSON nested too deeply to read " + (
        "(arrays or objects inside each other beyond ~1,000 levels)"
    )
    as_file = _verify("--file", str(deep), "--trust-store", str(trust))
    assert as_file.returncode == 2 and "nested too deeply" in as_file.stderr, as_file.stderr


def test_a_sealed_bundle_with_deep_content_gets_an_answer_not_a_traceback(tmp_path: Path) -> None:
    trust_path, trust = _trust(tmp_path)
    capture = load_example()
    sealed = seal(capture, golden_signer())
    sealed["input"]["requestPayload"] = {"deep": "DEEP"}  # swapped after sealing: the verifier walks it
    bundle = build_bundle(
        sealed,
        trusted=next(iter(trust)),
        transparency=None,
        exported_at=datetime.now(UTC),
    )
    path = tmp_path / "bundle.json"
    path.write_text(json.dumps(bundle).replace('"DEEP"', "[" * 980 + "]" * 980), encoding="utf-8")
    result = _verify("--bundle", str(path), "--trust", str(trust_path))
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode in (1, 2), (result.stdout, result.stderr)

"""A Node capture with personal data: redacted before sealing, and its original opened by Python.

``producers/typescript/examples/redacting-agent.ts`` records one decision holding an e-mail address,
a phone number, a card and an IBAN, with redaction on (the default) and the key file and blob
directory the Python side uses. Python then decodes and verifies the redacted capture, ingests it,
and ``blackbox show --reveal`` (under a personal-data grant) opens the sealed original: the data key
record written by Node unwraps with the key file, the original decrypts, and its keyed hashes check.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from node_sdk import build_package, node
from typer.testing import CliRunner

from producers.evidence import TrustStore, load_signer, verify_capture
from producers.transports.spool.files import read_spool
from schemas.codec import decode

SEED_B64 = (Path(__file__).resolve().parents[1] / "evidence" / "golden" / "test-key.seed").read_text().strip()
EMAIL = "jane.doe@example.com"


@pytest.fixture(scope="module")
def package() -> Path:
    return build_package()


def _env(data_dir: Path) -> dict[str, str]:
    return {"BLACKBOX_DATA_DIR": str(data_dir), "BLACKBOX_TRANSPORT": "spool", "BLACKBOX_BLOB": "local"}


def _show(data_dir: Path, decision_id: str, *extra: str) -> dict[str, Any]:
    from consumers.cli import app

    shown = CliRunner().invoke(app, ["show", decision_id, "--json", *extra], env=_env(data_dir))
    assert shown.exit_code == 0, shown.output
    view: dict[str, Any] = json.loads(shown.stdout)
    return view


@pytest.mark.parametrize("threads", ["0", "2"], ids=["on-the-loop", "seal-threads"])
def test_node_redacts_and_python_reveals_the_original(package: Path, tmp_path: Path, threads: str) -> None:
    from consumers.cli import app

    data_dir = tmp_path / "bb"
    data_dir.mkdir()
    trust = TrustStore()
    trust.add(load_signer(b64=SEED_B64).public_raw, not_before=datetime(2000, 1, 1, tzinfo=UTC))
    trust.save(data_dir / "trust.toml")
    done = node(
        ["dist/examples/redacting-agent.js"],
        env={
            "BLACKBOX_DATA_DIR": str(data_dir),
            "BLACKBOX_SIGNING_KEY_B64": SEED_B64,
            "BLACKBOX_SEAL_THREADS": threads,
        },
    )
    assert done.returncode == 0, done.stderr
    ran = json.loads(done.stdout)
    assert ran["stats"]["delivered"] == 1 and ran["stats"]["failed"] == 0
    decision_id = ran["decisionId"]

    # no copy on the wire holds the original in the clear
    spooled = b"".join(record.value for record in read_spool(data_dir / "spool"))
    for secret in (EMAIL, "4111 1111 1111 1111", "415-555-0132", "GB82 WEST"):
        assert secret.encode() not in spooled
    (capture,) = [
        m.value for m in (decode(r.value) for r in read_spool(data_dir / "spool")) if m.kind == "capture"
    ]
    verify_capture(capture, trust)
    assert capture["replayPolicy"]["piiRedacted"] is True
    privacy = capture["privacy"]
    assert privacy["cipher"] == "AES-256-GCM" and privacy["sealedOriginal"].startswith("base64:")
    assert {r["kind"] for r in privacy["redactions"]} == {"EMAIL", "PHONE", "CARD", "IBAN"}
    entry = capture["memoryState"]["workingSetEntries"][0]["renderedContent"]
    assert entry == "Jane writes from [EMAIL_1], phone [PHONE_1]. 日本語 ✓ 𝄞"
    assert capture["executionTrace"]["toolCalls"][0]["input"] == {"email": "[EMAIL_1]"}

    consumed = CliRunner().invoke(app, ["consume", "--drain", "--max-wait", "0.1"], env=_env(data_dir))
    assert consumed.exit_code == 0, consumed.output
    redacted = _show(data_dir, decision_id)
    assert EMAIL not in json.dumps(redacted["capture"], ensure_ascii=False)
    assert redacted["privacy"]["view"] == "redacted"

    (data_dir / "grants.toml").write_text(
        '[[grant]]\ncaller = "*"\nscope = "operator"\nagents = ["*"]\n'
        'purpose = "complaint 77"\npersonal_data = true\n',
        encoding="utf-8",
    )
    revealed = _show(data_dir, decision_id, "--reveal", "--reason", "complaint 77")
    assert revealed["privacy"]["view"] == "original" and revealed["privacy"]["originalVerified"] is True
    original = revealed["capture"]
    assert original["memoryState"]["workingSetEntries"][0]["renderedContent"].startswith(
        f"Jane writes from {EMAIL}"
    )
    assert original["input"]["requestPayload"] == {"message": "refund to card 4111 1111 1111 1111?"}
    assert original["executionTrace"]["toolCalls"][0]["output"] == {"iban": "GB82 WEST 1234 5698 7654 32"}
    # the rendered context's spans frame the original text again
    text = original["renderedContext"]["text"].encode("utf-8")
    memory = next(s for s in original["renderedContext"]["spans"] if s["part"] == "memory:mem_01")
    assert EMAIL.encode() in text[memory["start"] : memory["end"]]

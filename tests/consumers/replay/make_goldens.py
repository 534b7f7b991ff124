"""Regenerate the golden captures beside the replay tests (not run by the tests).

    python tests/consumers/replay/make_goldens.py

Each golden is recorded by running the scripted agent against the incident's world, then sealed
with the evidence module and the committed test key (tests/producers/evidence/golden/test-key.seed):

- replay-identical.json  prompt v4.7, 10 KB working set: the wrong refund; replays identically.
- replay-tampered.json   the same decision with its final output edited after sealing (a cover-up:
                         "$120.00" instead of the real wrong amount); verification names the part.
- replay-diverging.json  the recording stops after two tool calls: the model now asks for
                         ``issue_refund``, which the recording lacks.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
KEY_SEED = ROOT / "tests" / "producers" / "evidence" / "golden" / "test-key.seed"
GOLDEN = HERE / "golden"
SIGNER_NAME = "did:blackbox:test"

sys.path[:0] = [str(ROOT), str(HERE)]

from replay_scripted import record_decision  # noqa: E402

from producers.evidence import Signer, seal  # noqa: E402


def golden_signer() -> Signer:
    return Signer.from_seed(base64.b64decode(KEY_SEED.read_text().strip()), name=SIGNER_NAME)


def goldens() -> dict[str, dict]:
    signer = golden_signer()
    identical = seal(record_decision(decision_id="dec_golden_identical"), signer)
    tampered = seal(record_decision(decision_id="dec_golden_tampered"), signer)
    tampered["executionTrace"]["finalOutputText"] = "I have refunded $120.00 (refund rf_000917)."
    diverging = seal(
        record_decision(
            decision_id="dec_golden_diverging",
            keep_calls=2,
            final_override="I have escalated your refund request to a specialist.",
        ),
        signer,
    )
    return {
        "replay-identical.json": identical,
        "replay-tampered.json": tampered,
        "replay-diverging.json": diverging,
    }


def main() -> None:
    GOLDEN.mkdir(exist_ok=True)
    for name, capture in goldens().items():
        (GOLDEN / name).write_text(json.dumps(capture, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {GOLDEN / name}")


if __name__ == "__main__":
    main()

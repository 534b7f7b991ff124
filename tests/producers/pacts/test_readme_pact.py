"""The README's pact snippets run: its ``consequential_when`` example, signed by an operator key, served
at a URL, makes the Recorder its snippet builds capture a big refund in full, naming the rule."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from pact_runtime_testdata import Served, emitted, new_signer, refund, serve, signed

from producers.evidence import generate_keypair, load_signer
from producers.pacts.book import parse_pacts
from producers.recorder import CaptureFailure
from producers.transports.spool.sender import SpoolTransport

README = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")
URL = "https://pacts.internal/agt_billing_1.json"
KEY = "keys/pact-operator.pub"


def _block(language: str, marker: str) -> str:
    (block,) = [b for b in re.findall(rf"```{language}\n(.*?)```", README, flags=re.DOTALL) if marker in b]
    return block


def test_the_readme_pact_snippets_capture_a_matching_decision_in_full(tmp_path: Path) -> None:
    document = _block("toml", "[consequential_when.")
    assert [r.name for r in parse_pacts(document).consequential_when] == ["refund_over_500"]
    snippet = _block("python", "pact_trust=")
    assert URL in snippet and KEY in snippet
    private, public = generate_keypair(tmp_path / "keys", stem="pact-operator")
    version, raw = signed(document, load_signer(path=private))
    failures: list[CaptureFailure] = []
    with serve(Served(raw)) as url:
        namespace = {
            "transport": SpoolTransport(tmp_path / "spool", linger_ms=1),
            "signer": new_signer("did:test:agent:billing"),
        }
        code = textwrap.dedent(snippet).replace(URL, url).replace(KEY, str(public))
        exec(compile(code, "README.md", "exec"), namespace)
        rec = namespace["rec"]
        try:
            rec._on_error = failures.append
            assert rec.pact.wait_loaded(10) and rec.pact.current.version == version
            big, small = refund(rec, 750.0), refund(rec, 40.0)
            assert rec.flush(10)
        finally:
            rec.close(5)
    captures = emitted(tmp_path)
    assert captures[big]["captureLevel"] == "full" and captures[big]["pactVersion"] == version
    assert "refund_over_500" in captures[big]["consequential"]["reason"]
    assert captures[small]["consequential"]["flagged"] is False
    assert failures == []

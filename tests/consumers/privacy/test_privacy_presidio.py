"""``BLACKBOX_REDACT=presidio`` end to end with the real ``presidio_analyzer.AnalyzerEngine``.

No spaCy language model can be had from the package index, so the analyzer runs on a *blank* spaCy
pipeline saved to a directory (``spacy.blank("en").to_disk(...)``): Presidio's pattern recognizers
(e-mail, card, IBAN, IP, URL, crypto wallet ...) need no NER, only its name and place recognizers
do. The test records through ``Recorder.from_settings`` with the setting, consumes, and reads back:
what only Presidio finds (a bitcoin address, a URL) is redacted in every content part, nothing
stored holds it, the capture verifies, and a granted reader gets the original back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import spacy
import tldextract
import tldextract.tldextract
from test_privacy_cli import _cli, _consume, _grant_personal_data, _show, _stored_bytes

from consumers.index import ChdbIndex
from producers.evidence import Signer
from producers.policy import CapturePolicy
from producers.privacy import detectors
from producers.privacy.detectors import PresidioDetector, presidio_analyzer
from producers.recorder import Recorder
from producers.settings import load_settings
from schemas.errors import BlackboxError

WALLET = "16Yeky6GMjeNkAiNcBY7ZhrLoMSgg1BoyZ"  # a valid bitcoin address: only Presidio knows the kind
URL = "https://jane-doe.example.org/profile"
EMAIL = "jane.doe@example.com"


@pytest.fixture(scope="module")
def blank_pipeline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("spacy") / "blank_en"
    spacy.blank("en").to_disk(path)
    return path


@pytest.fixture
def presidio(blank_pipeline: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The blank pipeline as the default model, and tldextract (Presidio's e-mail check) offline: it
    would fetch the public suffix list from the network on first use, then fall back to its snapshot."""
    monkeypatch.setattr(detectors, "SPACY_MODEL", str(blank_pipeline))
    monkeypatch.setattr(tldextract.tldextract, "TLD_EXTRACTOR", tldextract.TLDExtract(suffix_list_urls=()))
    return blank_pipeline


def _found(detector: PresidioDetector, text: str) -> set[tuple[str, str]]:
    return {(text[f.start : f.end], f.kind) for f in detector.find(text)}


def test_the_real_analyzer_finds_patterns_on_a_blank_pipeline(presidio: Path) -> None:
    detector = PresidioDetector()  # the default model: here the blank pipeline
    text = f"pay {WALLET}, card 4111 1111 1111 1111, from 192.168.10.7, mail {EMAIL}"
    found = _found(detector, text)
    assert {(WALLET, "CRYPTO"), ("4111 1111 1111 1111", "CARD"), ("192.168.10.7", "IP")} <= found
    assert (EMAIL, "EMAIL") in found
    assert _found(detector, "nothing personal here") == set()


def test_a_missing_spacy_pipeline_is_named_not_downloaded(tmp_path: Path) -> None:
    with pytest.raises(
        BlackboxError, match=r"spaCy pipeline 'no_such_model_xx'.*spacy download no_such_model"
    ):
        presidio_analyzer(model="no_such_model_xx", language="en")
    with pytest.raises(BlackboxError, match="spaCy pipeline"):
        PresidioDetector(model=str(tmp_path / "absent"))


def _record(data: Path, signer: Signer) -> str:
    rec = Recorder.from_settings(
        load_settings(data_dir=data, transport="spool", blob="local", redact="presidio"),
        agent_id="agt_presidio",
        signer=signer,
        policy=CapturePolicy(sample_one_in=0),
    )
    secret = f"wallet {WALLET} at {URL}"
    with rec.decision(request={"message": f"refund to {secret}"}, consequential=True) as d:
        d.configure(model="acme", system_prompt=f"Never repeat {WALLET}.", sampling={})
        d.add_memory(entry_id="mem_1", tier="hot", content=f"customer {secret}")
        d.render_context(user_message=f"Please pay {secret}.")
        d.add_tool_call(name="pay", input={"to": WALLET}, output={"paid": secret})
        d.observe_external(key="payee", value={"wallet": WALLET, "site": URL})
        d.finish(output=f"Paid {secret}.", outcome="success")
    assert rec.close(10)
    return d.decision_id


@pytest.mark.timeout(240)
def test_redact_presidio_end_to_end(
    presidio: Path, data: Path, signer: Signer, env: dict[str, str], index: ChdbIndex
) -> None:
    decision = _record(data, signer)
    _consume(env)

    view = _show(env, decision)
    assert view["verification"]["verdict"] == "verified"
    capture: dict[str, Any] = view["capture"]
    text = json.dumps(capture, ensure_ascii=False)
    assert WALLET not in text and URL not in text
    assert capture["replayPolicy"]["piiRedacted"] is True
    assert capture["privacy"]["detectors"] == "builtin+presidio"
    kinds = {r["kind"] for r in capture["privacy"]["redactions"]}
    assert {"CRYPTO", "URL"} <= kinds
    parts = {r["part"].split("[")[0].split(".")[0] for r in capture["privacy"]["redactions"]}
    for part in ("input", "agentConfiguration", "memoryState", "renderedContext", "executionTrace"):
        assert part in parts, (part, sorted(parts))
    assert "externalState" in parts, sorted(parts)
    assert "[CRYPTO_1]" in capture["executionTrace"]["finalOutputText"]

    stored = _stored_bytes(data)
    assert WALLET.encode() not in stored and URL.encode() not in stored
    for table in ("decisions", "memory_entries", "tool_calls"):
        assert WALLET not in json.dumps(index.query(f"SELECT * FROM {table}"), default=str), table

    _grant_personal_data(data)
    revealed = _show(env, decision, "--reveal", "--reason", "complaint 9")
    assert revealed["privacy"]["view"] == "original" and revealed["privacy"]["originalVerified"] is True
    assert revealed["capture"]["executionTrace"]["finalOutputText"] == f"Paid wallet {WALLET} at {URL}."
    verified = _cli(env, "verify", decision)
    assert verified.exit_code == 0, verified.output

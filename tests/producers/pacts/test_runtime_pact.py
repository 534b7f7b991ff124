"""The pact decides what is consequential: the Recorder reads its agent's signed pact version from a
file or a URL, off the agent's thread, and captures a decision a ``consequential_when`` rule matches in
full, naming the rule; a version it cannot use is refused through ``on_error`` and the agent runs on.

Every capture goes through the real spool transport, is decoded with the real codec and verified with
the real evidence module; the URL is a real HTTP server on loopback.
"""

from __future__ import annotations

import base64
import builtins
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from pact_runtime_testdata import (
    AGENT,
    BIG_REFUND,
    NEVER,
    Served,
    emitted,
    make_recorder,
    new_signer,
    refund,
    serve,
    signed,
    signed_unchecked,
    trust_for,
)

from producers.evidence import generate_keypair, verify_capture
from producers.pacts import expression
from producers.recorder import CaptureFailure
from producers.settings import load_settings
from schemas.errors import BlackboxError, PactRefused, PactRuleFailed


@pytest.fixture
def failures() -> list[CaptureFailure]:
    return []


def _loaded(rec: Any, version: str | None, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        current = rec.pact.current
        if (current.version if current else None) == version:
            return
        time.sleep(0.02)
    raise AssertionError(f"the recorder did not load {version}; it has {rec.pact.current}")


# --- a matching rule ---------------------------------------------------------------------------------


def test_a_matching_rule_captures_a_routine_decision_in_full_naming_the_rule(
    tmp_path: Path, failures: list[CaptureFailure]
) -> None:
    operator = new_signer("did:test:operator")
    version, raw = signed(BIG_REFUND, operator)
    (tmp_path / "pact.json").write_bytes(raw)
    runtime = new_signer("did:test:agent:billing")
    rec = make_recorder(
        tmp_path, failures, signer=runtime, pact=tmp_path / "pact.json", pact_trust=trust_for(operator)
    )
    try:
        assert rec.pact is not None and rec.pact.wait_loaded(10)
        big, small = refund(rec, 750.0), refund(rec, 20.0)
        assert rec.flush(10)
    finally:
        rec.close(5)
    captures = emitted(tmp_path)
    full, routine = captures[big], captures[small]

    assert full["captureLevel"] == "full"
    assert full["consequential"]["flagged"] is True
    assert "refund_over_500" in full["consequential"]["reason"]
    assert full["pactVersion"] == version
    assert full["executionTrace"]["toolCalls"][1]["input"]["amount"] == 750.0  # the content is kept
    # the decision the rule does not match stays as the capture policy says, judged by the same version
    assert routine["captureLevel"] == "structured-only"
    assert routine["consequential"] == {"flagged": False, "reason": None}
    assert routine["pactVersion"] == version
    assert failures == []

    # pactVersion is signed: both verify, and a capture that names another version does not
    capture_trust = trust_for(runtime)
    verify_capture(full, capture_trust)
    verify_capture(routine, capture_trust)
    forged = json.loads(json.dumps(full))
    forged["pactVersion"] = "pv_" + "0" * 24
    with pytest.raises(BlackboxError):
        verify_capture(forged, capture_trust)


def test_a_public_key_file_is_the_pact_trust_and_a_level_the_runtime_gave_is_kept(
    tmp_path: Path, failures: list[CaptureFailure]
) -> None:
    private, public = generate_keypair(tmp_path / "keys", stem="pact-operator")
    from producers.evidence import load_signer

    version, raw = signed(BIG_REFUND, load_signer(path=private))
    (tmp_path / "pact.json").write_bytes(raw)
    rec = make_recorder(tmp_path, failures, pact=str(tmp_path / "pact.json"), pact_trust=public)
    try:
        assert rec.pact is not None and rec.pact.wait_loaded(10)
        assert rec.pact.current is not None and rec.pact.current.version == version
        flagged_id = "dec_runtime_flagged"
        with rec.decision(
            consequential=True, consequential_reason="runtime says so", decision_id=flagged_id
        ) as d:
            d.configure(model="gpt-test")
            d.add_tool_call(name="issue_refund", input={"amount": 900.0}, output={"ok": True})
            d.finish(output="done")
        assert rec.flush(10)
    finally:
        rec.close(5)
    capture = emitted(tmp_path)[flagged_id]
    assert capture["consequential"]["reason"] == "runtime says so"  # the runtime's own reason wins
    assert capture["pactVersion"] == version
    assert failures == []


def test_a_version_that_does_not_bind_the_agent_judges_nothing(
    tmp_path: Path, failures: list[CaptureFailure]
) -> None:
    operator = new_signer("did:test:operator")
    _, raw = signed(BIG_REFUND, operator)
    (tmp_path / "pact.json").write_bytes(raw)
    rec = make_recorder(
        tmp_path,
        failures,
        agent_id="agt_support_1",
        pact=tmp_path / "pact.json",
        pact_trust=trust_for(operator),
    )
    try:
        assert rec.pact is not None and rec.pact.wait_loaded(10)
        did = refund(rec, 750.0)
        assert rec.flush(10)
    finally:
        rec.close(5)
    capture = emitted(tmp_path)[did]
    assert capture["captureLevel"] == "structured-only" and "pactVersion" not in capture


# --- refused versions: on_error says why, the agent runs on -------------------------------------------


def _tampered(raw: bytes) -> bytes:
    envelope = json.loads(raw)
    payload = json.loads(base64.b64decode(envelope["payload"]))
    payload["document"] = payload["document"].replace("> 500", "> 5000")
    envelope["payload"] = base64.b64encode(json.dumps(payload).encode("utf-8")).decode("ascii")
    return json.dumps(envelope).encode("utf-8")


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("wrong key", "no trusted signature"),
        ("bad signature", "the signature does not verify"),
        ("rule does not compile", "consequential_when 'broken' does not compile"),
        ("not a document", "not a signed envelope"),
    ],
)
def test_a_version_that_cannot_be_used_is_refused_through_on_error(
    tmp_path: Path, failures: list[CaptureFailure], case: str, expected: str
) -> None:
    operator, stranger = new_signer("did:test:operator"), new_signer("did:test:stranger")
    raw = {
        "wrong key": lambda: signed(BIG_REFUND, stranger)[1],
        "bad signature": lambda: _tampered(signed(BIG_REFUND, operator)[1]),
        "rule does not compile": lambda: signed_unchecked(
            BIG_REFUND + "\n[consequential_when.broken]\nrule = 'decision.tool_calls.exists(t, '\n", operator
        ),
        "not a document": lambda: b"<html>not found</html>",
    }[case]()
    (tmp_path / "pact.json").write_bytes(raw)
    rec = make_recorder(tmp_path, failures, pact=tmp_path / "pact.json", pact_trust=trust_for(operator))
    try:
        assert rec.pact is not None and rec.pact.wait_loaded(10)
        did = refund(rec, 750.0)  # the agent's call does not raise
        assert rec.flush(10)
    finally:
        rec.close(5)
    assert rec.pact.current is None
    [failure] = failures
    assert failure.stage == "pact" and failure.partial and failure.decision_id is None
    assert isinstance(failure.error, PactRefused)
    assert expected in str(failure), str(failure)
    assert str(failure).startswith("pact: ")
    capture = emitted(tmp_path)[did]  # captured as the capture policy says, judged by no version
    assert capture["captureLevel"] == "structured-only" and "pactVersion" not in capture
    assert rec.stats.failed == 0


def test_without_the_cel_engine_a_pact_is_refused_naming_the_extra(
    tmp_path: Path, failures: list[CaptureFailure], monkeypatch: pytest.MonkeyPatch
) -> None:
    operator = new_signer("did:test:operator")
    _, raw = signed(BIG_REFUND, operator)
    (tmp_path / "pact.json").write_bytes(raw)
    real_import = builtins.__import__

    def no_cel(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "cel":
            raise ImportError("No module named 'cel'")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "cel", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_cel)
    expression.program.cache_clear()
    try:
        rec = make_recorder(tmp_path, failures, pact=tmp_path / "pact.json", pact_trust=trust_for(operator))
        try:
            assert rec.pact is not None and rec.pact.wait_loaded(10)
            did = refund(rec, 750.0)
            assert rec.flush(10)
        finally:
            rec.close(5)
    finally:
        expression.program.cache_clear()
    [failure] = failures
    assert isinstance(failure.error, PactRefused)
    assert "agent-blackbox[pacts]" in str(failure)
    assert emitted(tmp_path)[did]["captureLevel"] == "structured-only"


def test_a_pact_without_pact_trust_is_refused_never_trusted_on_its_own_word(
    tmp_path: Path, failures: list[CaptureFailure]
) -> None:
    _, raw = signed(BIG_REFUND, new_signer("did:test:operator"))
    (tmp_path / "pact.json").write_bytes(raw)
    rec = make_recorder(tmp_path, failures, pact=tmp_path / "pact.json")
    try:
        did = refund(rec, 750.0)
        assert rec.flush(10)
    finally:
        rec.close(5)
    assert rec.pact is None
    [failure] = failures
    assert isinstance(failure.error, PactRefused) and "without pact_trust" in str(failure)
    assert emitted(tmp_path)[did]["captureLevel"] == "structured-only"


def test_a_rule_that_errors_on_one_decision_is_reported_and_the_decision_captured(
    tmp_path: Path, failures: list[CaptureFailure]
) -> None:
    operator = new_signer("did:test:operator")
    document = """
[consequential_when.first_call_amount]
rule = 'decision.tool_calls[0].input.amount > 100'
"""
    version, raw = signed(document, operator)
    (tmp_path / "pact.json").write_bytes(raw)
    rec = make_recorder(tmp_path, failures, pact=tmp_path / "pact.json", pact_trust=trust_for(operator))
    try:
        assert rec.pact is not None and rec.pact.wait_loaded(10)
        did = refund(rec, 750.0)  # its first call (lookup_order) has no amount
        assert rec.flush(10)
    finally:
        rec.close(5)
    [failure] = failures
    assert failure.stage == "pact" and failure.decision_id == did and failure.partial
    assert isinstance(failure.error, PactRuleFailed) and "first_call_amount" in str(failure)
    capture = emitted(tmp_path)[did]
    assert capture["captureLevel"] == "structured-only" and capture["pactVersion"] == version


# --- a URL: fetched in the background, refreshed -------------------------------------------------------


def test_a_url_is_fetched_and_a_newly_applied_version_is_picked_up(
    tmp_path: Path, failures: list[CaptureFailure]
) -> None:
    operator = new_signer("did:test:operator")
    first, first_raw = signed(NEVER, operator)
    second, second_raw = signed(BIG_REFUND, operator, parent=first, reason="keep big refunds")
    served = Served(first_raw)
    with serve(served) as url:
        rec = make_recorder(tmp_path, failures, pact=url, pact_trust=trust_for(operator), pact_refresh=0.1)
        try:
            _loaded(rec, first)
            before = refund(rec, 750.0)
            assert rec.flush(10)
            served.body = second_raw  # the operator applies a new version at the same URL
            _loaded(rec, second)
            after = refund(rec, 750.0)
            assert rec.flush(10)
        finally:
            rec.close(5)
    captures = emitted(tmp_path)
    assert captures[before]["captureLevel"] == "structured-only"
    assert captures[before]["pactVersion"] == first
    assert captures[after]["captureLevel"] == "full"
    assert "refund_over_500" in captures[after]["consequential"]["reason"]
    assert captures[after]["pactVersion"] == second
    assert served.requests >= 2 and rec.pact is not None and rec.pact.loads == 2
    assert failures == []


def test_the_agent_thread_never_waits_for_the_pact(tmp_path: Path, failures: list[CaptureFailure]) -> None:
    operator = new_signer("did:test:operator")
    version, raw = signed(BIG_REFUND, operator)
    served = Served(raw)
    served.delay.set()  # the server holds every answer until released
    with serve(served) as url:
        started = time.monotonic()
        rec = make_recorder(tmp_path, failures, pact=url, pact_trust=trust_for(operator))
        try:
            early = refund(rec, 750.0)
            spent = time.monotonic() - started
            assert rec.flush(10)
            assert rec.pact is not None and rec.pact.current is None  # still waiting for the server
            loader = rec.pact._thread
            assert loader is not None and loader is not threading.current_thread() and loader.is_alive()
            served.release.set()
            _loaded(rec, version)
            late = refund(rec, 750.0)
            assert rec.flush(10)
        finally:
            rec.close(5)
    # building the recorder and recording a decision took no fetch (the server was holding it)
    assert spent < 1.0, spent
    captures = emitted(tmp_path)
    assert captures[early]["captureLevel"] == "structured-only" and "pactVersion" not in captures[early]
    assert captures[late]["captureLevel"] == "full" and captures[late]["pactVersion"] == version
    assert failures == []


def test_an_unreachable_url_is_refused_once_and_the_agent_runs_on(
    tmp_path: Path, failures: list[CaptureFailure]
) -> None:
    operator = new_signer("did:test:operator")
    rec = make_recorder(
        tmp_path,
        failures,
        pact="http://127.0.0.1:9/pact.json",
        pact_trust=trust_for(operator),
        pact_refresh=0.05,
    )
    try:
        assert rec.pact is not None and rec.pact.wait_loaded(10)
        time.sleep(0.3)  # several refreshes, each failing the same way
        did = refund(rec, 750.0)
        assert rec.flush(10)
    finally:
        rec.close(5)
    [failure] = failures  # the same reason is said once, not at every refresh
    assert isinstance(failure.error, PactRefused) and "cannot be fetched" in str(failure)
    assert emitted(tmp_path)[did]["captureLevel"] == "structured-only"


# --- settings -------------------------------------------------------------------------------------------


def test_from_settings_reads_blackbox_pact_and_its_trust(
    tmp_path: Path, failures: list[CaptureFailure], monkeypatch: pytest.MonkeyPatch
) -> None:
    from producers.recorder import Recorder
    from producers.transports.spool.sender import SpoolTransport

    private, public = generate_keypair(tmp_path / "keys", stem="pact-operator")
    from producers.evidence import load_signer

    version, raw = signed(BIG_REFUND, load_signer(path=private))
    (tmp_path / "pact.json").write_bytes(raw)
    monkeypatch.setenv("BLACKBOX_PACT", str(tmp_path / "pact.json"))
    monkeypatch.setenv("BLACKBOX_PACT_TRUST", str(public))
    monkeypatch.setenv("BLACKBOX_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("BLACKBOX_REDACT", "off")
    rec = Recorder.from_settings(
        load_settings(),
        agent_id=AGENT,
        signer=new_signer("did:test:agent"),
        transport=SpoolTransport(tmp_path / "spool", linger_ms=1),
        on_error=failures.append,
    )
    try:
        assert rec.pact is not None and rec.pact.wait_loaded(10)
        did = refund(rec, 750.0)
        assert rec.flush(10)
    finally:
        rec.close(5)
    capture = emitted(tmp_path)[did]
    assert capture["captureLevel"] == "full" and capture["pactVersion"] == version
    assert failures == []


def test_the_runtime_side_never_imports_the_services_and_loads_cel_only_when_judging() -> None:
    import subprocess

    code = (
        "import sys\n"
        "import producers.recorder, producers.pacts.source, producers.pacts.signed, producers.pacts.judge\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'consumers', 'cel', 'typer', 'chdb'}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr

"""Signed pact versions and a recorder for the runtime pact tests (tests/producers/pacts)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from producers.evidence import Signer, TrustStore
from producers.evidence.events import sign_event
from producers.pacts.signed import PAYLOAD_TYPE, sign_version, version_id, version_record
from producers.policy import CapturePolicy
from producers.recorder import CaptureFailure, Recorder
from producers.transports.spool.files import read_spool
from producers.transports.spool.sender import SpoolTransport
from schemas.codec import decode

AGENT = "agt_billing_1"
CREATED = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)

# The rule reads a tool call's input: only the runtime sees it before the policy strips content.
BIG_REFUND = """
agents = ["agt_billing_*"]

[pact.refund_has_a_reason]
rule = 'decision.tool_calls.filter(t, t.name == "issue_refund").all(t, has(t.input.reason))'

[consequential_when.refund_over_500]
description = "Every refund above 500 is kept in full."
rule = 'decision.tool_calls.exists(t, t.name == "issue_refund" && t.input.amount > 500)'
"""

NEVER = """
agents = ["agt_billing_*"]

[consequential_when.never]
rule = 'false'
"""


def new_signer(name: str) -> Signer:
    return Signer(Ed25519PrivateKey.generate(), name=name)


def trust_for(*signers: Signer) -> TrustStore:
    trust = TrustStore()
    for signer in signers:
        trust.add(signer.public_raw, not_before=datetime(2000, 1, 1, tzinfo=UTC))
    return trust


def signed(document: str, signer: Signer, *, parent: str = "", reason: str = "test") -> tuple[str, bytes]:
    """A pact version signed by ``signer``: its id and the document's bytes."""
    version, raw = sign_version(
        document=document, parent=parent, author="ops", reason=reason, created_at=CREATED, signer=signer
    )
    return version.version, raw


def signed_unchecked(document: str, signer: Signer) -> bytes:
    """A version signed without the check :func:`sign_version` makes (a rule that does not compile)."""
    record = version_record(
        document=document, parent="", author="ops", reason="test", created_at=CREATED, agents=("*",)
    )
    record["version"] = version_id(record)
    return json.dumps(sign_event(record, signer, payload_type=PAYLOAD_TYPE)).encode("utf-8")


def make_recorder(tmp_path: Path, failures: list[CaptureFailure], **options: Any) -> Recorder:
    return Recorder(
        agent_id=options.pop("agent_id", AGENT),
        transport=SpoolTransport(tmp_path / "spool", linger_ms=1),
        signer=options.pop("signer", new_signer("did:test:agent:billing")),
        policy=CapturePolicy(sample_one_in=0),
        on_error=failures.append,
        redact=options.pop("redact", "off"),
        **options,
    )


def refund(rec: Recorder, amount: float) -> str:
    """A routine decision that issues a refund of ``amount``."""
    with rec.decision(request={"message": "refund my order"}) as d:
        d.configure(model="gpt-test", system_prompt="You are billing.")
        d.add_tool_call(name="lookup_order", input={"order": "o_1"}, output={"paid": 900})
        d.add_tool_call(
            name="issue_refund",
            input={"order": "o_1", "amount": amount, "reason": "late"},
            output={"ok": True},
        )
        d.finish(output=f"Refunded {amount}.", stop_reason="end_turn", outcome="success")
    return d.decision_id


def emitted(tmp_path: Path) -> dict[str, dict[str, Any]]:
    """Every capture sent, decoded, by decision id."""
    out: dict[str, dict[str, Any]] = {}
    for message in read_spool(tmp_path / "spool"):
        decoded = decode(message.value)
        if decoded.kind == "capture":
            out[decoded.value["decisionId"]] = decoded.value
    return out


class Served:
    """One document served over HTTP on loopback; ``body`` may be replaced, ``delay`` slows answers."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.delay = threading.Event()  # while set, answers wait for release
        self.release = threading.Event()
        self.requests = 0


@contextmanager
def serve(served: Served) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            served.requests += 1
            if served.delay.is_set():
                served.release.wait(10)
            body = served.body
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/pacts/applied-version.json"
    finally:
        served.release.set()
        server.shutdown()
        server.server_close()

"""Capture paths other than ``d.configure`` seal a tool schema once per content too.

Wire capture (``SealedSnapshots.shared`` in ``producers.integrations.assemble``): decisions whose
requests carry the same 20 tools share one pinned snapshot, a changed tool list is hashed again, and
every capture's ``toolSchemaJson`` and hash are exactly those of the tools the server received; each
verifies. The GenAI span mapping (``genai_spans.record``, used by the in-process exporter and the OTLP
receiver) goes through ``configure``: its captures are byte-identical to the reference path's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import openai
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from provider_server import ProviderServer, Reply

from producers import config as config_module
from producers import native
from producers.config import SealedSnapshots
from producers.evidence import Signer, TrustStore, verify_capture
from producers.evidence.canonical import json_hash
from producers.integrations import openai as openai_integration
from producers.integrations.genai_spans import Span, plan_decisions, record_plan
from producers.policy import CapturePolicy
from producers.recorder import CaptureFailure, Recorder
from producers.transports.spool.files import read_spool
from producers.transports.spool.sender import SpoolTransport
from schemas.codec import decode


def _tools(count: int, *, note: str = "") -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": f"tool_{i}",
                "description": f"tool {i} for a customer, with a long enough description {note}",
                "parameters": {
                    "type": "object",
                    "properties": {"customer_id": {"type": "string"}, "amount": {"type": "number"}},
                    "required": ["customer_id"],
                },
            },
        }
        for i in range(count)
    ]


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch) -> Iterator[SealedSnapshots]:
    fresh = SealedSnapshots()
    monkeypatch.setattr(config_module, "sealed_snapshots", fresh)
    # assemble imported the module's instance by name
    monkeypatch.setattr("producers.integrations.assemble.sealed_snapshots", fresh)
    yield fresh


def test_the_same_tools_in_every_request_are_sealed_once(
    provider_server: ProviderServer, tmp_path: Path, cache: SealedSnapshots
) -> None:
    signer = Signer(Ed25519PrivateKey.generate(), name="did:test:once")
    trust = TrustStore()
    trust.add(signer.public_raw, not_before=datetime(2000, 1, 1, tzinfo=UTC))
    failures: list[CaptureFailure] = []
    recorder = Recorder(
        agent_id="agt_once",
        transport=SpoolTransport(tmp_path / "spool", linger_ms=5),
        signer=signer,
        policy=CapturePolicy(sample_one_in=1),  # every routine decision in full
        on_error=failures.append,
    )
    tools = _tools(20)
    plan = [tools, tools, tools, _tools(20, note="v2"), tools]
    provider_server.script(*(Reply(text=f"answer {i}") for i in range(len(plan))))
    client = openai_integration.wrap(
        openai.OpenAI(api_key="sk-test", base_url=provider_server.openai_base_url), recorder
    )
    seen: list[int] = []
    try:
        for i, given in enumerate(plan):
            with recorder.decision(request={"turn": i}):
                client.chat.completions.create(
                    model="acme-chat",
                    messages=[{"role": "user", "content": f"turn {i}"}],
                    tools=given,  # type: ignore[arg-type]
                )
            assert recorder.flush(10)
            seen.append(len(cache._entries))
    finally:
        recorder.close(5)
    assert failures == []
    captures = [decode(record.value).value for record in read_spool(tmp_path / "spool")]
    received = provider_server.received
    assert len(captures) == len(received) == len(plan)
    for capture, sent in zip(captures, received, strict=True):
        sent_tools = json.loads(sent.body)["tools"]
        config = capture["agentConfiguration"]
        assert json.dumps(config["toolSchemaJson"]) == json.dumps(sent_tools)
        assert config["toolSchemaHash"] == json_hash(sent_tools)
        verify_capture(capture, trust)
    hashes = [c["agentConfiguration"]["toolSchemaHash"] for c in captures]
    assert hashes[0] == hashes[1] == hashes[2] == hashes[4] != hashes[3]
    # one content kept (under its two keys) until the changed list came, then a second one
    assert seen[0] == seen[1] == seen[2] and seen[3] > seen[2] and seen[4] == seen[3]


# --- the GenAI span mapping (the in-process exporter and the OTLP receiver) ------------------------------
_SIGNER = Signer(Ed25519PrivateKey.generate(), name="did:test:once")


def _span_plans(tool_lists: list[list[dict[str, Any]]]) -> list[Any]:
    """One chat span per decision, each in its own trace, its tool definitions as the attribute JSON
    a receiver parses afresh for every span."""
    plans = []
    for i, tools in enumerate(tool_lists):
        messages = json.dumps([{"role": "user", "parts": [{"type": "text", "content": f"turn {i}"}]}])
        span = Span(
            trace_id=f"{i + 1:032x}",
            span_id=f"{i + 1:016x}",
            parent_id=None,
            name="chat acme-chat",
            start_ns=1_700_000_000_000_000_000 + i * 10_000_000,
            end_ns=1_700_000_000_005_000_000 + i * 10_000_000,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "acme-chat",
                "gen_ai.input.messages": messages,
                "gen_ai.tool.definitions": json.dumps(tools),
            },
            local_root=True,
        )
        plans.extend(plan_decisions([span]))
    return plans


def _recorded(plans: list[Any]) -> list[bytes]:
    transport = _Kept()
    recorder = Recorder(
        agent_id="agt_once",
        transport=transport,
        signer=_SIGNER,
        runtime_id="rt_once",
        policy=CapturePolicy(sample_one_in=1),
    )
    for plan in plans:
        record_plan(plan, recorder)
    assert recorder.flush(10)
    recorder.close(5)
    assert recorder.stats.failed == 0
    return transport.sent


class _Kept:
    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def send(self, key: bytes, value: bytes, on_delivery: Any) -> None:
        self.sent.append(value)
        on_delivery(None)

    def poll(self, timeout: float = 0.0) -> int:
        return 0

    def flush(self, timeout: float | None = None) -> int:
        return 0

    def close(self, timeout: float | None = None) -> None:
        return None


def test_span_tool_definitions_are_sealed_once_and_as_the_reference_path(
    cache: SealedSnapshots, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool_lists = [_tools(20), _tools(20), _tools(20, note="v2"), _tools(20)]
    cached = _recorded(_span_plans(tool_lists))
    assert cache._entries  # the receiver's parsed definitions went through the cache
    monkeypatch.setattr(config_module, "sealed_snapshots", SealedSnapshots(min_bytes=1 << 40))
    monkeypatch.setenv("BLACKBOX_NATIVE", "off")
    native.reset()
    try:
        reference = _recorded(_span_plans(tool_lists))
    finally:
        monkeypatch.undo()
        native.reset()
    assert len(cached) == 4 and cached == reference
    configs = [decode(data).value["agentConfiguration"] for data in cached]
    assert [c["toolSchemaHash"] for c in configs] == [json_hash(tools) for tools in tool_lists]

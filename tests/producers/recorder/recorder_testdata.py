"""Shared builders for the recorder tests and the producer benchmark: realistic decisions of a size."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from producers.decision import DecisionBuilder
from producers.evidence import Signer, TrustStore
from producers.recorder import Recorder

_WORDS = [
    "account",
    "balance",
    "refund",
    "charge",
    "customer",
    "ticket",
    "policy",
    "agent",
    "tool",
    "schema",
    "memory",
    "context",
    "window",
    "ledger",
    "transfer",
    "pending",
    "approved",
    "declined",
    "review",
    "escalate",
    "note",
    "email",
    "phone",
    "address",
    "invoice",
    "order",
    "shipment",
    "delayed",
    "warehouse",
    "priority",
    "standard",
    "premium",
    "discount",
    "coupon",
    "subscription",
    "renewal",
    "the",
    "a",
    "of",
    "to",
    "and",
    "in",
    "for",
    "with",
    "on",
    "by",
    "from",
    "at",
    "as",
    "is",
    "was",
    "be",
    "this",
    "that",
    "it",
    "not",
    "or",
    "are",
]

SYSTEM_PROMPT = (
    "You are the support agent for Acme Bank.\r\nPolicy v4.7: refunds within 30 days.  \n"
    + " ".join(random.Random(7).choice(_WORDS) for _ in range(250))
)
TOOL_SCHEMA: dict[str, Any] = {
    "tools": [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": f"{name} for a customer",
                "parameters": {
                    "type": "object",
                    "properties": {"customer_id": {"type": "string"}, "amount": {"type": "number"}},
                    "required": ["customer_id"],
                },
            },
        }
        for name in ("get_balance", "issue_refund", "lookup_order", "send_email")
    ]
}


def make_tool_schema(tools: int, *, seed: int = 11) -> dict[str, Any]:
    """An OpenAI-style ``{"tools": [...]}`` of ``tools`` function tools, ~700 bytes of JSON each (a
    description, four typed parameters with their own descriptions, an enum), as agents carry them."""
    rng = random.Random(seed)
    base = ("get_balance", "issue_refund", "lookup_order", "send_email")
    names = [
        base[i] if i < len(base) else f"{rng.choice(_WORDS)}_{rng.choice(_WORDS)}_{i}" for i in range(tools)
    ]
    return {
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": name,
                    "description": f"{name} for a customer: " + text(rng, 160),
                    "parameters": {
                        "type": "object",
                        "properties": {
                            "customer_id": {"type": "string", "description": text(rng, 60)},
                            "amount": {"type": "number", "description": text(rng, 50), "minimum": 0},
                            "channel": {"type": "string", "enum": ["chat", "email", "phone"]},
                            "note": {"type": "string", "description": text(rng, 70)},
                        },
                        "required": ["customer_id"],
                        "additionalProperties": False,
                    },
                },
            }
            for name in names
        ]
    }


CONFIG: dict[str, Any] = {
    "model": "acme-chat",
    "model_version": "2026-06-01",
    "endpoint": "http://127.0.0.1:8000/v1",
    "system_prompt": SYSTEM_PROMPT,
    "system_prompt_version": "v4.7",
    "tool_schema": TOOL_SCHEMA,
    "tool_schema_version": "tools-2026-07",
    "sampling": {"temperature": 0.2, "top_p": 0.95, "max_tokens": 4096, "stop": ["</done>"], "seed": 7},
}


class NullTransport:
    """Delivers at once and keeps nothing (``keep``: a list to append each sent value to). Test
    transports that send otherwise subclass it for the rest of the protocol."""

    def __init__(self, keep: list[bytes] | None = None) -> None:
        self.keep = keep

    def send(self, key: bytes, value: bytes, on_delivery: Any) -> None:
        if self.keep is not None:
            self.keep.append(value)
        on_delivery(None)

    def poll(self, timeout: float = 0.0) -> int:
        return 0

    def flush(self, timeout: float | None = None) -> int:
        return 0

    def close(self, timeout: float | None = None) -> None:
        return None


class KeptTransport(NullTransport):
    """Delivers at once and keeps each sent value in ``sent``."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []
        super().__init__(self.sent)


def new_signer(name: str | None = "did:test:agent") -> Signer:
    return Signer(Ed25519PrivateKey.generate(), name=name)


def trust_for(*signers: Signer) -> TrustStore:
    trust = TrustStore()
    for signer in signers:
        trust.add(signer.public_raw, not_before=datetime(2000, 1, 1, tzinfo=UTC))
    return trust


class StepClock:
    """A deterministic clock: each call advances by ``step``."""

    def __init__(self, start: datetime | None = None, step: timedelta = timedelta(milliseconds=1)) -> None:
        self.now = start or datetime(2026, 7, 23, 13, 0, 0, 456000, tzinfo=UTC)
        self.step = step

    def __call__(self) -> datetime:
        self.now += self.step
        return self.now


def text(rng: random.Random, n_chars: int) -> str:
    words: list[str] = []
    size = 0
    while size < n_chars:
        word = rng.choice(_WORDS)
        words.append(word)
        size += len(word) + 1
    return " ".join(words)[:n_chars]


@dataclass(frozen=True, slots=True)
class DecisionContent:
    """Pre-built content for one decision (so benchmarks time the recorder, not the generator)."""

    request: dict[str, Any]
    user_message: str
    memory: tuple[tuple[str, str], ...]
    tool_outputs: tuple[dict[str, Any], ...]
    final_output: str
    reasoning: tuple[str, ...]


def make_content(size: int, *, seed: int = 0) -> DecisionContent:
    """Content whose sealed, encoded capture is roughly ``size`` bytes (content appears twice:
    the working-set entries and again inside the rendered context)."""
    rng = random.Random(seed)
    budget = max(0, size - 4_500)  # fixed part: system prompt (twice), tool schema, structure
    memory_chars = budget * 30 // 100  # x2 with the rendered context
    tool_chars = budget * 25 // 100
    user_message = "I was charged twice last week, can you refund one? " + text(rng, 80)
    return DecisionContent(
        request={"message": user_message, "channel": "chat", "locale": "en-US"},
        user_message=user_message,
        memory=tuple((f"mem_{i:02d}", text(rng, memory_chars // 4)) for i in range(4)),
        tool_outputs=(
            {
                "balance": 880.0,
                "currency": "USD",
                "history": [text(rng, 60) for _ in range(tool_chars // 2 // 62)],
            },
            {"refund_id": "rf_1", "status": "ok", "notes": text(rng, tool_chars // 2)},
        ),
        final_output="I've refunded $120.00 to your account (refund rf_1). " + text(rng, 200),
        reasoning=("The customer reports a double charge.", text(rng, 300)),
    )


def record_tiny(
    rec: Recorder, *, consequential: bool = False, decision_id: str | None = None
) -> DecisionBuilder:
    """A ~1 KB decision: a short request, one tool call, a short answer, no rendered context."""
    with rec.decision(request={"message": "ping"}, consequential=consequential, decision_id=decision_id) as d:
        d.configure(
            model="acme-mini", model_version="1", system_prompt="Be brief.", system_prompt_version="v1"
        )
        d.add_tool_call(name="status", input={}, output={"ok": True}, latency_ms=1)
        d.finish(output="pong", outcome="success")
    return d


def configure(rec: Recorder, *, tool_schema: Any = TOOL_SCHEMA) -> None:
    """Pin the configuration once on the recorder (``Recorder.configure``)."""
    rec.configure(**{**CONFIG, "tool_schema": tool_schema})


def record(
    rec: Recorder,
    content: DecisionContent,
    *,
    consequential: bool = False,
    decision_id: str | None = None,
    config: dict[str, Any] | None = None,
) -> DecisionBuilder:
    """One full decision through the public API, as a runtime would write it; ``config``: the
    keywords of a per-decision ``d.configure(...)`` (the README's path), else the recorder's own."""
    with rec.decision(
        request=content.request,
        origin_user_id="usr_42",
        origin_session_id="ses_9",
        consequential=consequential,
        consequential_reason="issues refunds" if consequential else None,
        decision_id=decision_id,
    ) as d:
        if config is not None:
            d.configure(**config)
        for position, (entry_id, entry) in enumerate(content.memory):
            d.add_memory(
                entry_id=entry_id,
                tier="hot" if position < 2 else "warm",
                content=entry,
                provenance={
                    "writerId": "wrt_crm_sync",
                    "writtenAt": "2026-07-20T09:12:00.000Z",
                    "sourceType": "crm",
                },
                score=0.84 - position / 10,
                method="semantic",
                embedding_model="text-embedding-3-small",
                embedding_version="2024-01",
            )
        d.render_context(user_message=content.user_message)
        d.add_tool_call(
            name="get_balance",
            input={"customer_id": "cus_42"},
            output=content.tool_outputs[0],
            latency_ms=142,
        )
        d.add_tool_call(
            name="issue_refund",
            input={"customer_id": "cus_42", "amount": 120.0},
            output=content.tool_outputs[1],
            latency_ms=230,
        )
        d.observe_external(
            key="customer.balance",
            value={"amount": 880.0, "currency": "USD"},
            source="https://ledger.internal/v2/balance",
        )
        d.finish(
            output=content.final_output,
            stop_reason="end_turn",
            reasoning=content.reasoning,
            reasoning_token_count=1240,
            outcome="success",
            total_context_tokens=12483,
        )
    return d

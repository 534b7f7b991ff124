"""The support agent's world: customers, their charges, and the three tools that read or change them.

This is the agent's *external system*: in the demo it is live (the agent really issues refunds); in
replay it is never touched, because the sandbox answers from the recorded outputs.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

TOOL_SCHEMA: dict[str, Any] = {
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "lookup_customer",
                "description": "Profile and recent charges of a customer.",
                "parameters": {
                    "type": "object",
                    "properties": {"customer_id": {"type": "string"}},
                    "required": ["customer_id"],
                },
            },
        },
        {
            "type": "function",
            "function": {
                "name": "get_balance",
                "description": "Current account balance of a customer.",
                "parameters": {
                    "type": "object",
                    "properties": {"customer_id": {"type": "string"}},
                    "required": ["customer_id"],
                },
            },
        },
        {
            "type": "function",
            "function": {
                "name": "issue_refund",
                "description": "Refund an amount to a customer. Irreversible.",
                "parameters": {
                    "type": "object",
                    "properties": {"customer_id": {"type": "string"}, "amount": {"type": "number"}},
                    "required": ["customer_id", "amount"],
                },
            },
        },
    ]
}
TOOL_SCHEMA_VERSION = "support-tools-2026-11"


@dataclass
class Customer:
    customer_id: str
    name: str
    balance: float
    disputed_charge: float
    history_notes: list[str] = field(default_factory=list)


class World:
    """A deterministic population of customers (seeded) and the live tool implementations."""

    def __init__(self, *, customers: int = 300, seed: int = 7) -> None:
        rng = random.Random(seed)
        self.customers: dict[str, Customer] = {}
        for i in range(customers):
            cid = f"cus_{i:04d}"
            charge = round(rng.uniform(10, 400), 2)
            # About a third of customers have a long history: their working set passes 8 KB.
            notes = rng.randint(14, 22) if rng.random() < 0.35 else rng.randint(2, 6)
            self.customers[cid] = Customer(
                customer_id=cid,
                name=f"Customer {i}",
                balance=round(charge + rng.uniform(200, 5000), 2),
                disputed_charge=charge,
                history_notes=[_note(rng, cid, n) for n in range(notes)],
            )
        self.refunds: list[tuple[str, float]] = []

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        customer = self.customers.get(str(arguments.get("customer_id")))
        if customer is None:
            return {"error": "unknown customer"}
        if name == "lookup_customer":
            return {
                "customer_id": customer.customer_id,
                "name": customer.name,
                "disputed_charge": customer.disputed_charge,
            }
        if name == "get_balance":
            return {"balance": customer.balance, "currency": "USD"}
        if name == "issue_refund":
            amount = float(arguments["amount"])
            self.refunds.append((customer.customer_id, amount))
            return {"refund_id": f"rf_{len(self.refunds):06d}", "amount": amount, "status": "ok"}
        return {"error": f"unknown tool {name}"}


def _note(rng: random.Random, cid: str, n: int) -> str:
    topics = ["billing", "shipping", "card replacement", "address change", "dispute", "loyalty"]
    body = " ".join(
        rng.choice(["called", "emailed", "asked", "confirmed", "escalated", "resolved"]) for _ in range(60)
    )
    return f"[{cid} note {n}] topic={rng.choice(topics)}; {body}. Agent summary: {body[:200]}"

"""The demo's support agent: a real tool-calling loop, recorded decision by decision.

It runs live against :class:`~consumers.demo.world.World` and the scripted model, over a simulated
two weeks: system prompt versions v4.5 → v4.6 → v4.7 and a model upgrade half-way, so the trend
catalog has something to find. Refund requests are consequential (full capture); balance questions
are routine (structured-only, one in ``sample_one_in`` captured in full). A refund auditor that
runs after the fact flags wrong refunds as failures through ``flag_consequential``.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from consumers.demo.model import ScriptedSupportModel
from consumers.demo.world import TOOL_SCHEMA, TOOL_SCHEMA_VERSION, World
from producers.recorder import Recorder

MODEL_ID = "acme-support"
MODEL_VERSIONS = ("2026-09-15", "2026-11-01")
PROMPT_VERSIONS = ("v4.5", "v4.6", "v4.7")
SAMPLING: dict[str, Any] = {"temperature": 0.0, "top_p": 1.0, "max_tokens": 512, "seed": 7}
ENDPOINT = "inproc://consumers.demo.model:ScriptedSupportModel"

_PROMPT_BODY = {
    "v4.5": "Verify the customer, check the balance, then refund the disputed charge.",
    "v4.6": "Verify the customer, check the balance, then refund exactly the disputed charge.",
    "v4.7": "Verify the customer and check the balance. For time-bounded requests, settle the account "
    "in one refund.",
}


def system_prompt(version: str) -> str:
    """The verbatim system prompt text of one version (what bisect and variations substitute)."""
    return (
        "You are the support agent of Acme Bank.\n"
        f"Policy version {version}.\n"
        f"{_PROMPT_BODY[version]}\n"
        "Never share another customer's data.\n"
    )


QUESTIONS = (
    ("I was charged twice last week, please refund the duplicate charge ({cid}).", True),
    ("Please refund the duplicate charge on my card, account {cid}.", True),
    ("Refund the charge from yesterday, it was a mistake ({cid}).", True),
    ("What is my current balance? Account {cid}.", False),
)


@dataclass(frozen=True, slots=True)
class SimulatedDay:
    day: int
    prompt_version: str
    canary_share: float  # share of traffic on the newer model version that day


def schedule(days: int) -> list[SimulatedDay]:
    """Prompt versions in three eras; the newer model version runs as a canary from the start and
    takes half the traffic from the middle on, so every prompt era sees both model versions."""
    out = []
    for day in range(days):
        era = min(2, day * 3 // days)
        out.append(SimulatedDay(day, PROMPT_VERSIONS[era], 0.2 if day < days // 2 else 0.5))
    return out


class SimClock:
    """The Recorder's clock, moved by the simulation instead of by the wall."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now


@dataclass(frozen=True, slots=True)
class DecisionRun:
    decision_id: str
    customer_id: str
    wrong_refund: bool
    consequential: bool


def run_agent(
    *,
    recorder: Recorder,
    clock: SimClock,
    world: World,
    decisions: int,
    days: int,
    start: datetime,
    seed: int = 11,
    progress: Callable[[int], None] | None = None,
    prompt_version: str | None = None,
    day_length: timedelta = timedelta(days=1),
) -> Iterator[DecisionRun]:
    """Run ``decisions`` decisions spread evenly over ``days`` simulated days, recording each.
    ``prompt_version`` runs every day on that prompt (a fix shipped); ``day_length`` compresses a
    simulated day (the demo's decisions after a pact change are the next minutes, not the next day)."""
    rng = random.Random(seed)
    model = ScriptedSupportModel(seed=seed)
    customers = sorted(world.customers)
    plan = schedule(days)
    if prompt_version is not None:
        plan = [SimulatedDay(d.day, prompt_version, d.canary_share) for d in plan]
    per_day = max(1, decisions // days)
    pending_flags: list[tuple[str, datetime]] = []
    for n in range(decisions):
        today = plan[min(days - 1, n // per_day)]
        clock.now = start + today.day * day_length + (n % per_day) * day_length / per_day
        customer = world.customers[rng.choice(customers)]
        template, is_refund = rng.choice(QUESTIONS)
        run = _one_decision(
            recorder=recorder,
            model=model,
            world=world,
            rng=rng,
            customer_id=customer.customer_id,
            question=template.format(cid=customer.customer_id),
            consequential=is_refund,
            day=today,
            clock=clock,
        )
        if run.wrong_refund:  # found by the auditor a few hours later
            pending_flags.append((run.decision_id, clock.now + timedelta(hours=3)))
        while pending_flags and pending_flags[0][1] <= clock.now:
            decision_id, when = pending_flags.pop(0)
            recorder.flag_consequential(
                decision_id, "refund exceeded the disputed charge", failure=True, flagged_at=when
            )
        if progress:
            progress(1)
        yield run
    for decision_id, when in pending_flags:
        recorder.flag_consequential(
            decision_id, "refund exceeded the disputed charge", failure=True, flagged_at=when
        )


def _one_decision(
    *,
    recorder: Recorder,
    model: ScriptedSupportModel,
    world: World,
    rng: random.Random,
    customer_id: str,
    question: str,
    consequential: bool,
    day: SimulatedDay,
    clock: SimClock,
) -> DecisionRun:
    customer = world.customers[customer_id]
    refunds_before = len(world.refunds)
    with recorder.decision(
        request={"channel": "chat", "customer_id": customer_id, "message": question},
        origin_user_id=f"usr_{customer_id[4:]}",
        origin_session_id=f"ses_{rng.randrange(1 << 30):08x}",
        consequential=consequential,
        consequential_reason="issues refunds" if consequential else None,
    ) as d:
        prompt = system_prompt(day.prompt_version)
        d.configure(
            model=MODEL_ID,
            model_version=MODEL_VERSIONS[1] if rng.random() < day.canary_share else MODEL_VERSIONS[0],
            endpoint=ENDPOINT,
            system_prompt=prompt,
            system_prompt_version=day.prompt_version,
            tool_schema=TOOL_SCHEMA,
            tool_schema_version=TOOL_SCHEMA_VERSION,
            sampling=SAMPLING,
        )
        notes = customer.history_notes
        for position, note in enumerate(notes):
            d.add_memory(
                entry_id=f"mem_{customer_id}_{position:02d}",
                tier="hot" if position < 2 else "warm",
                content=note,
                provenance={
                    "writerId": "wrt_crm_sync",
                    "writtenAt": "2026-10-01T00:00:00.000Z",
                    "sourceType": "crm_note",
                },
                score=round(0.95 - position * 0.02, 4),
                method="semantic",
                embedding_model="acme-embed",
                embedding_version="3",
            )
        context = d.render_context(user_message=question)
        messages: list[dict[str, Any]] = json.loads(context.text)
        total_latency = 0
        final_text: str | None = None
        for _ in range(8):
            request = {"model": MODEL_ID, "messages": messages, "tools": TOOL_SCHEMA["tools"], **SAMPLING}
            reply = model(request)["choices"][0]["message"]
            messages.append(reply)
            total_latency += rng.randint(250, 900)
            calls = reply.get("tool_calls") or []
            if not calls:
                final_text = reply.get("content")
                break
            for call in calls:
                name = call["function"]["name"]
                arguments = json.loads(call["function"]["arguments"])
                output = world.call(name, arguments)
                latency = rng.randint(40, 320)
                total_latency += latency
                if name == "get_balance":
                    d.observe_external(
                        key="customer.balance", value=output, source="https://ledger.acme/v2/balance"
                    )
                d.add_tool_call(
                    name=name,
                    input=arguments,
                    output=output,
                    latency_ms=latency,
                    error_ref=output.get("error"),
                )
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": json.dumps(output)})
        decision_id = d.finish(
            output=final_text,
            stop_reason="end_turn" if final_text is not None else "max_tokens",
            reasoning=[f"customer {customer_id}: {len(notes)} history notes in context"],
            reasoning_token_count=rng.randint(40, 400),
            total_latency_ms=total_latency,
            total_context_tokens=len(context.text) // 4,
        )
    refunds = world.refunds[refunds_before:]
    wrong = any(abs(amount - customer.disputed_charge) > 0.005 for _, amount in refunds)
    return DecisionRun(
        decision_id=decision_id, customer_id=customer_id, wrong_refund=wrong, consequential=consequential
    )


def simulation_start(days: int, *, today: datetime | None = None) -> datetime:
    """Midnight UTC ``days`` days before today, so the default trend windows include the demo."""
    today = today or datetime.now(UTC)
    return today.replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=days)

"""The decision builder sits below the recorder: it knows the recorder only as a ``DecisionSink``."""

from __future__ import annotations

import ast
from datetime import UTC, datetime
from pathlib import Path

import pytest

from producers.config import AgentConfig, ReplayPolicy
from producers.decision import DecisionBuilder, DecisionSink

ROOT = Path(__file__).resolve().parents[3]


def imported(relative: str) -> set[str]:
    """Every module a file imports, at any depth (``TYPE_CHECKING`` blocks and functions included)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse((ROOT / relative).read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize(
    ("relative", "above"),
    [
        ("producers/decision.py", {"producers.recorder", "producers.pipeline"}),
        ("producers/clock.py", {"producers.decision", "producers.recorder"}),
        ("producers/evidence/events.py", {"producers.decision", "producers.recorder", "producers.pipeline"}),
    ],
)
def test_no_import_runs_back_up(relative: str, above: set[str]) -> None:
    assert not imported(relative) & above


class Sink:
    """The least a builder may need: exactly the ``DecisionSink`` members, nothing of a Recorder."""

    agent_id = "agt_sink"
    runtime_id = "rt_1"
    default_config = AgentConfig(model="m-1", system_prompt="be brief")
    replay_policy = ReplayPolicy()

    def __init__(self) -> None:
        self.submitted: list[DecisionBuilder] = []

    def _now(self, problems: list[str]) -> datetime:
        return datetime(2026, 7, 23, 13, 0, 0, 456000, tzinfo=UTC)

    def _submit_decision(self, builder: DecisionBuilder) -> None:
        self.submitted.append(builder)


def test_a_builder_needs_only_its_sink() -> None:
    sink = Sink()
    sink_for_typing: DecisionSink = sink
    builder = DecisionBuilder(
        sink_for_typing,
        decision_id="dec_1",
        request={"q": "balance?"},
        origin_user_id=None,
        origin_session_id=None,
        consequential=False,
        consequential_reason=None,
        config=None,
        replay_policy=sink.replay_policy,
        snapshot=True,
    )
    builder.render_context(user_message="balance?")
    assert builder.finish(output="42", outcome="success") == "dec_1"
    assert sink.submitted == [builder]
    capture = builder.to_capture()
    assert (capture["agentId"], capture["runtimeId"], capture["capturedAt"]) == (
        "agt_sink",
        "rt_1",
        "2026-07-23T13:00:00.456Z",
    )
    assert capture["agentConfiguration"]["modelIdentifier"] == "m-1"
    assert builder.problems == ()

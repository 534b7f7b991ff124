"""What a decision's model was configured with, and the capture's replay policy.

:class:`AgentConfig` is set once on the recorder (:meth:`~producers.recorder.Recorder.configure`)
or per decision; :func:`agent_config` builds one from the runtime's keywords without ever raising
(what cannot be recorded as given is replaced as :mod:`producers.unrecordable` describes).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from producers import unrecordable as check

__all__ = ["AgentConfig", "ReplayPolicy", "agent_config", "pin_config"]


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentConfig:
    """What the model was configured with; set once on the recorder or per decision."""

    model: str
    model_version: str | None = None
    endpoint: str | None = None
    system_prompt: str | None = None
    system_prompt_version: str | None = None
    tool_schema: Any = None
    tool_schema_version: str | None = None
    sampling: Mapping[str, Any] = field(default_factory=dict)
    # what could not be recorded as given (producers.unrecordable); named in every capture using it
    unrecordable: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "systemPromptVersion": self.system_prompt_version,
            "systemPromptHash": None,
            "systemPromptText": self.system_prompt,
            "toolSchemaVersion": self.tool_schema_version,
            "toolSchemaHash": None,
            "toolSchemaJson": self.tool_schema,
            "modelIdentifier": self.model,
            "modelVersion": self.model_version,
            "modelProviderEndpoint": self.endpoint,
            "samplingParameters": dict(self.sampling),
        }


def pin_config(config: AgentConfig, *, owned: bool) -> None:
    """Hash the configuration's parts once, so sealing every decision that uses it skips them.

    The system prompt (a ``str``, immutable) is always pinned; the tool schema (and its JSON text
    for the codec) only when ``owned`` — the recorder's own snapshot, which nothing mutates.
    Content that cannot be hashed is left for the worker to refuse with its path.
    """
    from producers.evidence.parts import pin_part
    from schemas.codec import pin_json_text

    with contextlib.suppress(Exception):
        if type(config.system_prompt) is str:
            pin_part(config.system_prompt, "text")
        if owned and config.tool_schema is not None:
            pin_part(config.tool_schema, "json")
            pin_json_text(config.tool_schema)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayPolicy:
    """The capture's ``replayPolicy``: who may replay it and the runtime's retention request."""

    retention_days: int | None = 365
    pii_redacted: bool = False
    access_scope: Literal["operator", "regulator", "counterparty"] = "operator"

    def to_json(self) -> dict[str, Any]:
        return {
            "retentionDays": self.retention_days,
            "piiRedacted": self.pii_redacted,
            "replayAccessScope": self.access_scope,
        }


_CONFIG_KEYWORDS = frozenset(
    (
        "model",
        "model_version",
        "endpoint",
        "system_prompt",
        "system_prompt_version",
        "tool_schema",
        "tool_schema_version",
        "sampling",
    )
)


def agent_config(config: Mapping[str, Any], *, snapshot: bool, problems: list[str]) -> AgentConfig:
    """An :class:`AgentConfig` from the runtime's keywords (those of :meth:`DecisionBuilder.configure`).

    Never raises: what cannot be recorded as given is replaced and named in ``problems``.
    """
    at = "agentConfiguration"
    for key in config:
        if key not in _CONFIG_KEYWORDS:
            problems.append(f"unknown configuration keyword {key!r} ignored")
    sampling: Any = config.get("sampling")
    if sampling is None:
        sampling = {}
    elif not isinstance(sampling, Mapping):
        problems.append(f"a mapping expected, got {type(sampling).__name__}, at {at}.samplingParameters")
        sampling = {}
    if snapshot:
        tool_schema = check.snapshot(
            config.get("tool_schema"), path=f"{at}.toolSchemaJson", problems=problems
        )
        sampling = check.snapshot(sampling, path=f"{at}.samplingParameters", problems=problems)
    else:
        tool_schema = config.get("tool_schema")
        try:
            sampling = dict(sampling)
        except Exception as exc:
            problems.append(f"unreadable ({type(exc).__name__}: {exc}) at {at}.samplingParameters")
            sampling = {}
    return AgentConfig(
        model=check.required_text(config.get("model"), at=at, field="modelIdentifier", problems=problems),
        model_version=check.text(config.get("model_version"), at=at, field="modelVersion", problems=problems),
        endpoint=check.text(config.get("endpoint"), at=at, field="modelProviderEndpoint", problems=problems),
        system_prompt=check.text(
            config.get("system_prompt"), at=at, field="systemPromptText", problems=problems, part=True
        ),
        system_prompt_version=check.text(
            config.get("system_prompt_version"), at=at, field="systemPromptVersion", problems=problems
        ),
        tool_schema=tool_schema,
        tool_schema_version=check.text(
            config.get("tool_schema_version"), at=at, field="toolSchemaVersion", problems=problems
        ),
        sampling=sampling if isinstance(sampling, dict) else {},
    )

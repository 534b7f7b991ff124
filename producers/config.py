"""What a decision's model was configured with, and the capture's replay policy.

:class:`AgentConfig` is set once on the recorder (:meth:`~producers.recorder.Recorder.configure`)
or per decision; :func:`agent_config` builds one from the runtime's keywords without ever raising
(what cannot be recorded as given is replaced as :mod:`producers.unrecordable` describes).

A tool schema given per decision (the README's ``d.configure(..., tool_schema=TOOLS)``) is the same
content decision after decision: :class:`SealedSnapshots` hands back the snapshot made the first
time, its hash and JSON text already pinned, so the agent's thread copies nothing and the worker
neither canonicalises, hashes nor prints it again (DESIGN decision 27).
"""

from __future__ import annotations

import contextlib
import marshal
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from producers import unrecordable as check
from producers.evidence.parts import pinned_hash

__all__ = ["AgentConfig", "ReplayPolicy", "SealedSnapshots", "agent_config", "pin_config"]


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


class SealedSnapshots:
    """Snapshots of JSON configuration values (tool schemas), one per distinct content, pinned.

    The key is the value's :mod:`marshal` bytes: one C walk over the whole value, every call, so a
    value mutated in place (however deep) has another key and can never be given a stale snapshot
    or hash. ``marshal`` writes only exact built-in types (a subclass, an object, anything it cannot
    write raises: no caching, the ordinary snapshot) and writes them faithfully — ``bool``, ``int``
    and ``float`` apart, every float's bits, every string's code points, dict insertion order, a
    ``tuple`` apart from a ``list`` — so two values with the same key have the same snapshot, the
    same RFC 8785 bytes and the same JSON text. (The bytes also depend on interning, shared
    references and reference counts; that only makes equal values miss, never a wrong hit.) Only a snapshot that named
    no problem and whose hash and JSON text could be computed is kept; the others go through
    :func:`~producers.unrecordable.snapshot` every time, so the worker names them as before.

    The kept snapshot is the recorder's own (never mutated: sealing and redaction replace values,
    never change them), shared by every decision whose value has its key. Bounded: the oldest
    entry goes first. Thread-safe: a racing thread at worst makes its own snapshot.
    """

    def __init__(self, *, max_entries: int = 16, min_bytes: int = 512, max_bytes: int = 1 << 20) -> None:
        self._entries: dict[bytes, Any] = {}
        self._max_entries = max_entries
        self._min_bytes = min_bytes
        self._max_bytes = max_bytes

    def snapshot(self, value: Any, *, path: str, problems: list[str]) -> Any:
        """What :func:`~producers.unrecordable.snapshot` returns for ``value``, shared and pinned
        when the same content was snapshotted before. Never raises."""
        key = self._key(value)
        kept = self._kept(key)
        if kept is not None:
            return kept
        found: list[str] = []
        copy = check.snapshot(value, path=path, problems=found)
        problems.extend(found)
        if key is not None and not found:
            self._keep(key, value, copy)
        return copy

    def shared(self, value: Any) -> Any:
        """The kept snapshot equal to ``value``, else ``value`` itself — for JSON the worker parsed
        itself (the ``tools`` of a captured request body), which needs no snapshot to stay as it
        is: a value that can be kept is snapshotted once, its hash and text pinned. Never raises."""
        key = self._key(value)
        kept = self._kept(key)
        if kept is not None or key is None:
            return value if kept is None else kept
        found: list[str] = []
        copy = check.snapshot(value, path="", problems=found)
        return copy if not found and self._keep(key, value, copy) else value

    def _key(self, value: Any) -> bytes | None:
        if type(value) is not dict and type(value) is not list:
            return None
        try:
            key = marshal.dumps(value)
        except Exception:  # not marshal's exact types, too deep: the ordinary snapshot names it
            return None
        return key if self._min_bytes <= len(key) <= self._max_bytes else None

    def _kept(self, key: bytes | None) -> Any:
        kept = None if key is None else self._entries.get(key)
        # a kept snapshot whose pins other configurations pushed out is pinned again
        if kept is not None and (pinned_hash(kept, "json") is not None or _pin_json(kept)):
            return kept
        return None

    def _keep(self, key: bytes, value: Any, copy: Any) -> bool:
        if not _pin_json(copy):
            return False
        keys = [key]
        # The snapshot shares the value's strings, and marshal flags what is referenced more than
        # once: the same object given again has this second key; an equal one built afresh (a
        # request body parsed again) has the first.
        with contextlib.suppress(Exception):
            keys.append(marshal.dumps(value))
        for each in keys:
            if len(self._entries) >= self._max_entries:
                with contextlib.suppress(KeyError, RuntimeError, StopIteration):  # a racing thread
                    del self._entries[next(iter(self._entries))]
            self._entries[each] = copy
        return True

    def clear(self) -> None:
        self._entries.clear()


def _pin_json(value: Any) -> bool:
    """Pin ``value``'s hash and JSON text (it is ours, never mutated); False if either fails (a NaN,
    a lone surrogate: the worker repairs and names it)."""
    from producers.evidence.parts import pin_part
    from schemas.codec import pin_json_text

    try:
        pin_part(value, "json")
        pin_json_text(value)
    except Exception:
        return False
    return True


# Per-decision tool schemas of every recorder in the process (pins are process-wide too).
sealed_snapshots = SealedSnapshots()


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
        tool_schema = sealed_snapshots.snapshot(
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

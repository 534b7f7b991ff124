"""The replay sandbox: tools answered from the recording, the world answered from captured values.

A replayed agent never touches a real system. Its n-th tool call is answered with the recorded
output of the call with ``sequence == n`` *if* the tool name and the input hash match too; any
other call is a divergence: it is recorded (step and call), raised as :class:`ReplayDivergence`,
and nothing live is contacted. External-state reads are answered from the captured values.

Live tools exist only behind a :class:`LiveAuthorization`, which the access gate issues after it
has logged the operator's reason (``consumers.access``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import httpx

from consumers.access.gate import LiveAuthorization
from consumers.replay.digest import json_hash
from schemas.errors import BlackboxError, ReplayDivergence

CallSource = Literal["recorded", "live", "unrecorded"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call the replayed agent made, and where its answer came from."""

    sequence: int
    tool_name: str
    input: Any
    input_hash: str
    source: CallSource

    def to_json(self) -> dict[str, Any]:
        return {
            "sequence": self.sequence,
            "toolName": self.tool_name,
            "input": self.input,
            "inputHash": self.input_hash,
            "source": self.source,
        }


class ToolBackend(Protocol):
    """A real tool implementation reached only in live mode."""

    def call(self, name: str, arguments: Any) -> Any: ...


class HttpToolBackend:
    """Live tools over HTTP: ``POST {endpoint}/{tool_name}`` with the arguments as the JSON body."""

    def __init__(self, endpoint: str, *, timeout: float = 30.0) -> None:
        self._endpoint = endpoint.rstrip("/")
        self._http = httpx.Client(timeout=timeout)

    def call(self, name: str, arguments: Any) -> Any:
        url = f"{self._endpoint}/{name}"
        try:
            response = self._http.post(url, json=arguments)
            response.raise_for_status()
            return response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise LiveToolError(f"live tool {url} failed: {exc}") from exc

    def close(self) -> None:
        self._http.close()


class LiveToolError(BlackboxError):
    """A live tool call (authorized live replay only) failed."""


class LiveTools:
    """Real tools, usable only with an authorization the access gate issued and logged."""

    def __init__(self, backend: ToolBackend, *, authorization: LiveAuthorization) -> None:
        if not isinstance(authorization, LiveAuthorization) or not authorization.reason.strip():
            raise ValueError("live tools need a LiveAuthorization with a reason")
        self.backend = backend
        self.authorization = authorization


class ExternalState:
    """Read-only view of the world as captured: ``get(key)`` answers the captured value.

    A key the capture does not hold is a divergence, never a live read. ``reads`` lists the keys
    the replay asked for, so a report can tell an irrelevant variable from an unread one.
    """

    def __init__(self, values: Mapping[str, Any], *, on_divergence: _DivergenceSink) -> None:
        self._values = dict(values)
        self._on_divergence = on_divergence
        self.reads: list[str] = []

    def get(self, key: str) -> Any:
        self.reads.append(key)
        if key not in self._values:
            raise self._on_divergence(f"external state {key!r} was not captured", {"externalKey": key})
        return self._values[key]

    def keys(self) -> list[str]:
        return list(self._values)


class _DivergenceSink(Protocol):
    def __call__(self, message: str, call: object) -> ReplayDivergence: ...


class Sandbox:
    """Tool and external-state answers for one replay run, with a record of every call made."""

    def __init__(
        self,
        *,
        recorded_calls: Sequence[Mapping[str, Any]],
        externals: Mapping[str, Any],
        live: LiveTools | None = None,
    ) -> None:
        self._recorded = {int(c["sequence"]): c for c in recorded_calls}
        self._live = live
        self.calls: list[ToolCall] = []
        self.divergence: ReplayDivergence | None = None
        self.external_state = ExternalState(externals, on_divergence=self.diverge)

    @property
    def live(self) -> bool:
        return self._live is not None

    def recorded_as_given(self, arguments: Any) -> bool:
        """Whether the next recorded call's input is exactly ``arguments`` (a string stays a string)."""
        recorded = self._recorded.get(len(self.calls) + 1)
        return self._live is None and recorded is not None and _input_hash(recorded) == json_hash(arguments)

    def call_tool(self, name: str, arguments: Any) -> Any:
        """Answer the next tool call; raise :class:`ReplayDivergence` if the recording lacks it."""
        sequence = len(self.calls) + 1
        input_hash = json_hash(arguments)
        if self._live is not None:
            self.calls.append(ToolCall(sequence, name, arguments, input_hash, "live"))
            return self._live.backend.call(name, arguments)
        recorded = self._recorded.get(sequence)
        if recorded is None or recorded.get("toolName") != name or _input_hash(recorded) != input_hash:
            self.calls.append(ToolCall(sequence, name, arguments, input_hash, "unrecorded"))
            raise self.diverge(_mismatch(sequence, name, recorded), self.calls[-1].to_json(), step=sequence)
        self.calls.append(ToolCall(sequence, name, arguments, input_hash, "recorded"))
        if recorded.get("output") is None and recorded.get("errorRef") is not None:
            return {"error": recorded["errorRef"]}
        return recorded.get("output")

    def diverge(self, message: str, call: object, *, step: int | None = None) -> ReplayDivergence:
        # An external read happens between tool calls: it belongs to the next action's step.
        error = ReplayDivergence(message, step=step or len(self.calls) + 1, call=call)
        if self.divergence is None:  # agents that swallow exceptions cannot hide the first one
            self.divergence = error
        return error


def externals_of(capture: Mapping[str, Any]) -> dict[str, Any]:
    """``key -> capturedValue`` of the capture's observable externals."""
    externals = (capture.get("externalState") or {}).get("observableExternals") or ()
    return {str(e["key"]): e.get("capturedValue") for e in externals}


def _input_hash(recorded: Mapping[str, Any]) -> str:
    return str(recorded.get("inputHash") or json_hash(recorded.get("input")))


def _mismatch(sequence: int, name: str, recorded: Mapping[str, Any] | None) -> str:
    if recorded is None:
        return f"unrecorded tool call #{sequence} {name}: the recording has no call #{sequence}"
    if recorded.get("toolName") != name:
        return f"unrecorded tool call #{sequence} {name}: the recording has {recorded.get('toolName')} here"
    return f"unrecorded tool call #{sequence} {name}: its input differs from the recorded input"

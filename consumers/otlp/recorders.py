"""One Recorder per agent the receiver hears from, all signing with the receiver's own key.

The agent of a decision is ``--agent-id`` when given, else the sending service's ``service.name``
resource attribute (the OpenTelemetry name for "what ran"), else ``unknown_service`` (the
SDKs' own default). A Recorder is opened on first use, from the service settings (transport, blob
store for claim checks, capture policy), and all are closed together.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from producers.recorder import CaptureFailure, Recorder

if TYPE_CHECKING:
    from collections.abc import Callable

    from producers.evidence import Signer
    from producers.integrations.genai_spans import DecisionPlan
    from producers.settings import BlackboxSettings

__all__ = ["UNKNOWN_SERVICE", "RecorderPool", "agent_of"]

UNKNOWN_SERVICE = "unknown_service"


def agent_of(plan: DecisionPlan, fixed: str | None = None) -> str:
    if fixed:
        return fixed
    name = plan.root.resource.get("service.name")
    return name if isinstance(name, str) and name else UNKNOWN_SERVICE


class RecorderPool:
    """Recorders by agent id; callable as a :data:`~producers.integrations.genai_spans.RecorderFor`."""

    def __init__(
        self,
        settings: BlackboxSettings,
        *,
        signer: Signer,
        agent_id: str | None = None,
        on_error: Callable[[CaptureFailure], None] | None = None,
    ) -> None:
        self._settings = settings
        self._signer = signer
        self._agent_id = agent_id
        self._on_error = on_error
        self._lock = threading.Lock()
        self._recorders: dict[str, Recorder] = {}
        self._seen: set[str] = set()  # every agent heard from, still listed after close

    def __call__(self, plan: DecisionPlan) -> Recorder:
        agent = agent_of(plan, self._agent_id)
        with self._lock:
            recorder = self._recorders.get(agent)
            if recorder is None:
                recorder = Recorder.from_settings(
                    self._settings, agent_id=agent, signer=self._signer, on_error=self._on_error
                )
                self._recorders[agent] = recorder
                self._seen.add(agent)
            return recorder

    def flush(self, timeout: float | None = None) -> bool:
        with self._lock:
            recorders = list(self._recorders.values())
        return all([recorder.flush(timeout) for recorder in recorders])

    def close(self, timeout: float | None = 30.0) -> bool:
        with self._lock:
            recorders, self._recorders = list(self._recorders.values()), {}
        return all([recorder.close(timeout) for recorder in recorders])

    @property
    def agents(self) -> list[str]:
        """The agents heard from (recorders opened), also after :meth:`close`."""
        with self._lock:
            return sorted(self._seen)

"""What a replay can prove, by how faithful its capture is (DESIGN decision 13).

Every replay report states the capture's fidelity and what follows from it:

* ``wire`` — the exact bytes of every model call were captured; the replay sends those bytes
  (hash-checked), so it proves behaviour on what the model really received.
* ``sdk`` — recorded by hand through the Recorder; the replay sends the request rebuilt from the
  recorded rendered context (hash-checked), which is what the agent said it sent.
* ``semantic`` — rebuilt from OpenTelemetry spans or framework callbacks; the exact bytes the model
  received were never captured, so the replay proves behaviour on the reconstruction only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["fidelity_note", "fidelity_of"]


def fidelity_of(capture: Mapping[str, Any]) -> str:
    """The capture's stated fidelity (``sdk`` when it states none: capture/v1)."""
    return str(capture.get("fidelity") or "sdk")


def fidelity_note(capture: Mapping[str, Any]) -> str:
    """One sentence: the capture's fidelity and what this replay can and cannot prove."""
    fidelity = fidelity_of(capture)
    rendering = (capture.get("renderedContext") or {}).get("format")
    if fidelity == "wire":
        calls = len((capture.get("executionTrace") or {}).get("modelCalls") or ())
        return (
            f"wire capture: the exact request bytes of all {calls} model call(s) were captured and are "
            "sent as recorded (hash-checked); the replay proves behaviour on the bytes the model received"
        )
    if fidelity == "semantic":
        return (
            "semantic capture: rebuilt from OpenTelemetry spans or framework callbacks; the exact bytes "
            f"the model received were not captured; the replay sends its stated rendering ({rendering}) "
            "and proves behaviour on this reconstruction only"
        )
    return (
        "sdk capture: recorded by hand through the Recorder; the replay sends the request rebuilt from "
        f"the recorded rendered context ({rendering}, hash-checked), not bytes seen on the wire"
    )

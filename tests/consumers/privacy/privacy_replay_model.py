"""An in-process model for ``blackbox replay --model-callable privacy_replay_model:answer``: it keeps
every request it was sent, so a test can see which view of the personal data reached the model."""

from __future__ import annotations

from typing import Any

SENT: list[dict[str, Any]] = []


def answer(request: dict[str, Any]) -> dict[str, Any]:
    SENT.append(request)
    return {
        "id": "chatcmpl-privacy",
        "object": "chat.completion",
        "model": request.get("model"),
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "Refunded."}, "finish_reason": "stop"}
        ],
    }

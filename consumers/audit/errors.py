"""The audit endpoint's refusals: the errors its routes raise and how each is answered
(:mod:`.routing` applies them to every route).

Errors are ``{"error": reason, "status": code}`` (plus ``part`` for evidence that does not verify).
What is logged: every refusal of an authenticated caller, and every 401 (limited per client address,
so a flood of them costs a token bucket, not a log row each). Never logged: a body over the limit or
not JSON (refused before anyone is known), and a request no route answers
(:mod:`consumers.web.app`). A logged reason never echoes a member name the sender chose.
"""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse

__all__ = ["ApiError", "Unauthenticated", "error_json"]


class Unauthenticated(Exception):
    """No credential, or one that does not prove an identity; the endpoint answers 401."""


class ApiError(Exception):
    def __init__(
        self, status: int, reason: str, *, part: str = "", headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(reason)
        self.status, self.reason, self.part, self.headers = status, reason, part, headers or {}


def error_json(
    status: int, reason: str, *, part: str = "", headers: dict[str, str] | None = None
) -> JSONResponse:
    body: dict[str, Any] = {"error": reason, "status": status}
    if part:
        body["part"] = part
    return JSONResponse(body, status_code=status, headers=headers)

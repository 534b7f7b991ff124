"""The bodies the audit endpoint accepts, as pydantic models (they are also its OpenAPI schemas).

Unknown members are refused (422), so a body that names its own caller or scope is an error rather
than something silently ignored: identity comes from the credential only.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field


class Authority(BaseModel):
    """The authority a request is made under."""

    model_config = ConfigDict(extra="forbid")

    legalBasis: str = Field(min_length=1, max_length=500, description="e.g. 'FCA s.165 FSMA notice'")
    reference: str = Field(min_length=1, max_length=200, description="the case or notice reference")


class AccessRequestBody(BaseModel):
    """``POST /v1/access-requests``: decisions by ids, or an agent and a capture-time range."""

    model_config = ConfigDict(extra="forbid")

    decisions: list[str] = Field(default_factory=list, max_length=1000, description="exact decision ids")
    agent: str | None = Field(None, max_length=200, description="an agent id, with since and until")
    since: datetime | None = Field(None, description="captures at or after this time (with agent)")
    until: datetime | None = Field(None, description="captures before this time (with agent)")
    authority: Authority
    purpose: str = Field(min_length=1, max_length=1000)


class DecisionBody(BaseModel):
    """``POST /v1/access-requests/{id}/approve`` or ``/refuse`` (operator tokens only)."""

    model_config = ConfigDict(extra="forbid")

    reason: str = Field(min_length=1, max_length=1000)
    expires: str = Field("30d", max_length=10, description="how long an approved grant lasts: 12h, 30d, 2w")

"""Access to capture content: caller scopes, grants, the access log, and the one gate.

Every read of capture content (show, export, replay, verify) goes through
:class:`AccessGate`, which logs the attempt before allowing it and refuses when it cannot log.
"""

from consumers.access.gate import AccessGate, AccessLogUnavailable, LiveAuthorization, denial, raise_if_denied
from consumers.access.grants import Grant, Grants
from consumers.access.log import AccessLog, AccessRecord, IndexAccessLog, JsonlAccessLog, TableWriter
from consumers.access.scopes import SCOPES, Caller, Scope, capture_scopes, parse_scope
from consumers.access.wiring import caller_for, gate_for

__all__ = [
    "SCOPES",
    "AccessGate",
    "AccessLog",
    "AccessLogUnavailable",
    "AccessRecord",
    "Caller",
    "Grant",
    "Grants",
    "IndexAccessLog",
    "JsonlAccessLog",
    "LiveAuthorization",
    "Scope",
    "TableWriter",
    "caller_for",
    "capture_scopes",
    "denial",
    "gate_for",
    "parse_scope",
    "raise_if_denied",
]

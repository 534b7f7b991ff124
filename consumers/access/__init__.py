"""Access to capture content: caller scopes, grants, the access log, and the one gate.

Every read of capture content (show, export, replay, verify) goes through
:class:`AccessGate`, which logs the attempt before allowing it and refuses when it cannot log.
"""

from consumers.access.chain import ChainReport, verify_chain
from consumers.access.desk import AccessDesk
from consumers.access.gate import AccessGate, AccessLogUnavailable, LiveAuthorization, denial, raise_if_denied
from consumers.access.grants import Grant, Grants, GrantsFile
from consumers.access.log import AccessLog, AccessRecord, IndexAccessLog, JsonlAccessLog, TableWriter
from consumers.access.requests import AccessRequest, AccessRequests, new_request
from consumers.access.scopes import SCOPES, Caller, Scope, capture_scopes, parse_scope
from consumers.access.tokens import TokenRecord, TokenStore
from consumers.access.wiring import caller_for, desk_for, gate_for, tokens_for

__all__ = [
    "SCOPES",
    "AccessDesk",
    "AccessGate",
    "AccessLog",
    "AccessLogUnavailable",
    "AccessRecord",
    "AccessRequest",
    "AccessRequests",
    "Caller",
    "ChainReport",
    "Grant",
    "Grants",
    "GrantsFile",
    "IndexAccessLog",
    "JsonlAccessLog",
    "LiveAuthorization",
    "Scope",
    "TableWriter",
    "TokenRecord",
    "TokenStore",
    "caller_for",
    "capture_scopes",
    "denial",
    "desk_for",
    "gate_for",
    "new_request",
    "parse_scope",
    "raise_if_denied",
    "tokens_for",
    "verify_chain",
]

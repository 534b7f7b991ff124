"""An OTLP/HTTP trace export request into :class:`~producers.integrations.genai_spans.Span` values.

Two encodings (OTLP specification, "OTLP/HTTP"): binary protobuf (``application/x-protobuf``) and
the OTLP JSON mapping (``application/json``: proto3 JSON with lowerCamelCase names, except that
trace and span ids are hex strings, not base64). Both are read with ``opentelemetry-proto`` and
protobuf's own parsers; unknown JSON fields are ignored, as receivers must.

The whole request is decoded and checked before a single span is returned, so a request is taken
whole or refused whole: :class:`MalformedRequest` names the first problem (with its place in the
request) and nothing of the request is recorded.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from opentelemetry.proto.trace.v1.trace_pb2 import Status

from producers.integrations.genai_spans import Span
from schemas.errors import BlackboxError

__all__ = ["JSON", "PROTOBUF", "MalformedRequest", "decode_request", "spans_of"]

PROTOBUF = "application/x-protobuf"
JSON = "application/json"

# SpanFlags (trace.proto): bit 8 says whether bit 9 (the parent is remote) is known
_HAS_IS_REMOTE = 0x100
_IS_REMOTE = 0x200
_MAX_DEPTH = 64


class MalformedRequest(BlackboxError):
    """The request body is not a valid OTLP trace export; the message says where and why."""


def _hex_ids_to_base64(node: Any, path: str) -> None:
    """OTLP JSON writes ids as hex; protobuf's JSON parser reads bytes as base64."""
    for rs_i, resource_spans in enumerate(_list(node, "resourceSpans", path)):
        for ss_i, scope_spans in enumerate(_list(resource_spans, "scopeSpans", f"resourceSpans[{rs_i}]")):
            at = f"resourceSpans[{rs_i}].scopeSpans[{ss_i}]"
            for sp_i, span in enumerate(_list(scope_spans, "spans", at)):
                _convert_ids(span, ("traceId", "spanId", "parentSpanId"), f"{at}.spans[{sp_i}]")
                for link_i, link in enumerate(_list(span, "links", f"{at}.spans[{sp_i}]")):
                    _convert_ids(link, ("traceId", "spanId"), f"{at}.spans[{sp_i}].links[{link_i}]")


def _list(node: Any, key: str, at: str) -> list[Any]:
    if not isinstance(node, dict):
        raise MalformedRequest(f"{at or 'the request'} is not a JSON object")
    value = node.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise MalformedRequest(f"{at}.{key} is not a JSON array" if at else f"{key} is not a JSON array")
    return value


def _convert_ids(node: Any, keys: tuple[str, ...], at: str) -> None:
    if not isinstance(node, dict):
        raise MalformedRequest(f"{at} is not a JSON object")
    for key in keys:
        value = node.get(key)
        if value in (None, ""):
            continue
        if not isinstance(value, str):
            raise MalformedRequest(f"{at}.{key} is not a hex string")
        try:
            node[key] = base64.b64encode(bytes.fromhex(value)).decode("ascii")
        except ValueError:
            raise MalformedRequest(f"{at}.{key} is not hex: {value[:40]!r}") from None


def decode_request(body: bytes, content_type: str) -> ExportTraceServiceRequest:
    """The request message, or :class:`MalformedRequest`."""
    request = ExportTraceServiceRequest()
    if content_type == PROTOBUF:
        try:
            request.ParseFromString(body)
        except (DecodeError, RecursionError) as exc:
            raise MalformedRequest(f"not an OTLP protobuf ExportTraceServiceRequest: {exc}") from None
        return request
    try:
        document = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise MalformedRequest(f"not JSON: {exc}") from None
    _hex_ids_to_base64(document, "")
    try:
        json_format.ParseDict(document, request, ignore_unknown_fields=True, max_recursion_depth=_MAX_DEPTH)
    except (json_format.ParseError, RecursionError, TypeError, ValueError) as exc:
        raise MalformedRequest(f"not an OTLP JSON ExportTraceServiceRequest: {exc}") from None
    return request


def _any(value: AnyValue, depth: int = 0) -> Any:
    if depth > _MAX_DEPTH:
        raise MalformedRequest(f"an attribute value nests deeper than {_MAX_DEPTH} levels")
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_any(v, depth + 1) for v in value.array_value.values]
    if kind == "kvlist_value":
        return _attributes(value.kvlist_value.values, depth + 1)
    return getattr(value, kind)


def _attributes(pairs: Any, depth: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        if isinstance(pair, KeyValue):
            out[pair.key] = _any(pair.value, depth)
    return out


def _span(span: ProtoSpan, resource: Mapping[str, Any], at: str) -> Span:
    if len(span.trace_id) != 16 or not any(span.trace_id):
        raise MalformedRequest(
            f"{at}.traceId must be 16 bytes, not all zero (got {len(span.trace_id)} bytes)"
        )
    if len(span.span_id) != 8 or not any(span.span_id):
        raise MalformedRequest(f"{at}.spanId must be 8 bytes, not all zero (got {len(span.span_id)} bytes)")
    if len(span.parent_span_id) not in (0, 8):
        raise MalformedRequest(f"{at}.parentSpanId must be empty or 8 bytes (got {len(span.parent_span_id)})")
    parent = binascii.hexlify(span.parent_span_id).decode("ascii") if any(span.parent_span_id) else None
    remote_parent = bool(span.flags & _HAS_IS_REMOTE) and bool(span.flags & _IS_REMOTE)
    error = None
    if span.status.code == Status.STATUS_CODE_ERROR:
        error = span.status.message or "error"
    return Span(
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        parent_id=parent,
        name=span.name,
        start_ns=span.start_time_unix_nano,
        end_ns=max(span.end_time_unix_nano, span.start_time_unix_nano),
        attributes=_attributes(span.attributes),
        local_root=parent is None or remote_parent,
        error=error,
        resource=resource,
    )


def spans_of(request: ExportTraceServiceRequest) -> list[Span]:
    """Every span of the request, checked; :class:`MalformedRequest` names the first bad one."""
    spans = []
    for rs_i, resource_spans in enumerate(request.resource_spans):
        resource = _attributes(resource_spans.resource.attributes)
        for ss_i, scope_spans in enumerate(resource_spans.scope_spans):
            for sp_i, span in enumerate(scope_spans.spans):
                spans.append(_span(span, resource, f"resourceSpans[{rs_i}].scopeSpans[{ss_i}].spans[{sp_i}]"))
    return spans

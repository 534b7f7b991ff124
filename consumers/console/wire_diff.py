"""Which request bytes a wire replay changed: the bytes each model call sent, against the bytes the
capture recorded for that call.

A wire capture replays by its recorded bytes, a variation spliced into exactly one part; the result
page shows that guarantee as it happened: for each call, identical, or the one byte range that
differs and the recorded part (``memory:<entry>``, ``system_prompt``) that holds it. The tap sits
between the replayer and the operator's wire client and keeps what each call sent (bytes stay in the
job's memory; the page shows offsets and sizes, never the bytes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from consumers.replay.clients import ModelClient
    from consumers.replay.wire_client import WireClient, WireReply
    from consumers.replay.wire_request import WireCall

__all__ = ["RequestDiff", "WireTap", "request_diff"]


@dataclass(frozen=True, slots=True)
class RequestDiff:
    """One model call's request: ``start``..``recorded_end`` of the recording became
    ``start``..``sent_end`` of what was sent; every byte before and after is identical."""

    sequence: int
    recorded_size: int
    sent_size: int
    identical: bool
    start: int = 0
    recorded_end: int = 0
    sent_end: int = 0
    parts: tuple[str, ...] = ()
    """The recorded spans the differing range lies in (empty: it is in no recorded part)."""

    @property
    def same_bytes(self) -> int:
        return self.recorded_size - (self.recorded_end - self.start)


def request_diff(
    sequence: int, recorded: bytes, sent: bytes, spans: Sequence[Mapping[str, Any]]
) -> RequestDiff:
    """The common prefix and suffix of the two bodies, and the recorded parts covering what lies
    between (a span covers a range it contains, or touches when the range is empty: an insertion)."""
    if recorded == sent:
        return RequestDiff(sequence, len(recorded), len(sent), identical=True)
    limit = min(len(recorded), len(sent))
    start = 0
    while start < limit and recorded[start] == sent[start]:
        start += 1
    tail = 0
    while tail < limit - start and recorded[-1 - tail] == sent[-1 - tail]:
        tail += 1
    recorded_end, sent_end = len(recorded) - tail, len(sent) - tail
    parts = tuple(
        str(span.get("part"))
        for span in spans
        if isinstance(span.get("start"), int)
        and isinstance(span.get("end"), int)
        and span["start"] <= start
        and recorded_end <= span["end"]
    )
    return RequestDiff(
        sequence,
        len(recorded),
        len(sent),
        identical=False,
        start=start,
        recorded_end=recorded_end,
        sent_end=sent_end,
        parts=parts,
    )


class _TapWire:
    def __init__(self, inner: WireClient, sent: list[tuple[int, bytes, bytes]]) -> None:
        self._inner, self._sent = inner, sent

    def destination(self, captured_endpoint: str | None) -> str:
        return self._inner.destination(captured_endpoint)

    def send(self, call: WireCall, body: bytes, *, captured_endpoint: str | None) -> WireReply:
        self._sent.append((call.sequence, call.recorded, body))
        return self._inner.send(call, body, captured_endpoint=captured_endpoint)


class WireTap:
    """``client`` as the replayer sees it, its wire client (when it has one) keeping what it sent."""

    def __init__(self, client: ModelClient) -> None:
        self._sent: list[tuple[int, bytes, bytes]] = []
        self.client = _TappedClient(client, self._sent)

    def take(self, capture: Mapping[str, Any]) -> tuple[RequestDiff, ...]:
        """The calls sent since the last take, each against its recording (spans from ``capture``)."""
        calls = (capture.get("executionTrace") or {}).get("modelCalls") or []
        spans = {c.get("sequence"): c.get("spans") or [] for c in calls if isinstance(c, Mapping)}
        sent, self._sent[:] = list(self._sent), []
        return tuple(request_diff(seq, recorded, body, spans.get(seq, ())) for seq, recorded, body in sent)


class _TappedClient:
    def __init__(self, inner: ModelClient, sent: list[tuple[int, bytes, bytes]]) -> None:
        self._inner = inner
        wire = getattr(inner, "wire", None)
        if wire is not None:
            self.wire = _TapWire(wire, sent)

    def complete(self, request: Any, *, extra_messages: Sequence[Mapping[str, Any]] = ()) -> Any:
        return self._inner.complete(request, extra_messages=extra_messages)

    def destination(self, request: Any) -> str:
        return self._inner.destination(request)

    def __getattr__(self, name: str) -> Any:  # the client's other attributes (its name, its endpoint)
        return getattr(self._inner, name)

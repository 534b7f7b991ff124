"""Where a wrapped SDK client's model calls go: the current decision, or a decision of their own.

:class:`ModelCallRouter` is the exchange callback of a wrapped client (:mod:`.http_capture`). It
runs on the agent's thread (the event loop, for async) when a response is closed, so it only
routes a reference; parsing and hashing happen on the recorder's worker (:mod:`.assemble`).

* Inside ``with recorder.decision(...) as d:`` (this thread or asyncio task, see
  :func:`producers.decision.current_decision`) every model call belongs to ``d``.
* Outside any decision (drop-in mode) each logical model call becomes its own decision, finished as
  soon as its last attempt is known. An attempt the SDK may still retry (no response, 408, 409,
  429, >= 500, unless the server said ``x-should-retry: false`` or the client's retries are spent)
  is held until its next attempt arrives; if none comes within :data:`HOLD_SECONDS`, the attempts
  seen are recorded as the call.

Exchanges that are not model calls (listing models, files, token counting) are not recorded.
Nothing here raises into the agent: a failure is counted and logged by the transport wrapper.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from producers.decision import DecisionBuilder, current_decision
from producers.integrations.assemble import SeenCall, assemble
from producers.integrations.http_capture import (  # names the extra if missing
    Exchange,
    httpx2,
    wrap_http_client,
)
from producers.wire.calls import WireFormat

if TYPE_CHECKING:
    from producers.recorder import Recorder

__all__ = ["HOLD_SECONDS", "ModelCallRouter", "wrap_sdk_client"]

HOLD_SECONDS = 70.0
"""How long a retryable attempt waits for its retry (the SDKs honour retry-after up to 60 s)."""

_RETRYABLE = frozenset({408, 409, 429})

FormatFor = Callable[[Exchange], WireFormat | None]


class ModelCallRouter:
    """The exchange callback of one wrapped client; see the module docstring."""

    def __init__(
        self, recorder: Recorder, *, format_for: FormatFor, max_retries: int, consequential: bool
    ) -> None:
        self._recorder = recorder
        self._format_for = format_for
        self._max_retries = max_retries
        self._consequential = consequential
        self._lock = threading.Lock()
        self._held: dict[str, tuple[list[SeenCall], threading.Timer]] = {}

    def __call__(self, exchange: Exchange) -> None:
        wire = self._format_for(exchange)
        if wire is None:
            return
        seen = SeenCall(exchange, wire)
        decision = current_decision()
        if (
            decision is not None
            and decision.recorder is self._recorder
            and decision.attach_model_call(seen, assemble)
        ):
            return
        self._drop_in(seen)

    def _drop_in(self, seen: SeenCall) -> None:
        call_id = seen.exchange.call_id
        with self._lock:
            held = self._held.pop(call_id, None)
            group = [] if held is None else held[0]
            if held is not None:
                held[1].cancel()
            group.append(seen)
            if not self._final(seen.exchange):
                timer = threading.Timer(HOLD_SECONDS, self._release, args=(call_id,))
                timer.daemon = True
                self._held[call_id] = (group, timer)
                timer.start()
                return
        self._decide(group)

    def _release(self, call_id: str) -> None:
        with self._lock:
            held = self._held.pop(call_id, None)
        if held is not None:
            self._decide(held[0])

    def _final(self, exchange: Exchange) -> bool:
        """Whether the SDK will not retry this attempt."""
        status = exchange.status
        if status is not None and status < 500 and status not in _RETRYABLE:
            return True
        if exchange.header("x-should-retry", response=True) == "false":
            return True
        retry = exchange.header("x-stainless-retry-count")
        try:
            return retry is not None and int(retry) >= self._max_retries
        except ValueError:
            return False

    def _decide(self, group: list[SeenCall]) -> None:
        """One drop-in decision holding one call's attempts."""
        decision: DecisionBuilder = self._recorder.decision(consequential=self._consequential)
        for seen in group:
            decision.attach_model_call(seen, assemble)
        seconds = sum(seen.exchange.total_seconds for seen in group)
        decision.finish(output=None, stop_reason=None, total_latency_ms=round(seconds * 1000))


ClientT = TypeVar("ClientT")


def load_sdk(name: str) -> Any:
    """The SDK module, or an ImportError naming the extra that installs it."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ImportError(
            f"blackbox's {name} integration needs the {name} SDK: pip install 'agent-blackbox[{name}]'"
        ) from exc


def wrap_sdk_client(
    client: ClientT,
    recorder: Recorder,
    *,
    sdk: Any,
    format_for: FormatFor,
    consequential: bool,
) -> ClientT:
    """``client`` (an ``openai`` / ``anthropic`` client, sync or async) with its model calls recorded.

    A client on the SDK's own HTTP client gets a copy (``with_options``: same key, base URL,
    headers, timeouts and retries) on a fresh SDK-default HTTP client whose transport is captured;
    the given client is untouched. A client built with a custom ``http_client`` keeps it, wrapped
    in place (every client sharing that ``http_client`` records through this recorder).
    """
    http = getattr(client, "_client", None)
    router = ModelCallRouter(
        recorder,
        format_for=format_for,
        max_retries=int(getattr(client, "max_retries", 2)),
        consequential=consequential,
    )
    base = importlib.import_module(f"{sdk.__name__}._base_client")
    owned = tuple(
        cls
        for cls in (
            getattr(base, "SyncHttpxClientWrapper", None),
            getattr(base, "AsyncHttpxClientWrapper", None),
        )
        if cls is not None
    )
    if owned and isinstance(http, owned):
        if isinstance(http, httpx2.AsyncClient):
            fresh: Any = wrap_http_client(sdk.DefaultAsyncHttpxClient(), router, clock=recorder.clock)
        else:
            fresh = wrap_http_client(sdk.DefaultHttpxClient(), router, clock=recorder.clock)
        copied: ClientT = client.with_options(http_client=fresh)  # type: ignore[attr-defined]
        return copied
    if not isinstance(http, httpx2.Client | httpx2.AsyncClient):
        raise TypeError(f"{type(client).__name__} does not send through an httpx2 client")
    given: Any = http  # either client type (wrap_http_client's type variable takes one at a time)
    wrap_http_client(given, router, clock=recorder.clock)
    return client

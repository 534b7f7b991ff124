"""Record the model calls of an ``anthropic`` client: ``client = wrap(Anthropic(), recorder)``.

Messages (``/v1/messages``), plain and streamed, sync and async, ``tool_use`` / ``tool_result``
blocks and the ``system`` field included: every call's exact request and response bytes go into a
wire-fidelity capture, inside the enclosing ``with recorder.decision(...)`` block or, outside one,
as a decision of its own. See :mod:`producers.integrations.recording` and
:mod:`producers.integrations.assemble`. Needs ``pip install 'agent-blackbox[anthropic]'``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from producers.integrations.recording import load_sdk, wrap_sdk_client

anthropic = load_sdk("anthropic")

from producers.integrations.http_capture import Exchange  # noqa: E402  (after the SDK check)
from producers.wire import anthropic_messages  # noqa: E402
from producers.wire.calls import WireFormat  # noqa: E402

if TYPE_CHECKING:
    from producers.recorder import Recorder

__all__ = ["format_for", "wrap"]

ClientT = TypeVar("ClientT")


def format_for(exchange: Exchange) -> WireFormat | None:
    """The wire format of an Anthropic exchange, or None when it is not a model call."""
    if exchange.method == "POST" and exchange.path.endswith("/messages"):
        return anthropic_messages
    return None


def wrap(client: ClientT, recorder: Recorder, *, consequential: bool = False) -> ClientT:
    """An ``anthropic.Anthropic`` / ``AsyncAnthropic`` client of the same type whose model calls
    ``recorder`` captures; ``consequential`` applies to drop-in decisions (outside any decision)."""
    if not isinstance(client, anthropic.Anthropic | anthropic.AsyncAnthropic):
        raise TypeError(
            f"expected an anthropic.Anthropic or anthropic.AsyncAnthropic client, got {type(client).__name__}"
        )
    return wrap_sdk_client(
        client, recorder, sdk=anthropic, format_for=format_for, consequential=consequential
    )

"""Record the model calls of an ``openai`` client: ``client = wrap(OpenAI(), recorder)``.

Chat Completions (``/chat/completions``) and Responses (``/responses``), plain and streamed, sync
and async: every call's exact request and response bytes go into a wire-fidelity capture, inside
the enclosing ``with recorder.decision(...)`` block or, outside one, as a decision of its own. See
:mod:`producers.integrations.recording` for the routing and :mod:`producers.integrations.assemble`
for what the capture holds. Needs ``pip install 'agent-blackbox[openai]'``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from producers.integrations.recording import load_sdk, wrap_sdk_client

openai = load_sdk("openai")

from producers.integrations.http_capture import Exchange  # noqa: E402  (after the SDK check)
from producers.wire import openai_chat, openai_responses  # noqa: E402
from producers.wire.calls import WireFormat  # noqa: E402

if TYPE_CHECKING:
    from producers.recorder import Recorder

__all__ = ["format_for", "wrap"]

ClientT = TypeVar("ClientT")


def format_for(exchange: Exchange) -> WireFormat | None:
    """The wire format of an OpenAI exchange, or None when it is not a model call."""
    if exchange.method != "POST":
        return None
    if exchange.path.endswith(openai_chat.PATH):
        return openai_chat
    if exchange.path.endswith(openai_responses.PATH):
        return openai_responses
    return None


def wrap(client: ClientT, recorder: Recorder, *, consequential: bool = False) -> ClientT:
    """An ``openai.OpenAI`` / ``AsyncOpenAI`` (or Azure) client of the same type whose model calls
    ``recorder`` captures; ``consequential`` applies to drop-in decisions (outside any decision)."""
    if not isinstance(client, openai.OpenAI | openai.AsyncOpenAI):
        raise TypeError(
            f"expected an openai.OpenAI or openai.AsyncOpenAI client, got {type(client).__name__}"
        )
    return wrap_sdk_client(client, recorder, sdk=openai, format_for=format_for, consequential=consequential)

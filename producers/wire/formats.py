"""The wire formats by name, with what sending a recorded body again needs: path, history, headers.

A wire capture names each model call's format (``executionTrace.modelCalls[].format``). To send a
recorded body to an operator's endpoint, replay needs, per format: the path the call must have been
made to (a captured path must end with it), the array member each later turn appends to, the
request headers that change how the provider reads the body (kept in the capture, credential-free),
and how the key travels — ``Authorization: Bearer`` for OpenAI, ``x-api-key`` plus
``anthropic-version`` for Anthropic. The key itself is never in a capture; it comes from the
operator's configuration.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from producers.wire import anthropic_messages, openai_chat, openai_responses
from producers.wire.calls import WireFormat

__all__ = ["ANTHROPIC_VERSION", "FORMATS", "WireSpec", "spec_for"]

ANTHROPIC_VERSION = "2023-06-01"
"""Sent when a Messages capture recorded no ``anthropic-version`` (the API requires one)."""


@dataclass(frozen=True, slots=True)
class WireSpec:
    """One provider format, as replay sends it."""

    reader: WireFormat
    path_suffix: str
    """A captured call's path ends with this (``/v1/chat/completions``, ``/openai/v1/messages``...)."""
    history_key: str
    """The top-level array each later call of a tool loop appends to."""
    sampling_keys: frozenset[str]
    """Top-level members that shape generation (what ``--vary sampling=...`` replaces)."""
    key_header: str
    forwarded_headers: frozenset[str]
    """Recorded request headers sent again: they select the API version or beta the body was written for."""
    default_headers: tuple[tuple[str, str], ...] = ()

    @property
    def format(self) -> str:
        return self.reader.FORMAT

    def headers(self, api_key: str | None, recorded: Iterable[tuple[str, str]]) -> dict[str, str]:
        """The request headers: JSON, the recorded version/beta headers, and the operator's key."""
        headers = {"Content-Type": "application/json", **dict(self.default_headers)}
        for name, value in recorded:
            if name.lower() in self.forwarded_headers:
                headers[name.lower()] = value
        if api_key is not None:
            headers[self.key_header] = f"Bearer {api_key}" if self.key_header == "Authorization" else api_key
        return headers


_OPENAI_HEADERS = frozenset({"openai-beta"})

FORMATS: Mapping[str, WireSpec] = MappingProxyType(
    {
        spec.format: spec
        for spec in (
            WireSpec(
                openai_chat,
                openai_chat.PATH,
                "messages",
                openai_chat.SAMPLING_KEYS,
                "Authorization",
                _OPENAI_HEADERS,
            ),
            WireSpec(
                openai_responses,
                openai_responses.PATH,
                "input",
                openai_responses.SAMPLING_KEYS,
                "Authorization",
                _OPENAI_HEADERS,
            ),
            WireSpec(
                anthropic_messages,
                "/messages",
                "messages",
                anthropic_messages.SAMPLING_KEYS,
                "x-api-key",
                frozenset({"anthropic-version", "anthropic-beta"}),
                (("anthropic-version", ANTHROPIC_VERSION),),
            ),
        )
    }
)
"""Every format replay can send, by its ``format`` name."""


def spec_for(format_name: str) -> WireSpec | None:
    return FORMATS.get(format_name)

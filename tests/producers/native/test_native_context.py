"""The rendered chat context in the native core (``render_chat``, src/context.rs) against the
reference (:func:`producers.context.reference_render_chat_context`): the same text and spans for
every text, or — for what it declines (a lone surrogate, a str subclass) — the Python renderer's
outcome. Its answer must also *come* for ordinary text, or the comparison proves nothing.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from native_testing import native_mode, outcome

from producers.context import _PIECES, ContextSpan, reference_render_chat_context, render_chat_context

# every character class the escaping treats differently: controls (short and \u00xx forms), quote,
# backslash, DEL, 2/3/4-byte UTF-8, and lone surrogates (declined)
_ALPHABET = st.characters(codec=None, categories=None) | st.sampled_from(
    list('\x00\x01\x08\t\n\x0b\x0c\r\x1f"\\\x7f\u2028\u00e9\U0001f600\ud800\udfff')
)
_TEXT = st.text(alphabet=_ALPHABET, max_size=300)
_MEMORY = st.lists(st.tuples(st.text(min_size=1, max_size=12), _TEXT), max_size=5)


def _render(system_prompt: str, memory: list[tuple[str, str]], user: str) -> Any:
    return outcome(lambda: render_chat_context(system_prompt=system_prompt, memory=memory, user_message=user))


def _reference(system_prompt: str, memory: list[tuple[str, str]], user: str) -> Any:
    return outcome(
        lambda: reference_render_chat_context(system_prompt=system_prompt, memory=memory, user_message=user)
    )


@settings(max_examples=3_000, deadline=None)
@given(system_prompt=_TEXT, memory=_MEMORY, user=_TEXT)
def test_any_text_renders_as_the_reference(
    system_prompt: str, memory: list[tuple[str, str]], user: str
) -> None:
    with native_mode("require"):
        natively = _render(system_prompt, memory, user)
    assert natively == _reference(system_prompt, memory, user)


def test_every_bmp_character_renders_as_the_reference(core: Any) -> None:
    """Each BMP character (surrogates excepted) in runs of 256, as a prompt, an entry and the user."""
    chars = [chr(c) for c in range(0x10000) if not 0xD800 <= c < 0xE000]
    random.Random(8785).shuffle(chars)
    for at in range(0, len(chars), 256):
        run = "".join(chars[at : at + 256])
        memory = [("a", run[::-1]), ("b", run[:7])]
        assert core.render_chat(_PIECES, run, [c for _, c in memory], run) is not None
        with native_mode("require"):
            natively = _render(run, memory, run)
        assert natively == _reference(run, memory, run)


class _Text(str):
    """A str subclass: the core declines it."""


def test_what_the_core_declines_goes_to_python(core: Any) -> None:
    for prompt, entry, user in [("\ud800", "m", "u"), ("p", "\udfff", "u"), ("p", "m", _Text("u"))]:
        assert core.render_chat(_PIECES, prompt, [entry], user) is None
        with native_mode("require"):
            natively = _render(prompt, [("e", entry)], user)
        assert natively == _reference(prompt, [("e", entry)], user)
    assert core.render_chat(_PIECES, "p", ("m",), "u") is None  # not a list
    assert core.render_chat(_PIECES, "p", ["m"], "u") is not None


def test_the_core_answers_for_ordinary_text(core: Any) -> None:
    text, spans = core.render_chat(_PIECES, 'Be "brief".\n', ["one", "two\t"], "hi")
    assert (
        text
        == reference_render_chat_context(
            system_prompt='Be "brief".\n', memory=[("1", "one"), ("2", "two\t")], user_message="hi"
        ).text
    )
    assert len(spans) == 5 and text.encode()[spans[0][0] : spans[0][1]] == b'Be \\"brief\\".\\n'


def test_the_spans_of_a_native_render_are_ordinary_frozen_spans() -> None:
    with native_mode("require"):
        rendered = render_chat_context(system_prompt="p", memory=[("m1", "one")], user_message="u")
    made = [ContextSpan(s.part, s.start, s.end) for s in rendered.spans]
    assert list(rendered.spans) == made
    assert [hash(s) for s in rendered.spans] == [hash(s) for s in made]
    assert [repr(s) for s in rendered.spans] == [repr(s) for s in made]
    assert {s.encoding for s in rendered.spans} == {"json-string"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        rendered.spans[0].start = 0  # type: ignore[misc]

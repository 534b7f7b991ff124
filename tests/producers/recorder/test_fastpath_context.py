"""render_chat_context's fast path prints exactly what its reference definition prints."""

from __future__ import annotations

import random

import pytest

from producers.context import reference_render_chat_context, render_chat_context

_ALPHABET = [
    "a",
    "b",
    " ",
    "\n",
    "\r",
    "\t",
    '"',
    "\\",
    "\x00",
    "\x1f",
    "\x7f",
    "é",
    "€",
    "😀",
    "\u2028",
    "/",
]


def _text(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(_ALPHABET) for _ in range(rng.randrange(n + 1)))


@pytest.mark.parametrize("seed", range(200))
def test_render_matches_reference(seed: int) -> None:
    rng = random.Random(seed)
    prompt = _text(rng, 40)
    memory = [(f"m{i}", _text(rng, 30)) for i in range(rng.randrange(4))]
    user = _text(rng, 20)
    for _ in range(2):  # the second call reuses the remembered escaped prompt
        fast = render_chat_context(system_prompt=prompt, memory=memory, user_message=user)
        assert fast == reference_render_chat_context(system_prompt=prompt, memory=memory, user_message=user)
        for span in fast.spans:
            if span.part.startswith("memory:"):
                assert fast.part_text(span.part) == dict(memory)[span.part[7:]]
        assert fast.part_text("system_prompt") == prompt


def test_lone_surrogate_is_refused_like_the_reference() -> None:
    with pytest.raises(UnicodeEncodeError):
        reference_render_chat_context(system_prompt="\ud800", memory=[], user_message="u")
    with pytest.raises(UnicodeEncodeError):
        render_chat_context(system_prompt="\ud800", memory=[], user_message="u")

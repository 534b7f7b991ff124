"""``producers.wire.body``: one member or one span of a recorded JSON body changes, every other byte stays."""

from __future__ import annotations

import json

import pytest

from producers.wire.body import (
    append_items,
    appended_items,
    escape_text,
    first_difference,
    layout,
    remove_member,
    set_member,
)

COMPACT = (
    '{"model":"gpt-x","messages":[{"role":"system","content":"caf\u00e9 \u2615"}],"temperature":0.2}'.encode()
)
SPACED = b'{"max_tokens": 5, "messages": [{"role": "user", "content": "hi"}], "model": "c", "system": "s"}'


def test_layout_reads_members_separators_and_escaping() -> None:
    shape = layout(COMPACT)
    assert [m.key for m in shape.members] == ["model", "messages", "temperature"]
    member = shape.member("messages")
    assert member is not None and json.loads(COMPACT[member.start : member.end])[0]["role"] == "system"
    assert (shape.item_separator, shape.key_separator, shape.ascii_only) == (",", ":", False)
    spaced = layout(SPACED)
    assert (spaced.item_separator, spaced.key_separator, spaced.ascii_only) == (", ", ": ", True)
    assert escape_text(spaced, 'é"') == b'\\u00e9\\"' and escape_text(shape, 'é"') == 'é\\"'.encode()
    with pytest.raises(ValueError, match="not a JSON object"):
        layout(b"[1, 2]")


@pytest.mark.parametrize("body", [COMPACT, SPACED])
def test_set_and_remove_change_one_member_only(body: bytes) -> None:
    changed = set_member(body, "model", "other-model")
    assert json.loads(changed) == {**json.loads(body), "model": "other-model"}
    offset = first_difference(body, changed)
    assert offset is not None and changed[:offset] == body[:offset]
    assert changed.endswith(body[layout(body).member("model").end :])  # type: ignore[union-attr]

    added = set_member(body, "top_p", 0.5)
    assert added.startswith(body[:-1]) and json.loads(added) == {**json.loads(body), "top_p": 0.5}
    separators = layout(body).item_separator + '"top_p"' + layout(body).key_separator
    assert added == body[:-1] + separators.encode() + b"0.5}"

    for key in json.loads(body):
        removed = remove_member(body, key)
        expected = {k: v for k, v in json.loads(body).items() if k != key}
        assert json.loads(removed) == expected
    assert remove_member(body, "absent") == body


def test_appended_items_rebuild_a_later_call_from_an_earlier_one() -> None:
    first = SPACED
    second = first.replace(b'"hi"}]', b'"hi"}, {"role": "assistant", "content": "ok"}]')
    items = appended_items(first, second, "messages")
    assert items == b', {"role": "assistant", "content": "ok"}'
    assert append_items(first, "messages", items) == second
    varied = set_member(first, "system", "new")
    assert append_items(varied, "messages", items) == set_member(second, "system", "new")
    rewritten = second.replace(b'"max_tokens": 5', b'"max_tokens": 6')
    assert appended_items(first, rewritten, "messages") is None  # not an append: a member changed
    assert appended_items(first, second, "model") is None  # not an array

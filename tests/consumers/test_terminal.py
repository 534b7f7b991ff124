"""The terminal writer (issue 24 item 2): what it does to hostile text, on its own."""

from __future__ import annotations

import io
import json
import re

from hypothesis import given
from hypothesis import strategies as st

from consumers import terminal

UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def test_clean_escapes_each_kind_visibly() -> None:
    assert terminal.clean("a\x1b[2Jb\rc\nd\te\x07") == "a\\x1b[2Jb\\rc\\nd\\te\\x07"
    assert terminal.clean("x\x9b31m\x7f") == "x\\x9b31m\\x7f"
    assert terminal.clean("ab\u202ecd\u2066e\u2069\u200f\u2028") == "abU+202EcdU+2066eU+2069U+200FU+2028"
    assert terminal.clean("[/INST] [link=http://x]é 日本") == "[/INST] [link=http://x]é 日本"
    assert terminal.clean(None) == "" and terminal.clean(42) == "42"


@given(st.text())
def test_nothing_unsafe_survives_and_json_stays_exact(value: str) -> None:
    assert not UNSAFE.search(terminal.clean(value))
    block = terminal._keep_lines(value)
    assert not UNSAFE.search(block.replace("\n", ""))
    dumped = terminal.json_text({"v": value, "k": [value]})
    assert not UNSAFE.search(dumped.replace("\n", ""))
    assert json.loads(dumped) == {"v": value, "k": [value]}


def _piped_table(rows: list[list[object]], title: object = None) -> str:
    out = io.StringIO()
    terminal.print_table(["id", "text"], rows, title=title, out=terminal.console(file=out))
    return out.getvalue()


def test_a_piped_table_prints_markup_literally_and_never_wraps() -> None:
    long = "word " * 80
    shown = _piped_table(
        [
            [1, "[/INST] closes nothing"],
            [2, "[link=http://evil]click[/link] :smile:"],
            [3, long],
            [4, "a\x1bb"],
        ],
        title="[bold]t[/bold]",
    )
    lines = shown.splitlines()
    assert "[bold]t[/bold]" in lines[0]
    assert any("[/INST] closes nothing" in line for line in lines)
    assert any("[link=http://evil]click[/link] :smile:" in line for line in lines)
    assert any(long.strip() in line for line in lines)  # one line, not folded into 80 columns
    assert any("a\\x1bb" in line for line in lines)
    assert "\x1b" not in shown and len(lines) == 9  # title, 3 rules, header, four rows: one line each

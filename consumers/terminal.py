"""The one terminal writer: how every command prints what came from a capture, the index or a request.

That text is hostile input. A capture signed by anyone can carry ESC sequences that move the cursor and
redraw lines printed before it (a forged "verified" over a ``NOT VERIFIED`` banner), a carriage return
that overwrites a line, bidi overrides that reorder what a reader sees, or Rich markup (``[/INST]`` is an
ordinary LLM token) that crashes a table or changes what is displayed. So, on a terminal and in a pipe
alike:

- :func:`clean` shows a value on one line with every control character escaped visibly: C0 and DEL as
  ``\\x1b``, ``\\r``, ``\\n``, ``\\t``; C1 as ``\\x9b``; bidi controls, line and paragraph separators as
  ``U+202E``. Use it for every value printed inside a line of layout.
- :func:`echo` writes a block of lines, escaping the same characters except the line breaks that are
  the block's own layout (values inside should have gone through :func:`clean` already).
- :func:`echo_json` writes JSON whose strings cannot drive a terminal (C1, bidi and separators as
  ``\\uXXXX``, C0 as JSON always escapes them): still exact JSON of the same values.
- :func:`print_table` gives Rich every cell as :class:`~rich.text.Text` (never markup, never emoji
  codes), and when the output is not a terminal, renders at the table's natural width instead of
  squashing it into 80 columns.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TextIO

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

__all__ = ["clean", "console", "echo", "echo_json", "print_table", "text"]

_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_SEPARATORS = "\u2028\u2029"
_UNSAFE = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}{_SEPARATORS}]")
_UNSAFE_KEEP_LINES = re.compile(f"[\x00-\x09\x0b-\x1f\x7f-\x9f{_BIDI}{_SEPARATORS}]")
_JSON_UNSAFE = re.compile(f"[\x7f-\x9f{_BIDI}{_SEPARATORS}]")
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_WIDE = 100_000  # wide enough that a piped table is never wrapped


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    if char in _SHORT:
        return _SHORT[char]
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0x9F else f"U+{code:04X}"


def clean(value: object) -> str:
    """``value`` as one line of text with every control character escaped visibly (module docstring);
    ``None`` is the empty string."""
    if value is None:
        return ""
    return _UNSAFE.sub(_visible, value if isinstance(value, str) else str(value))


def text(value: object, style: str = "") -> Text:
    """``value`` as a Rich :class:`~rich.text.Text`: escaped by :func:`clean`, never read as markup."""
    return Text(clean(value), style=style)


def _keep_lines(block: str) -> str:
    return _UNSAFE_KEEP_LINES.sub(_visible, block)


def echo(block: object = "", *, err: bool = False, nl: bool = True) -> None:
    """Write ``block`` (lines of layout) with every control character but its line breaks escaped."""
    typer.echo(_keep_lines(str(block)), err=err, nl=nl)


def _json_visible(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def json_text(value: Any, *, default: Callable[[Any], Any] | None = None, indent: int | None = 2) -> str:
    """``json.dumps`` of ``value`` (UTF-8 kept) with the characters that can drive a terminal escaped as
    JSON escapes: parsing it gives back exactly ``value``."""
    dumped = json.dumps(value, default=default, ensure_ascii=False, indent=indent)
    return _JSON_UNSAFE.sub(_json_visible, dumped)


def echo_json(value: Any, *, default: Callable[[Any], Any] | None = None, indent: int | None = 2) -> None:
    """Write ``value`` as JSON (:func:`json_text`)."""
    typer.echo(json_text(value, default=default, indent=indent))


def console(*, err: bool = False, file: TextIO | None = None) -> Console:
    """A Rich console that never reads markup, emoji codes or highlights from what it prints; piped, it
    is as wide as what it prints (see :func:`print_table`)."""
    target = file if file is not None else (sys.stderr if err else sys.stdout)
    piped = not target.isatty()
    return Console(
        file=target,
        markup=False,
        emoji=False,
        highlight=False,
        width=_WIDE if piped else None,
        soft_wrap=piped,
    )


def print_table(
    columns: Sequence[str],
    rows: Iterable[Sequence[object]],
    *,
    title: object = None,
    right: Iterable[str] = (),
    err: bool = False,
    out: Console | None = None,
) -> None:
    """Print a table of data: every header and cell through :func:`text`. On a terminal it fits the
    window as Rich does; piped, it is rendered at its natural width, one row per line, never wrapped."""
    aligned = set(right)
    table = Table(title=text(title) if title is not None else None)
    for name in columns:
        table.add_column(text(name), justify="right" if name in aligned else "left")
    for row in rows:
        table.add_row(*(text(cell) for cell in row))
    target = out or console(err=err)
    if target.width >= _WIDE:  # piped: exactly as wide as the table needs
        natural = target.measure(table).maximum
        target = Console(
            file=target.file, markup=False, emoji=False, highlight=False, width=natural, soft_wrap=True
        )
    target.print(table)

"""The console's pieces that need no server: sessions and one-time links, the context renderer, inert
text, and the decision list's filter (bound parameters, clear errors)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from consumers.access.scopes import Caller
from consumers.console.context import render_context
from consumers.console.sessions import ConsoleSessions
from consumers.console.web import inert
from consumers.index.listing import DecisionFilter, filter_from, list_sql
from schemas.errors import ContractError

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
OPERATOR = Caller(identity="ops", scope="operator")


def test_a_session_resolves_until_it_expires_or_is_revoked(tmp_path: Path) -> None:
    sessions = ConsoleSessions(tmp_path / "console.json", lifetime=timedelta(hours=1))
    cookie, record = sessions.open(OPERATOR, credential="token:abc", now=T0)
    assert sessions.resolve(cookie, now=T0 + timedelta(minutes=59)) == record
    assert sessions.resolve(cookie, now=T0 + timedelta(hours=1)) is None  # expired
    assert sessions.resolve(cookie + "x", now=T0) is None  # another secret, same id
    assert sessions.resolve("nodot", now=T0) is None
    sessions.revoke(record.session_id, now=T0)
    assert sessions.resolve(cookie, now=T0) is None
    assert [s.state(T0) for s in sessions.list()] == ["revoked"]
    assert cookie.split(".", 1)[1] not in (tmp_path / "console.json").read_text()  # only its hash is kept


def test_a_sign_in_link_works_once_and_only_in_its_minutes(tmp_path: Path) -> None:
    sessions = ConsoleSessions(tmp_path / "console.json")
    code, expires = sessions.issue_link(OPERATOR, now=T0, lifetime=timedelta(minutes=10))
    assert expires == T0 + timedelta(minutes=10)
    late, _ = sessions.issue_link(OPERATOR, now=T0, lifetime=timedelta(minutes=10))
    assert sessions.redeem_link(late, now=T0 + timedelta(minutes=10)) is None  # expired
    redeemed = sessions.redeem_link(code, now=T0 + timedelta(minutes=9))
    assert redeemed is not None and redeemed[0] == OPERATOR and redeemed[1].startswith("link:")
    assert sessions.redeem_link(code, now=T0 + timedelta(minutes=9)) is None  # used
    assert sessions.redeem_link(code.split(".")[0] + ".forged", now=T0) is None


def test_the_context_draws_nested_spans_and_keeps_every_byte() -> None:
    text = "SYS é\nA-mem\nB-mem\nuser ✓"
    data = text.encode()
    spans = [
        {"part": "system_prompt", "start": 0, "end": 6},
        {"part": "memory", "start": 7, "end": 18},
        {"part": "memory:a", "start": 7, "end": 12},
        {"part": "memory:b", "start": 13, "end": 18},
        {"part": "user", "start": 19, "end": len(data)},
        {"part": "memory:x", "start": 3, "end": 5},  # splits é (2 bytes at 4..6)
        {"part": "memory:y", "start": 10, "end": 15},  # crosses memory:a / memory:b
        {"part": "memory:z", "start": 0, "end": len(data) + 1},  # outside
    ]
    view = render_context(text, spans, {"a": 0, "b": 1})
    assert view.drawn == 5 and len(view.skipped) == 3
    assert [s.split(":")[0] for s in view.skipped] == ["span 5 (memory", "span 7 (memory", "span 6 (memory"]
    assert 'href="#entry-0"' in view.html and 'href="#entry-1"' in view.html
    stripped = str(view.html)
    for tag in ("</a>", "</mark>"):
        stripped = stripped.replace(tag, "")
    assert re.sub(r"<[^>]+>", "", stripped) == text  # every character, once, in order


def test_inert_text_escapes_and_marks_invisible_characters() -> None:
    shown = str(inert('<script>alert(1)</script>"\u202eevil\x07\n\tok'))
    assert "<script>" not in shown and "&lt;script&gt;" in shown and "&#34;" in shown
    assert "U+202E" in shown and "U+0007" in shown and "\u202e" not in shown
    assert "\n\tok" in shown  # newlines and tabs stay as they are


def test_the_list_filter_binds_every_value_and_names_what_is_wrong() -> None:
    flt = filter_from({"prompt_version": "v4.7' OR 1=1 --", "failed": "yes", "since": "2026-12-01"})
    page, count, params = list_sql(flt, after="2026-12-02T00:00:00.000Z|dec_01ABC")
    assert "OR 1=1" not in page and "OR 1=1" not in count
    assert params["prompt_version"] == "v4.7' OR 1=1 --" and params["after_id"] == "dec_01ABC"
    assert "(captured_at, decision_id) <" in page and "LIMIT 51" in page
    assert "LIMIT 10001" in count  # counted up to the cap
    for query, path in (
        ({"failed": "maybe"}, "failed"),
        ({"since": "yesterday"}, "since"),
        ({"outcome": "win"}, "outcome"),
        ({"id_prefix": "dec_'"}, "id_prefix"),
        ({"agent": "a\x00b"}, "agent"),
    ):
        with pytest.raises(ContractError) as raised:
            filter_from(query)
        assert raised.value.path == path
    with pytest.raises(ContractError, match="cursor"):
        list_sql(DecisionFilter(), after="garbage")
    with pytest.raises(ContractError):
        DecisionFilter(since=T0, until=T0)


def test_every_invisible_or_reordering_character_is_marked() -> None:
    import unicodedata

    hidden = {"Cc", "Cf", "Zl", "Zp", "Co"}
    for code in range(0x110000):
        char = chr(code)
        if unicodedata.category(char) in hidden and char not in "\n\t":
            assert f"U+{code:04X}" in inert(f"a{char}b"), hex(code)

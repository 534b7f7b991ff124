"""Durations an operator or a request names (issue 24 item 8): ``{"expires": "999999999d"}`` was an
OverflowError (a 500 from the audit API, a traceback from the CLI). The one parser both use refuses
anything past 100 years with a message naming the field; ``trends --since`` too."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from consumers.access.files import parse_duration
from consumers.cli import app
from schemas.errors import ContractError


@pytest.mark.parametrize("text", ["999999999d", "99999999999999999999999d", "36501d", "5215w", "876001h"])
def test_durations_past_a_century_are_refused_by_name(text: str) -> None:
    with pytest.raises(ContractError, match=r"^expires: .* is longer than 100 years \(36500d\)$"):
        parse_duration(text, what="expires")


def test_durations_up_to_a_century_still_parse() -> None:
    assert parse_duration("36500d") == timedelta(days=36_500)
    assert parse_duration("12h") == timedelta(hours=12) and parse_duration("2w") == timedelta(weeks=2)


def test_approve_and_token_refuse_an_endless_expiry(tmp_path: Path) -> None:
    env = {"BLACKBOX_DATA_DIR": str(tmp_path / "bb")}
    for args in (
        ["access", "approve", "req_0123456789abcdef", "--reason", "r", "--expires", "999999999d"],
        [
            "access",
            "token",
            "create",
            "--caller",
            "regulator-1",
            "--scope",
            "regulator",
            "--expires",
            "999999999d",
        ],
    ):
        result = CliRunner().invoke(app, args, env=env)
        assert isinstance(result.exception, ContractError), (args, repr(result.exception))
        assert "longer than 100 years" in str(result.exception)


def test_trends_since_before_year_one_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["trends", "failure_rate", "--since", "999999999d"], env={"BLACKBOX_DATA_DIR": str(tmp_path)}
    )
    assert result.exit_code == 2 and "reaches back before the year 1" in result.output, result.output

"""Commands that print what a requester wrote (issue 24 item 2): ``access requests`` shows each request on
one line with the requester's fields escaped, so a purpose cannot redraw the request it belongs to."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from typer.testing import CliRunner

from consumers.access.requests import AccessRequests, new_request
from consumers.cli import app

FORGE = "audit\x1b[1A\x1b[2K\rreq_0000 pending regulator dec_1 only\u202e [/x][link=http://e]"


def test_access_requests_cannot_redraw_themselves(tmp_path: Path) -> None:
    data = tmp_path / "bb"
    now = datetime.now(UTC)
    requests = AccessRequests(data / "access" / "requests.json", grants=data / "grants.toml")
    requests.add(
        new_request(
            caller="reg\x1b]0;title\x07",
            scope="regulator",
            legal_basis="art. 72",
            reference="ref\r1",
            purpose=FORGE,
            now=now,
            agent="agt_all",
            since=now - timedelta(days=36_500),
            until=now,
        )
    )
    env = {"BLACKBOX_DATA_DIR": str(data)}
    shown = CliRunner().invoke(app, ["access", "requests"], env=env)
    assert shown.exit_code == 0, shown.output
    out = shown.stdout
    assert "\x1b" not in out and "\r" not in out and "\x07" not in out and "\u202e" not in out
    assert len(out.strip("\n").split("\n")) == 1  # one request, one line
    assert "agent agt_all" in out and "reg\\x1b]0;title\\x07" in out
    assert "audit\\x1b[1A\\x1b[2K\\rreq_0000 pending regulator dec_1 onlyU+202E [/x][link=http://e]" in out
    as_json = CliRunner().invoke(app, ["access", "requests", "--json"], env=env)
    assert "\u202e" not in as_json.stdout and json.loads(as_json.stdout)[0]["purpose"] == FORGE

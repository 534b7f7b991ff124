"""``personal_data = true`` in a grant: parsed, written back, and the only thing that lets a caller reveal."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from consumers.access.grants import Grant, Grants, append_grant
from consumers.access.scopes import Caller
from schemas.errors import ContractError

AT = datetime(2026, 8, 1, tzinfo=UTC)
REGULATOR = Caller(identity="fca", scope="regulator", reason="complaint 77")


def test_a_personal_data_grant_reveals_and_a_plain_one_does_not(tmp_path: Path) -> None:
    path = tmp_path / "grants.toml"
    append_grant(path, Grant(caller="fca", scope="regulator", agents=("agt_*",), purpose="review"))
    plain = Grants.load(path)
    assert plain.permits(REGULATOR, agent_id="agt_1", decision_id="dec_1", at=AT)
    assert not plain.reveals(REGULATOR, agent_id="agt_1", decision_id="dec_1", at=AT)

    append_grant(path, Grant(caller="fca", scope="regulator", agents=("agt_*",), personal_data=True))
    assert "personal_data = true" in path.read_text(encoding="utf-8")
    grants = Grants.load(path)
    assert grants.reveals(REGULATOR, agent_id="agt_1", decision_id="dec_1", at=AT)
    assert not grants.reveals(REGULATOR, agent_id="other", decision_id="dec_1", at=AT)
    assert not Grants.default().reveals(
        Caller(identity="ops", scope="operator", reason=""), agent_id="agt_1", decision_id="dec_1", at=AT
    )


def test_personal_data_must_be_a_boolean(tmp_path: Path) -> None:
    path = tmp_path / "grants.toml"
    path.write_text('[[grant]]\ncaller = "*"\nscope = "operator"\npersonal_data = "yes"\n', encoding="utf-8")
    with pytest.raises(ContractError, match=r"grant\[0\].personal_data: expected true or false"):
        Grants.load(path)

"""Personal data end to end, as a user runs it: record, ``consume``, ``show``, ``show --reveal``, ``erase``.

The issue, reproduced first: a decision recorded with ``ReplayPolicy(pii_redacted=True)`` and an
e-mail address in a memory entry came back from ``show --json`` verbatim. Now nothing stored holds
it (segments, index, spool), the redacted capture verifies, the original is revealed only under a
personal-data grant (logged either way), and erasure destroys it for good while ``verify`` passes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import zstandard
from typer.testing import CliRunner, Result

from consumers.cli import app
from consumers.index import TABLES, ChdbIndex
from consumers.retention.log import read_jsonl
from producers.config import ReplayPolicy
from producers.evidence import Signer
from producers.policy import CapturePolicy
from producers.recorder import Recorder
from producers.settings import load_settings
from schemas.errors import AccessDenied, BlackboxError, RetentionError

EMAIL = "jane.doe@example.com"
PHONE = "+44 20 7946 0958"
AGENT = "agt_support_1"


def _cli(env: dict[str, str], *args: str) -> Result:
    return CliRunner().invoke(app, list(args), env=env)


def _record(data: Path, signer: Signer, *customers: str) -> dict[str, str]:
    """One consequential support turn per customer, each with an e-mail address in a memory entry."""
    rec = Recorder.from_settings(
        load_settings(data_dir=data, transport="spool", blob="local"),
        agent_id=AGENT,
        signer=signer,
        policy=CapturePolicy(sample_one_in=0),
        replay_policy=ReplayPolicy(pii_redacted=True),
    )
    ids = {}
    for customer in customers:
        with rec.decision(
            request={"message": "refund please"}, origin_user_id=customer, consequential=True
        ) as d:
            d.configure(model="acme", system_prompt="You are Acme's support agent.", sampling={})
            d.add_memory(
                entry_id="mem_1", tier="hot", content=f"{customer} writes from {EMAIL}, phone {PHONE}"
            )
            d.render_context(user_message="Please refund the double charge.")
            d.finish(output="Refunded.", outcome="success")
        ids[customer] = d.decision_id
    assert rec.close(10)
    return ids


def _consume(env: dict[str, str]) -> None:
    consumed = _cli(env, "consume", "--drain", "--max-wait", "0.2")
    assert consumed.exit_code == 0, consumed.output


def _error(result: Result) -> str:
    """The one-line error ``blackbox`` prints (``consumers.cli.main``: a BlackboxError, exit 2)."""
    assert isinstance(result.exception, BlackboxError), result.output
    return str(result.exception)


def _show(env: dict[str, str], decision_id: str, *extra: str) -> dict[str, Any]:
    shown = _cli(env, "show", decision_id, "--json", *extra)
    assert shown.exit_code == 0, shown.output
    return json.loads(shown.stdout)


def _stored_bytes(data: Path) -> bytes:
    """Every byte at rest that is not the sealed original: segments (decompressed), spool, index files."""
    out = bytearray()
    for path in (data / "blobs").rglob("*"):
        if path.is_file() and "segments" in path.parts:
            with zstandard.ZstdDecompressor().stream_reader(path.read_bytes(), read_across_frames=True) as r:
                out += r.read()
    for path in (data / "spool").rglob("*"):
        if path.is_file():
            out += path.read_bytes()
    return bytes(out)


def _access_rows(index: ChdbIndex, action: str) -> list[dict[str, Any]]:
    return index.query(
        "SELECT caller, outcome, detail FROM access_log WHERE action = {a:String} ORDER BY at", {"a": action}
    )


def _grant_personal_data(data: Path) -> None:
    (data / "grants.toml").write_text(
        '[[grant]]\ncaller = "*"\nscope = "operator"\nagents = ["*"]\n'
        'purpose = "complaint 77"\npersonal_data = true\n',
        encoding="utf-8",
    )


@pytest.mark.timeout(240)
def test_personal_data_is_redacted_revealed_by_grant_and_erased(
    data: Path, signer: Signer, env: dict[str, str], index: ChdbIndex
) -> None:
    ids = _record(data, signer, "cus_jane", "cus_held")
    jane, held = ids["cus_jane"], ids["cus_held"]
    _consume(env)

    # the issue: show --json printed the e-mail verbatim; now the redacted view, verified
    view = _show(env, jane)
    assert view["verification"]["verdict"] == "verified"
    assert EMAIL not in json.dumps(view) and PHONE not in json.dumps(view)
    entry = view["capture"]["memoryState"]["workingSetEntries"][0]
    assert entry["renderedContent"] == "cus_jane writes from [EMAIL_1], phone [PHONE_1]"
    assert view["capture"]["replayPolicy"]["piiRedacted"] is True
    assert view["privacy"] | {"note": ""} == {
        "redactions": 4,  # the memory entry and the rendered context, e-mail and phone in each
        "kinds": ["EMAIL", "PHONE"],
        "original": "sealed",
        "view": "redacted",
        "note": "",
    }
    stored = _stored_bytes(data)
    assert b"[EMAIL_1]" in stored and EMAIL.encode() not in stored and PHONE.encode() not in stored
    for table in ("decisions", "memory_entries", "tool_calls"):
        assert EMAIL not in json.dumps(index.query(f"SELECT * FROM {table}"), default=str), table

    # reveal: refused without a personal-data grant, and the refusal is logged
    refused = _cli(env, "show", jane, "--json", "--reveal", "--reason", "curious")
    assert "personal_data = true" in _error(refused) and isinstance(refused.exception, AccessDenied)
    assert EMAIL not in refused.output
    assert [r["outcome"] for r in _access_rows(index, "reveal")] == ["denied"]

    _grant_personal_data(data)
    revealed = _show(env, jane, "--reveal", "--reason", "complaint 77")
    entry = revealed["capture"]["memoryState"]["workingSetEntries"][0]
    assert entry["renderedContent"] == f"cus_jane writes from {EMAIL}, phone {PHONE}"
    assert EMAIL in revealed["capture"]["renderedContext"]["text"]
    assert revealed["privacy"]["view"] == "original" and revealed["privacy"]["originalVerified"] is True
    assert [r["outcome"] for r in _access_rows(index, "reveal")] == ["denied", "allowed"]

    # a legal hold blocks erasure, and the command says so
    assert _cli(env, "hold", held, "--reason", "litigation 12").exit_code == 0
    blocked = _cli(env, "erase", "--decision", held, "--reason", "GDPR Art. 17, request 7")
    assert f"under legal hold: {held}" in _error(blocked) and isinstance(blocked.exception, RetentionError)
    assert "held  (under legal hold: litigation 12)" in blocked.output
    assert EMAIL in json.dumps(_show(env, held, "--reveal")["capture"])  # still there

    # erase: the original is gone everywhere at once; the evidence still verifies
    erased = _cli(env, "erase", "--subject", "cus_jane", "--reason", "GDPR Art. 17, request 7")
    assert erased.exit_code == 0 and f"{jane}  erased" in erased.output, erased.output
    after = _show(env, jane)
    assert after["verification"]["verdict"] == "verified"
    assert after["privacy"]["original"] == "erased"
    assert (
        after["privacy"]["note"].startswith("original erased on ") and "request 7" in after["privacy"]["note"]
    )
    verified = _cli(env, "verify", jane)
    assert verified.exit_code == 0 and verified.output.startswith(f"verified: {jane}"), verified.output
    assert "original erased on " in verified.output and "(GDPR Art. 17, request 7)" in verified.output
    still = _cli(env, "verify", held)  # not erased: nothing said about an original
    assert still.exit_code == 0 and "erased" not in still.output, still.output
    gone = _cli(env, "show", jane, "--json", "--reveal")
    assert "original erased on" in _error(gone)
    summary = _cli(env, "show", jane)
    assert "original erased on" in summary.output, summary.output

    # erase twice: a no-op, logged once
    again = _cli(env, "erase", "--decision", jane, "--reason", "GDPR Art. 17, request 7")
    assert again.exit_code == 0 and "already erased" in again.output
    log = [e for e in read_jsonl(data / "retention" / "deletions.jsonl") if e["decision_id"] == jane]
    assert [e["action"] for e in log] == ["erase", "erased"]
    assert log[0]["reason"] == "GDPR Art. 17, request 7" and log[0]["policy"] == "erasure"


def test_capture_command_redacts_before_sealing(data: Path, env: dict[str, str], tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[3] / "schemas" / "examples" / "capture.unsealed.json"
    capture = json.loads(example.read_text("utf-8"))
    capture["signature"]["publicKeyRef"] = None
    capture["memoryState"]["workingSetEntries"][0]["renderedContent"] = f"contact: {EMAIL}"
    capture["renderedContext"] = None
    path = tmp_path / "capture.json"
    path.write_text(json.dumps(capture), "utf-8")
    done = _cli(env, "capture", str(path))
    assert done.exit_code == 0, done.output
    _consume(env)
    view = _show(env, capture["decisionId"])
    assert view["verification"]["verdict"] == "verified"
    assert view["capture"]["memoryState"]["workingSetEntries"][0]["renderedContent"] == "contact: [EMAIL_1]"
    assert EMAIL not in json.dumps(view) and EMAIL.encode() not in _stored_bytes(data)
    assert view["privacy"]["original"] == "sealed"


def _replay(env: dict[str, str], decision_id: str, *extra: str) -> Result:
    import privacy_replay_model

    privacy_replay_model.SENT.clear()
    return _cli(
        env, "replay", decision_id, "--json", "--model-callable", "privacy_replay_model:answer", *extra
    )


def _sent() -> str:
    import privacy_replay_model

    assert privacy_replay_model.SENT, "nothing reached the model"
    return json.dumps(privacy_replay_model.SENT, ensure_ascii=False)


@pytest.mark.timeout(240)
def test_replay_uses_the_original_only_under_a_personal_data_grant_and_says_which_view(
    data: Path, signer: Signer, env: dict[str, str], index: ChdbIndex
) -> None:
    jane = _record(data, signer, "cus_jane")["cus_jane"]
    _consume(env)

    # by default: the redacted view, and the report says so
    default = _replay(env, jane)
    assert default.exit_code == 0, default.output
    report = json.loads(default.stdout)
    assert report["view"] == "redacted" and report["verified"] is True
    sent = _sent()
    assert "[EMAIL_1]" in sent and EMAIL not in sent and PHONE not in sent
    assert _access_rows(index, "reveal") == []
    table = _cli(env, "replay", jane, "--model-callable", "privacy_replay_model:answer")
    assert table.exit_code == 0 and "view: redacted (personal data replayed as placeholders" in table.output

    # --reveal without a personal-data grant: refused, logged, nothing sent
    refused = _replay(env, jane, "--reveal", "--reason", "curious")
    assert isinstance(refused.exception, AccessDenied) and "personal_data = true" in _error(refused)
    assert EMAIL not in refused.output
    assert [r["outcome"] for r in _access_rows(index, "reveal")] == ["denied"]

    # with the grant: the original, byte-exact (the request hashes checked against the revealed parts)
    _grant_personal_data(data)
    revealed = _replay(env, jane, "--reveal", "--reason", "complaint 77")
    assert revealed.exit_code == 0, revealed.output
    report = json.loads(revealed.stdout)
    assert report["view"] == "original" and report["verified"] is True
    assert report["requestChecks"] and all(c["ok"] for c in report["requestChecks"])
    sent = _sent()
    assert EMAIL in sent and PHONE in sent and "[EMAIL_1]" not in sent
    assert [r["outcome"] for r in _access_rows(index, "reveal")] == ["denied", "allowed"]

    # after erasure the original is gone: --reveal says so, the redacted replay still runs
    assert _cli(env, "erase", "--decision", jane, "--reason", "GDPR Art. 17").exit_code == 0
    assert "original erased on" in _error(_replay(env, jane, "--reveal"))
    assert json.loads(_replay(env, jane).stdout)["view"] == "redacted"


def _index_dump(index: ChdbIndex) -> str:
    """Every value of every index table, ``decisions.manifest_json`` included (its origin ids are
    keyed hashes, the originals sealed: :mod:`consumers.privacy.manifest`)."""
    return json.dumps([index.query(f"SELECT * FROM {t}") for t in TABLES], default=str, ensure_ascii=False)


@pytest.mark.timeout(240)
def test_the_index_holds_origin_ids_as_keyed_hashes(
    data: Path, signer: Signer, env: dict[str, str], index: ChdbIndex
) -> None:
    import hashlib
    import hmac

    ids = _record(data, signer, "cus_jane", "cus_john", "cus_jane")
    _consume(env)

    # no raw origin id and no personal data anywhere in the index; the key was created 0600 on first use
    dump = _index_dump(index)
    assert "cus_jane" not in dump and "cus_john" not in dump
    assert EMAIL not in dump and PHONE not in dump and "hmac:" in dump
    key_file = data / "index_id.key"
    assert key_file.stat().st_mode & 0o777 == 0o600
    want = "hmac:" + hmac.new(key_file.read_bytes(), b"cus_jane", hashlib.sha256).hexdigest()
    rows = index.query("SELECT decision_id, origin_user_id FROM decisions FINAL ORDER BY decision_id")
    assert len(rows) == 3  # two turns of cus_jane (``ids`` keeps the last), one of cus_john
    assert {r["decision_id"]: r["origin_user_id"] for r in rows}[ids["cus_jane"]] == want
    assert all(r["origin_user_id"].startswith("hmac:") for r in rows)

    # equal ids still group (the same person, the same hash); trends run
    grouped = index.query("SELECT origin_user_id, count() AS n FROM decisions FINAL GROUP BY origin_user_id")
    assert sorted(r["n"] for r in grouped) == [1, 2]
    trend = _cli(env, "trends", "failure_rate", "--since", "3650d", "--json")
    assert trend.exit_code == 0 and sum(r["decisions"] for r in json.loads(trend.stdout)) == 3, trend.output

    # the stored capture still verifies against its index row (the hashes are checked under the key)
    verified = _cli(env, "verify", ids["cus_john"])
    assert verified.exit_code == 0, verified.output

    # erase --subject hashes the subject the same way and finds the decision
    erased = _cli(env, "erase", "--subject", "cus_jane", "--reason", "GDPR Art. 17")
    assert erased.exit_code == 0 and f"{ids['cus_jane']}  erased" in erased.output, erased.output
    assert erased.output.count("  erased") == 2 and ids["cus_john"] not in erased.output


def test_raw_index_ids_are_an_opt_out(
    data: Path, signer: Signer, env: dict[str, str], index: ChdbIndex
) -> None:
    ids = _record(data, signer, "cus_jane")
    _consume(env | {"BLACKBOX_INDEX_RAW_IDS": "true"})
    rows = index.query("SELECT origin_user_id FROM decisions FINAL")
    assert [r["origin_user_id"] for r in rows] == ["cus_jane"]
    assert not (data / "index_id.key").exists()
    assert _cli(env, "verify", ids["cus_jane"]).exit_code == 0  # a raw row checks as before
    erased = _cli(env, "erase", "--subject", "cus_jane", "--reason", "GDPR Art. 17")  # hashed or raw: found
    assert f"{ids['cus_jane']}  erased" in erased.output, erased.output

"""Nothing outlives retention or erasure (issue 24, item 4): every file under the data directory is read
back - zstd segments decompressed, Avro spool files decoded - and searched for what was deleted."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from privacy_data_files import every_byte_under
from typer.testing import CliRunner, Result

from consumers.app.runtime import open_runtime
from consumers.app.settings import load_service_settings
from consumers.audit import create_app
from consumers.cli import app
from consumers.index import TABLES, ChdbIndex
from consumers.privacy.ids import IndexIds
from consumers.retention.log import read_jsonl
from consumers.web.server import WebServer
from producers.config import ReplayPolicy
from producers.evidence import Signer
from producers.policy import CapturePolicy
from producers.privacy.identifiers import is_commitment
from producers.recorder import Recorder
from producers.settings import load_settings
from producers.transports.spool.files import read_spool_file, spool_files

SECRET_TEXT = "the launch code is 7401-ALPHA"


def _cli(env: dict[str, str], *args: str) -> Result:
    return CliRunner().invoke(app, list(args), env=env)


def _record_routine(data: Path, signer: Signer) -> str:
    """One routine (not consequential) decision, captured in full, its text in the output."""
    rec = Recorder.from_settings(
        load_settings(data_dir=data, transport="spool", blob="local"),
        agent_id="agt_ops",
        signer=signer,
        policy=CapturePolicy(sample_one_in=1),
        replay_policy=ReplayPolicy(pii_redacted=False),
    )
    with rec.decision(request={"message": "status?"}) as d:
        d.configure(model="acme", system_prompt="You are the ops agent.", sampling={})
        d.render_context(user_message="What is the status?")
        d.finish(output=SECRET_TEXT, outcome="success")
    assert rec.close(10)
    return d.decision_id


@pytest.mark.timeout(240)
def test_a_spool_file_of_an_expired_capture_is_gone_after_compact(
    data: Path, signer: Signer, env: dict[str, str], index: ChdbIndex
) -> None:
    decision_id = _record_routine(data, signer)
    spool = data / "spool"
    (published,) = spool_files(spool)
    assert any(SECRET_TEXT.encode() in r.value for r in read_spool_file(spool / published))
    # what an older release left: consumed files moved to spool/consumed/ and kept forever
    (spool / "consumed").mkdir()
    shutil.copy2(spool / published, spool / "consumed" / published)

    consumed = _cli(env, "consume", "--drain", "--max-wait", "0.2")
    assert consumed.exit_code == 0 and "indexed=1" in consumed.output, consumed.output
    assert spool_files(spool) == []  # ingest deletes a consumed file once its capture is durable
    assert [p.name for p in (spool / "consumed").iterdir()] == [published]  # only the old copy

    later = (datetime.now(UTC) + timedelta(days=400)).strftime("%Y-%m-%dT%H:%M:%SZ")
    compacted = _cli(env, "compact", "--as-of", later, "--json")
    assert compacted.exit_code == 0, compacted.output
    summary = json.loads(compacted.stdout)
    assert summary["expired"] == 1 and summary["spool_files_deleted"] == 1, summary
    assert list((spool / "consumed").iterdir()) == []
    log = read_jsonl(data / "retention" / "deletions.jsonl")
    spool_entries = [(e["action"], e["segment_key"]) for e in log if e["segment_key"].startswith("spool:")]
    assert spool_entries == [
        ("delete-spool", f"spool:consumed/{published}"),
        ("spool-deleted", f"spool:consumed/{published}"),
    ]
    assert any(e["action"] == "expire" and e["decision_id"] == decision_id for e in log)
    # the expired capture's text is nowhere under the data directory any more
    assert SECRET_TEXT.encode() not in every_byte_under(data)
    again = json.loads(_cli(env, "compact", "--as-of", later, "--json").stdout)
    assert again["spool_files_deleted"] == 0


USER = "cus_jane_7731"
SESSION = "sess_jane_0042"
EMAIL = "jane.doe@example.com"


def _record_person(data: Path, signer: Signer, user: str, session: str, *, consequential: bool) -> str:
    """One decision about ``user``: an e-mail address in its content, the person named by id and session."""
    rec = Recorder.from_settings(
        load_settings(data_dir=data, transport="spool", blob="local"),
        agent_id="agt_support_1",
        signer=signer,
        policy=CapturePolicy(sample_one_in=0),  # a routine turn is structured-only: no sealed original
    )
    with rec.decision(
        request={"message": "refund please"},
        origin_user_id=user,
        origin_session_id=session,
        consequential=consequential,
    ) as d:
        d.configure(model="acme", system_prompt="You are Acme's support agent.", sampling={})
        d.add_memory(entry_id="mem_1", tier="hot", content=f"the customer writes from {EMAIL}")
        d.render_context(user_message="Please refund the double charge.")
        d.finish(output="Refunded.", outcome="success")
    assert rec.close(10)
    return d.decision_id


def _index_text(index: ChdbIndex) -> str:
    return json.dumps([index.query(f"SELECT * FROM {t}") for t in TABLES], default=str)


@pytest.mark.timeout(300)
def test_an_erased_subject_is_found_nowhere_under_the_data_directory_and_the_evidence_verifies(
    data: Path, signer: Signer, env: dict[str, str], index: ChdbIndex
) -> None:
    full = _record_person(data, signer, USER, SESSION, consequential=True)
    routine = _record_person(data, signer, USER, SESSION, consequential=False)
    other = _record_person(data, signer, "cus_john_1", "sess_john_1", consequential=True)
    # before anything is consumed, the spool holds neither the raw ids nor the e-mail: only commitments
    spooled = every_byte_under(data)
    for raw in (USER, SESSION, EMAIL):
        assert raw.encode() not in spooled, raw
    consumed = _cli(env, "consume", "--drain", "--max-wait", "0.2")
    assert consumed.exit_code == 0 and "indexed=3" in consumed.output, consumed.output

    shown = json.loads(_cli(env, "show", full, "--json").stdout)
    assert shown["verification"]["verdict"] == "verified"
    signed_user = shown["capture"]["input"]["originUserId"]
    assert is_commitment(signed_user) and is_commitment(shown["capture"]["input"]["originSessionId"])
    # lookups by person still work: the index holds its keyed hash of the raw id, found by erase --subject
    hashed = {r["decision_id"]: r["origin_user_id"] for r in index.query("SELECT * FROM decisions FINAL")}
    key = IndexIds((data / "index_id.key").read_bytes())
    assert hashed[full] == hashed[routine] == key.of(USER) and hashed[other] == key.of("cus_john_1")
    # a personal-data grant reveals the raw id (checked against its commitment) until the erasure
    (data / "grants.toml").write_text(
        '[[grant]]\ncaller = "*"\nscope = "operator"\nagents = ["*"]\npurpose = "DSAR 9"\n'
        "personal_data = true\n",
        encoding="utf-8",
    )
    revealed = json.loads(_cli(env, "show", full, "--json", "--reveal", "--reason", "DSAR 9").stdout)
    assert revealed["capture"]["input"]["originUserId"] == USER
    assert revealed["capture"]["input"]["originSessionId"] == SESSION

    erased = _cli(env, "erase", "--subject", USER, "--reason", "GDPR Art. 17, request 12")
    assert erased.exit_code == 0, erased.output
    assert f"{full}  erased" in erased.output and f"{routine}  erased" in erased.output
    assert other not in erased.output

    # every file under the data directory, segments decompressed and spool files decoded: nothing
    everything = every_byte_under(data)
    for raw in (USER, SESSION, EMAIL):
        assert raw.encode() not in everything, raw
        assert raw not in _index_text(index), raw
    assert b"cus_john_1" not in everything  # never there in the clear either
    for decision_id in (full, routine, other):
        after = _cli(env, "show", decision_id, "--json")
        assert after.exit_code == 0 and USER not in after.stdout and SESSION not in after.stdout
        assert json.loads(after.stdout)["verification"]["verdict"] == "verified"
        verified = _cli(env, "verify", decision_id)
        assert verified.exit_code == 0 and verified.output.startswith(f"verified: {decision_id}"), (
            verified.output
        )
    gone = _cli(env, "show", full, "--json", "--reveal", "--reason", "DSAR 9")
    assert gone.exit_code != 0 and "original erased on" in str(gone.exception)
    # the audit API shows the commitment, not the raw id
    token = _cli(env, "access", "token", "create", "--caller", "auditor", "--scope", "operator")
    assert token.exit_code == 0, token.output
    settings = load_service_settings(data_dir=data, chdb_path=Path(env["BLACKBOX_CHDB_PATH"]))
    with (
        open_runtime(settings, existing_index=True) as rt,
        WebServer(create_app(rt)) as server,
        httpx.Client(base_url=server.url, timeout=30) as client,
    ):
        answer = client.get(
            f"/v1/decisions/{full}", headers={"Authorization": f"Bearer {token.stdout.split()[0]}"}
        )
    assert answer.status_code == 200, answer.text
    assert answer.json()["capture"]["input"]["originUserId"] == signed_user and USER not in answer.text

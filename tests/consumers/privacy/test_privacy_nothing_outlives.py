"""Nothing outlives retention or erasure (issue 24, item 4): every file under the data directory is read
back - zstd segments decompressed, Avro spool files decoded - and searched for what was deleted."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from privacy_data_files import every_byte_under
from typer.testing import CliRunner, Result

from consumers.cli import app
from consumers.index import ChdbIndex
from consumers.retention.log import read_jsonl
from producers.config import ReplayPolicy
from producers.evidence import Signer
from producers.policy import CapturePolicy
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

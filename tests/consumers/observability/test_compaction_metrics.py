"""``blackbox compact --metrics-textfile`` (node-exporter textfile) and ``--log-format json``."""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path

from observed import GOOD, run_cli, samples, write_spool

from consumers.observability.logs import JsonFormatter
from consumers.observability.metrics import deletion_kind
from consumers.retention.log import read_jsonl


def test_compact_writes_its_deletions_to_a_textfile_and_logs_json(tmp_path: Path) -> None:
    data = tmp_path / "bb"
    write_spool(data)
    consumed = run_cli(["consume", "--drain", "--max-wait", "0.1"], data)
    assert consumed.returncode == 0, consumed.stderr
    textfiles = tmp_path / "textfiles"
    textfiles.mkdir()
    prom = textfiles / "blackbox_compact.prom"

    dry = run_cli(
        ["compact", "--as-of", "2026-09-01T00:00:00Z", "--dry-run", "--metrics-textfile", str(prom)], data
    )
    assert dry.returncode == 0, dry.stderr
    assert not prom.exists()  # a dry run deletes nothing and does not pose as a run

    run = run_cli(
        [
            "compact",
            "--as-of",
            "2026-09-01T00:00:00Z",
            "--json",
            "--log-format",
            "json",
            "--metrics-textfile",
            str(prom),
        ],
        data,
    )
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    values = samples(prom.read_text())
    deletions = {
        dict(labels)["kind"]: v
        for (name, labels), v in values.items()
        if name == "blackbox_compaction_deletions_total"
    }
    assert deletions["compact"] == GOOD == summary["compacted"]  # the routine captures lost their content
    assert deletions["segment"] >= 1
    logged = Counter(
        kind
        for e in read_jsonl(data / "retention" / "deletions.jsonl")
        if (kind := deletion_kind(e["action"]))
    )
    assert deletions == dict(logged)  # exactly what the retention log says was deleted
    assert values[("blackbox_compaction_errors", ())] == 0
    assert values[("blackbox_compaction_last_run_timestamp_seconds", ())] > 0
    assert sorted(p.name for p in textfiles.iterdir()) == [prom.name]  # written by rename: no temp file left

    lines = [json.loads(line) for line in run.stderr.splitlines()]  # JSON only: no progress bar on stderr
    finished = [line for line in lines if line["message"] == "compaction finished"]
    assert (
        finished
        and finished[0]["summary"]["compacted"] == GOOD
        and finished[0]["logger"].startswith("consumers.")
    )


def test_deletion_kinds() -> None:
    kinds = {a: deletion_kind(a) for a in ("compact", "expire", "quarantine-expire", "segment-deleted")}
    assert kinds == {
        "compact": "compact",
        "expire": "expire",
        "quarantine-expire": "quarantine-expire",
        "segment-deleted": "segment",
    }
    assert [deletion_kind(a) for a in ("delete-segment", "delete-claim", "promote", "hold", "move")] == [
        None
    ] * 5
    assert deletion_kind("claim-deleted") == "claim" and deletion_kind("orphan-deleted") == "orphan"


def test_json_log_lines_carry_structured_fields_and_exceptions() -> None:
    record = logging.LogRecord("consumers.x", logging.WARNING, __file__, 1, "batch of %d failed", (4,), None)
    record.partition = 3
    line = json.loads(JsonFormatter().format(record))
    assert (
        line["level"] == "warning"
        and line["logger"] == "consumers.x"
        and line["message"] == "batch of 4 failed"
    )
    assert line["partition"] == 3 and line["ts"].endswith("+00:00")
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    assert "ValueError: boom" in json.loads(JsonFormatter().format(record))["exception"]

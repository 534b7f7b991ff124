"""Erasure in batches: logged before it happens, per chunk; a crash mid-way is finished by the rerun.

(``tests/benchmarks/bench_erasure.py`` times 10,000 decisions of one subject.)
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from consumers.index import ChdbIndex, decision_rows, insert_rows
from consumers.privacy.ids import IndexIds
from consumers.retention import erasure
from consumers.retention.erasure import Eraser
from consumers.retention.log import DeletionLog, read_jsonl
from producers.blobstore import LocalBlobStore
from producers.privacy.keys import DataKeyRecord, DataKeyStore

ROOT = Path(__file__).resolve().parents[3]
IDS = IndexIds(b"k" * 32)
AT = datetime(2030, 1, 1, tzinfo=UTC)


class FailingPuts(LocalBlobStore):
    """A blob store whose tombstone writes fail after ``budget`` of them (a crash mid-chunk)."""

    budget: int | None = None

    def put(self, key: str, data: bytes, **kw: object) -> None:
        if self.budget is not None and b"erasedAt" in data:
            if self.budget == 0:
                raise OSError("disk gone")
            self.budget -= 1
        super().put(key, data)


def _world(index: ChdbIndex, keys: DataKeyStore, n: int) -> list[str]:
    template = decision_rows(
        json.loads((ROOT / "schemas/examples/capture.unsealed.json").read_text())
    ).decision
    dids = [f"dec_{i:03d}" for i in range(n)]
    rows = [dict(template, decision_id=d, origin_user_id=IDS.of("cus_jane")) for d in dids]
    rows[1].update(legal_hold=True, hold_reason="litigation 3")
    insert_rows(index, "decisions", rows)
    for d in dids[:-1]:  # the last one had nothing redacted: no key
        keys.put(DataKeyRecord(decision_id=d, kek_id="local:t", wrapped=b"\x01" * 60))
    return dids


def test_a_crash_mid_erasure_is_finished_by_the_rerun(
    index: ChdbIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(erasure, "CHUNK", 2)
    store = FailingPuts(tmp_path / "blobs")
    keys = DataKeyStore(store)
    dids = _world(index, keys, 8)
    log_path = tmp_path / "deletions.jsonl"
    eraser = Eraser(index=index, keys=keys, log=DeletionLog(index, log_path), ids=IDS, clock=lambda: AT)
    assert eraser.decisions_of("cus_jane") == dids

    store.budget = 3  # the first chunk is erased, the second dies after one key
    with pytest.raises(OSError, match="disk gone"):
        eraser.erase(dids, reason="GDPR Art. 17")
    logged = Counter((e["decision_id"], e["action"]) for e in read_jsonl(log_path))
    # every destroyed key was logged before; the third chunk was never started, so never logged
    for d in dids:
        record = keys.get(d)
        if record is not None and record.erased:
            assert logged[(d, "erase")] == 1, d
    assert not any(d in (dids[5], dids[6]) for d, _ in logged)

    store.budget = None
    results = {r.decision_id: r for r in eraser.erase(dids, reason="GDPR Art. 17")}
    assert results[dids[1]].outcome == "held" and "litigation 3" in results[dids[1]].detail
    assert results[dids[-1]].outcome == "no original"
    erased = [d for d in dids if d not in (dids[1], dids[-1])]
    assert all(keys.get(d).erased for d in erased)  # type: ignore[union-attr]
    assert not keys.get(dids[1]).erased  # type: ignore[union-attr]
    log = read_jsonl(log_path)
    actions = Counter((e["decision_id"], e["action"]) for e in log)
    for d in erased:  # no gap: each erased key has its write-ahead entry and its confirmation
        assert actions[(d, "erase")] >= 1 and actions[(d, "erased")] == 1, d
    assert {e["entry_id"] for e in log if e["action"] == "erase"} == {
        e["entry_id"] for e in log if e["action"] == "erase" and e["decision_id"] in erased
    }
    table = index.query("SELECT count() AS n FROM deletions WHERE action = 'erased'")
    assert table[0]["n"] == len(erased)

    again = eraser.erase(dids, reason="GDPR Art. 17")
    assert Counter(r.outcome for r in again) == {"already erased": 6, "held": 1, "no original": 1}
    assert len(read_jsonl(log_path)) == len(log)  # nothing left to do, nothing logged

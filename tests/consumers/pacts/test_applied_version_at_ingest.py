"""The applied pact version judges ingest: each ``pact_violations`` row names it, a newly applied one
judges the next batch, and the per-batch check reloads only when the shared pointer changes. With the
transparency log on, the pointer is obeyed only as the log's latest apply: one rolled back to an older
signed version, or written by hand, is not."""

from __future__ import annotations

import json
import logging
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pact_world import blackbox, record
from test_pact_versions import _operator, _propose

from consumers.app.settings import load_service_settings
from consumers.index import ChdbIndex, chdb_open_path
from consumers.pacts.applied import AppliedPactSource
from consumers.pacts.bundle import logged_leaf
from consumers.pacts.logged import InForce, in_force
from consumers.pacts.versions import APPLIED_KEY, AppliedPointer, signed_envelope, write_applied
from consumers.tlog.entries import PACT_LEAF_TYPE, pact_entry_key
from consumers.tlog.store import LeafRow, insert_leaves
from producers.blobstore import LocalBlobStore
from producers.evidence import TrustStore
from producers.evidence.canonical import canonical_json

# 'decision.id == ""' never holds: every decision of a bound agent violates it, so rows = decisions.
ALWAYS = """agents = ["{agents}"]

[pact.{name}]
rule = 'decision.id == ""'
"""


def _apply(env: dict[str, str], version: str) -> bytes:
    """Apply through ``blackbox pact apply`` (gate forced, logged); the shared pointer's bytes after it."""
    blackbox(["pact", "apply", version, "--force", "--reason", "test"], env=env)
    return LocalBlobStore(Path(env["BLACKBOX_DATA_DIR"]) / "blobs").get(APPLIED_KEY)


def _point(data: Path, version: str) -> None:
    """Move the shared pointer by hand (no gate, no log)."""
    write_applied(
        LocalBlobStore(data / "blobs"),
        AppliedPointer(
            version=version, applied_at=datetime.now(UTC), applied_by="test", reason="t", forced=True, gate=""
        ),
    )


def _two_versions(tmp_path: Path, agents: str) -> tuple[Path, dict[str, str], str, str]:
    """A data directory with an operator and two proposed versions ("first", "second") binding ``agents``."""
    data = tmp_path / "data"
    data.mkdir()
    env = _operator(data)
    v1 = _propose(env, tmp_path, ALWAYS.format(agents=agents, name="first"), "v1")
    v2 = _propose(env, tmp_path, ALWAYS.format(agents=agents, name="second"), "v2")
    return data, env, v1, v2


def _rows(env: dict[str, str]) -> list[dict[str, str]]:
    sql = "SELECT decision_id, rule, pact_version FROM pact_violations FINAL WHERE kind = 'violation'"
    return json.loads(blackbox(["query", sql, "--json"], env=env).stdout)


def test_each_violation_names_the_applied_version_that_judged_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    env = _operator(data)
    v1 = _propose(env, tmp_path, ALWAYS.format(agents="agt_support", name="first"), "v1")
    v2 = _propose(env, tmp_path, ALWAYS.format(agents="agt_supp*", name="second"), "v2")
    elsewhere = _propose(env, tmp_path, ALWAYS.format(agents="agt_billing", name="third"), "v3")

    _apply(env, v1)
    first = {r.decision_id for r in record(data, decisions=12, days=1)}
    blackbox(["consume", "--drain"], env=env)
    rows = _rows(env)
    assert {r["decision_id"] for r in rows} == first
    assert {(r["rule"], r["pact_version"]) for r in rows} == {("first", v1)}

    _apply(env, v2)
    second = {r.decision_id for r in record(data, decisions=12, days=1)}
    blackbox(["consume", "--drain"], env=env)
    new = [r for r in _rows(env) if r["decision_id"] in second]
    assert {r["decision_id"] for r in new} == second
    assert {(r["rule"], r["pact_version"]) for r in new} == {("second", v2)}

    _apply(env, elsewhere)  # binds another agent: agt_support's decisions are not judged
    third = {r.decision_id for r in record(data, decisions=6, days=1)}
    blackbox(["consume", "--drain"], env=env)
    assert not [r for r in _rows(env) if r["decision_id"] in third]


def test_the_source_reloads_only_a_changed_pointer_and_keeps_a_good_version(tmp_path: Path) -> None:
    data, _, v1, v2 = _two_versions(tmp_path, "*")
    store = LocalBlobStore(data / "blobs")
    trust = TrustStore.load(load_service_settings(data_dir=data).resolved_trust_store)
    source = AppliedPactSource(store, trust=trust)
    assert source().version == "" and not source().book  # nothing applied, no local file

    _point(data, v1)
    assert source().version == v1 and [r.name for r in source().book] == ["first"]
    assert source.loads == 1  # the unchanged pointer was not reloaded on the second call

    _point(data, v2)  # applied while the same source keeps running: the next call judges by it
    assert source().version == v2 and source.loads == 2

    bogus = "pv_" + "0" * 24  # a pointer to a version that does not exist: refused, v2 stays
    store.put(
        "pacts/applied.json", json.dumps({"version": bogus, "appliedAt": "2026-12-04T00:00:00Z"}).encode()
    )
    assert source().version == v2 and source.loads == 2


def test_a_rolled_back_pointer_is_not_obeyed(tmp_path: Path) -> None:
    data, env, v1, v2 = _two_versions(tmp_path, "agt_support")
    store = LocalBlobStore(data / "blobs")
    first_pointer = _apply(env, v1)
    _apply(env, v2)

    # someone with write access to the bucket puts v1's old pointer back (a validly signed, laxer version)
    store.put(APPLIED_KEY, first_pointer)
    rolled_back = {r.decision_id for r in record(data, decisions=6, days=1)}
    out = blackbox(["consume", "--drain"], env=env)
    judged = {(r["rule"], r["pact_version"]) for r in _rows(env) if r["decision_id"] in rolled_back}
    assert judged == {("second", v2)}, judged  # the log's latest apply judged, not the pointer
    assert "not obeyed" in out.stdout + out.stderr and v2 in out.stdout + out.stderr
    # a pointer that was never logged, or edited: test_the_check_reads_the_logs_pact_leaves_only


def test_the_check_reads_the_logs_pact_leaves_only(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A capture names its own decision id, so one can be keyed like an apply (``pact:<v>@<at>``) and
    even carry the pact leaf's type text inside it: the check still finds the log's real latest apply."""
    data, _, v1, v2 = _two_versions(tmp_path, "*")
    store = LocalBlobStore(data / "blobs")
    first, second = (
        AppliedPointer(
            version=v,
            applied_at=datetime(2026, 12, 1, hour, tzinfo=UTC),
            applied_by="ops",
            reason="r",
            forced=True,
            gate="",
        ).to_json()
        for hour, v in ((1, v1), (2, v2))
    )
    at = datetime(2026, 12, 1, tzinfo=UTC)
    mimic = pact_entry_key(v1, first["appliedAt"])
    planted = canonical_json(
        {"decisionId": f'{mimic}"type":"{PACT_LEAF_TYPE}"', "type": "blackbox.tlog.capture/v1"}
    )
    index = ChdbIndex(Path(chdb_open_path() or tmp_path / "chdb"), database=f"t_{uuid.uuid4().hex[:12]}")
    try:
        index.ensure_schema()
        empty = in_force(index, store, second)
        assert empty.version is None and empty.refused is not None and "holds no apply" in empty.refused
        insert_leaves(
            index,
            [
                *(
                    LeafRow(
                        i,
                        pact_entry_key(p["version"], p["appliedAt"]),
                        at,
                        logged_leaf(signed_envelope(store, p["version"]), p),
                        at,
                    )
                    for i, p in enumerate((first, second))
                ),
                LeafRow(2, mimic, at, planted, at),  # appended after both applies
            ],
        )
        assert in_force(index, store, second) == InForce(v2, None)
        rolled_back = in_force(index, store, first)
        assert (
            rolled_back.version == v2
            and rolled_back.refused is not None
            and "rolled-back" in rolled_back.refused
        )
        edited = in_force(index, store, {**second, "appliedBy": "someone else"})  # not the logged record
        assert edited.version == v2 and edited.refused is not None
        unknown = in_force(index, store, {**second, "version": "pv_" + "0" * 24})
        assert unknown.version == v2 and unknown.refused is not None and "no pact version" in unknown.refused

        # the source judges by the log's latest apply, and the pointer's text reaches the log escaped
        trust = TrustStore.load(load_service_settings(data_dir=data).resolved_trust_store)
        source = AppliedPactSource(store, trust=trust, in_force=lambda p: in_force(index, store, p))
        store.put(APPLIED_KEY, json.dumps({**first, "version": "pv_\n\x1b[2Jforged"}).encode())
        with caplog.at_level(logging.ERROR, logger="consumers.pacts.applied"):
            assert source().version == v2
        logged = "\n".join(r.getMessage() for r in caplog.records)
        assert "not obeyed" in logged and "\x1b" not in logged
    finally:
        index.command(f"DROP DATABASE IF EXISTS {index.database} SYNC")
        index.close()

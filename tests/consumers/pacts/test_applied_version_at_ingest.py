"""The applied pact version judges ingest: each ``pact_violations`` row names it, a newly applied one
judges the next batch, and the per-batch check reloads only when the shared pointer changes."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from pact_world import blackbox, record
from test_pact_versions import _operator, _propose

from consumers.app.settings import load_service_settings
from consumers.pacts.applied import AppliedPactSource
from consumers.pacts.versions import AppliedPointer, write_applied
from producers.blobstore import LocalBlobStore
from producers.evidence import TrustStore

# 'decision.id == ""' never holds: every decision of a bound agent violates it, so rows = decisions.
ALWAYS = """agents = ["{agents}"]

[pact.{name}]
rule = 'decision.id == ""'
"""


def _apply(data: Path, version: str) -> None:
    write_applied(
        LocalBlobStore(data / "blobs"),
        AppliedPointer(
            version=version, applied_at=datetime.now(UTC), applied_by="test", reason="t", forced=True, gate=""
        ),
    )


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

    _apply(data, v1)
    first = {r.decision_id for r in record(data, decisions=12, days=1)}
    blackbox(["consume", "--drain"], env=env)
    rows = _rows(env)
    assert {r["decision_id"] for r in rows} == first
    assert {(r["rule"], r["pact_version"]) for r in rows} == {("first", v1)}

    _apply(data, v2)
    second = {r.decision_id for r in record(data, decisions=12, days=1)}
    blackbox(["consume", "--drain"], env=env)
    new = [r for r in _rows(env) if r["decision_id"] in second]
    assert {r["decision_id"] for r in new} == second
    assert {(r["rule"], r["pact_version"]) for r in new} == {("second", v2)}

    _apply(data, elsewhere)  # binds another agent: agt_support's decisions are not judged
    third = {r.decision_id for r in record(data, decisions=6, days=1)}
    blackbox(["consume", "--drain"], env=env)
    assert not [r for r in _rows(env) if r["decision_id"] in third]


def test_the_source_reloads_only_a_changed_pointer_and_keeps_a_good_version(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    env = _operator(data)
    v1 = _propose(env, tmp_path, ALWAYS.format(agents="*", name="first"), "v1")
    v2 = _propose(env, tmp_path, ALWAYS.format(agents="*", name="second"), "v2")
    store = LocalBlobStore(data / "blobs")
    trust = TrustStore.load(load_service_settings(data_dir=data).resolved_trust_store)
    source = AppliedPactSource(store, trust=trust)
    assert source().version == "" and not source().book  # nothing applied, no local file

    _apply(data, v1)
    assert source().version == v1 and [r.name for r in source().book] == ["first"]
    assert source.loads == 1  # the unchanged pointer was not reloaded on the second call

    _apply(data, v2)  # applied while the same source keeps running: the next call judges by it
    assert source().version == v2 and source.loads == 2

    bogus = "pv_" + "0" * 24  # a pointer to a version that does not exist: refused, v2 stays
    store.put(
        "pacts/applied.json", json.dumps({"version": bogus, "appliedAt": "2026-12-04T00:00:00Z"}).encode()
    )
    assert source().version == v2 and source.loads == 2

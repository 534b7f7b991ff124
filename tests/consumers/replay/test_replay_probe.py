"""Probing: generated variants replayed in the sandbox, summarised as the failure boundary."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from replay_scripted import WORKING_SET_LIMIT, system_prompt

from consumers.pacts import Rule
from consumers.replay import ListReplayRunLog, Replayer
from consumers.replay.checks import checks_of
from consumers.replay.memory_variation import format_size
from consumers.replay.probe import InvalidSweep, Judge, parse_sweep, probe
from consumers.replay.variation import InvalidVariation
from consumers.replay.versions import StaticVersionCatalog

VERSIONS = StaticVersionCatalog({"system_prompt": {v: system_prompt(v) for v in ("v4.5", "v4.6", "v4.7")}})


def _now() -> datetime:
    return datetime.now(UTC)


def test_a_working_set_sweep_finds_the_boundary_within_one_step(
    make_replayer: Callable[..., Replayer],
) -> None:
    replayer = make_replayer()
    prepared = replayer.prepare("dec_golden_identical")
    axes = [
        parse_sweep("memory.truncate=0..12KB/1KB", prepared=prepared),
        parse_sweep("system_prompt=versions", prepared=prepared, versions=VERSIONS),
    ]
    log = ListReplayRunLog()
    result = probe(replayer, prepared, axes, judge=Judge(failed=True), on_rows=log.append, clock=_now)

    by_series = {b.series: b for b in result.boundaries}
    v47 = by_series["v4.7"]
    assert v47.kind == "above"
    assert v47.passes_up_to is not None and v47.fails_from is not None
    assert v47.passes_up_to <= WORKING_SET_LIMIT < v47.fails_from
    assert v47.fails_from - v47.passes_up_to <= 1024 + 1100  # one step, at most one ~1 KB entry more
    assert by_series["v4.5"].kind == by_series["v4.6"].kind == "never"
    assert result.summary.startswith("fails when the working set exceeds ")
    assert result.summary.endswith(
        f"with v4.7 (not at {format_size(v47.passes_up_to)}, fails from {format_size(v47.fails_from)}); "
        "never fails with v4.5, v4.6 (0 B … 11.0 KB)"
    )
    # Points whose request comes out identical are replayed once: 13 sizes give 11 distinct working sets.
    assert result.replays < 1 + 13 * 3
    assert len(log.rows) == 13 * 3 and {r.kind for r in log.rows} == {"probe"}
    point = json.loads(log.rows[0].probe_point)
    assert point["variable"] == "memory.truncate" and point["series"] == "v4.5" and point["measure"] == 0
    assert json.loads(json.dumps(result.to_json()))["boundaries"][2]["failsFrom"] == v47.fails_from


def test_dropping_each_entry_and_judging_by_a_pact(make_replayer: Callable[..., Replayer]) -> None:
    replayer = make_replayer()
    prepared = replayer.prepare("dec_golden_identical")
    refund_rule = Rule(
        name="refund_within_disputed_charge",
        source='decision.tool_calls.filter(t, t.name == "issue_refund").all(t, t.input.amount <= '
        'decision.tool_calls.filter(l, l.name == "lookup_customer")[0].output.disputed_charge)',
    )
    result = probe(
        replayer,
        prepared,
        [parse_sweep("memory.drop=each", prepared=prepared)],
        judge=Judge(checks=checks_of([refund_rule])),
        clock=_now,
    )
    # Ten ~1 KB entries make ~10 KB: dropping any one leaves more than 8 KB, so the pact still fails.
    assert [p.state for p in result.points] == ["hit"] * 10
    assert result.summary == "fails with every value of memory.drop tried (10 values)"


def test_paraphrases_from_a_file(make_replayer: Callable[..., Replayer], tmp_path: Path) -> None:
    replayer = make_replayer()
    prepared = replayer.prepare("dec_golden_identical")
    lines = tmp_path / "paraphrases.txt"
    lines.write_text(
        "Hi, I'm cus_0042. I was charged twice last week - please refund the duplicate.\n\n"
        "cus_0042 here: refund the double charge from last week please\n",
        encoding="utf-8",
    )
    result = probe(
        replayer,
        prepared,
        [parse_sweep(f"request=@{lines}", prepared=prepared)],
        judge=Judge(failed=True),
        clock=_now,
    )
    assert len(result.points) == 2 and all(p.state == "hit" for p in result.points)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("memory.truncate=16KB..0/1KB", "A <= B"),
        ("memory.truncate=0..16KB", "A..B/STEP"),
        ("system_prompt=each", "'each' sweeps memory.drop or memory.tier"),
        ("model=versions", "'versions' sweeps system_prompt or tool_schema"),
        ("model=0..3/1", "a numeric range sweeps"),
        ("external_state.customer.balance.balance=0..1000000/1", "at most 1000"),
    ],
)
def test_bad_sweeps_are_refused(make_replayer: Callable[..., Replayer], spec: str, message: str) -> None:
    prepared = make_replayer().prepare("dec_golden_identical")
    with pytest.raises(InvalidVariation, match=message.replace("(", r"\(").replace(".", r"\.")):
        parse_sweep(spec, prepared=prepared, versions=VERSIONS)


def test_too_many_replays_are_refused_before_any_runs(make_replayer: Callable[..., Replayer]) -> None:
    replayer = make_replayer()
    prepared = replayer.prepare("dec_golden_identical")
    axis = parse_sweep("external_state.customer.balance.balance=0..100/1", prepared=prepared)
    with pytest.raises(InvalidSweep, match="at most 500"):
        probe(replayer, prepared, [axis], judge=Judge(failed=True), runs=5, clock=_now)

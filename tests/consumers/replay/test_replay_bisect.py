"""Bisect over ordered candidates in O(log n) replays, and explain a change between two configurations."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

from replay_scripted import memory_entries, system_prompt

from consumers.replay import Replayer, bisect_candidates, explain_change, load_configuration, parse_variation

VERSIONS = [f"v4.{n}" for n in range(1, 8)]


def _prompts(tmp_path: Path) -> list[str]:
    specs = []
    for version in VERSIONS:
        path = tmp_path / f"{version}.txt"
        path.write_text(system_prompt(version), encoding="utf-8")
        specs.append(f"system_prompt=@{path}")
    return specs


def test_bisect_names_v47_in_at_most_three_replays(
    make_replayer: Callable[..., Replayer], tmp_path: Path
) -> None:
    replayer = make_replayer()
    prepared = replayer.prepare("dec_golden_identical")
    candidates = [parse_variation(spec) for spec in _prompts(tmp_path)]

    result = bisect_candidates(replayer, prepared, candidates)

    assert result.first_label is not None and result.first_label.endswith("v4.7.txt")
    assert result.replays <= math.ceil(math.log2(len(VERSIONS))) == 3
    assert [s.hit for s in result.steps if s.label.endswith("v4.7.txt")] == [True]


def test_bisect_for_the_first_change(make_replayer: Callable[..., Replayer], tmp_path: Path) -> None:
    # Newest first: the first candidate that *changes* the captured outcome is v4.6.
    replayer = make_replayer()
    prepared = replayer.prepare("dec_golden_identical")
    candidates = [parse_variation(spec) for spec in reversed(_prompts(tmp_path))]

    result = bisect_candidates(replayer, prepared, candidates, target="changes")

    assert result.first_label is not None and result.first_label.endswith("v4.6.txt")
    assert result.replays <= 3


def test_bisect_with_no_flip_names_nothing(make_replayer: Callable[..., Replayer]) -> None:
    replayer = make_replayer()
    prepared = replayer.prepare("dec_golden_identical")
    candidates = [parse_variation(f"sampling.top_p={p}") for p in (0.1, 0.5, 0.9)]
    result = bisect_candidates(replayer, prepared, candidates, target="changes")
    assert result.first is None and result.replays == 2


def test_explain_change_names_the_single_variable(
    make_replayer: Callable[..., Replayer], tmp_path: Path
) -> None:
    (tmp_path / "v4.6.txt").write_text(system_prompt("v4.6"), encoding="utf-8")
    (tmp_path / "v4.7.txt").write_text(system_prompt("v4.7"), encoding="utf-8")
    a = tmp_path / "a.toml"
    b = tmp_path / "b.toml"
    a.write_text('system_prompt = "@v4.6.txt"\n[sampling]\ntop_p = 0.9\n', encoding="utf-8")
    b.write_text(
        'system_prompt = "@v4.7.txt"\n[sampling]\ntop_p = 1.0\ntemperature = 0.0\n', encoding="utf-8"
    )

    replayer = make_replayer()
    result = explain_change(
        replayer,
        replayer.prepare("dec_golden_identical"),
        before=load_configuration(a),
        after=load_configuration(b),
    )

    assert set(result.changed_variables) == {"system_prompt", "sampling.top_p", "sampling.temperature"}
    assert result.outcome_differs
    assert result.culprits == (("system_prompt",),)
    assert all(len(step.variables) == 1 for step in result.steps)  # no combination was needed
    assert result.replays == 2 + 3


def test_explain_change_tries_combinations_only_when_needed(
    make_replayer: Callable[..., Replayer], tmp_path: Path
) -> None:
    # The failure needs v4.7 AND a big working set: from (v4.6, small) to (v4.7, big) no single change flips it.
    (tmp_path / "v4.6.txt").write_text(system_prompt("v4.6"), encoding="utf-8")
    (tmp_path / "v4.7.txt").write_text(system_prompt("v4.7"), encoding="utf-8")
    (tmp_path / "small.json").write_text(
        json.dumps([c for _, c in memory_entries(count=3)]), encoding="utf-8"
    )
    (tmp_path / "big.json").write_text(json.dumps([c for _, c in memory_entries(count=10)]), encoding="utf-8")
    a = tmp_path / "a.toml"
    b = tmp_path / "b.toml"
    a.write_text('system_prompt = "@v4.6.txt"\nmemory = "@small.json"\n', encoding="utf-8")
    b.write_text('system_prompt = "@v4.7.txt"\nmemory = "@big.json"\n', encoding="utf-8")

    replayer = make_replayer()
    result = explain_change(
        replayer,
        replayer.prepare("dec_golden_identical"),
        before=load_configuration(a),
        after=load_configuration(b),
    )

    assert result.culprits == (("system_prompt", "memory"),)
    assert [s.variables for s in result.steps] == [
        ("system_prompt",),
        ("memory",),
        ("system_prompt", "memory"),
    ]

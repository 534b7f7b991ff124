"""The README cannot rot: its settings table, its commands, its SDK example, its retention snippet and
its ClickHouse cookbook are all checked against the code (the cookbook runs on the demo's index)."""

from __future__ import annotations

import base64
import itertools
import os
import re
import shlex
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import typer.main
from demo_cli import run
from typer.exceptions import TyperException

from consumers.app.settings import ServiceSettings
from consumers.cli import app
from producers.evidence import TrustStore, load_signer, verify_capture
from producers.settings import BlackboxSettings
from producers.transports.spool.files import read_spool
from schemas.codec import decode

ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.DOTALL)


# A crash-test hook, not a user setting: the ingest process kills itself at the named point. Kept out of
# the README's table on purpose, so nobody sets it on a real deployment.
TEST_ONLY_SETTINGS = frozenset({"BLACKBOX_FAULT"})


def test_every_setting_is_documented_and_every_documented_setting_exists() -> None:
    documented = set(re.findall(r"^\| `(BLACKBOX_[A-Z0-9_]+)` \|", README, flags=re.MULTILINE))
    models = (BlackboxSettings, ServiceSettings)  # the runtime's settings and the services' over them
    fields = {f"BLACKBOX_{name.upper()}" for model in models for name in model.model_fields}
    assert fields >= TEST_ONLY_SETTINGS, "a test-only setting named here no longer exists"
    assert documented == fields - TEST_ONLY_SETTINGS


# Every `blackbox …` command line the README shows is parsed by the real CLI (never run), so its
# commands, flags, arities and required arguments cannot drift from the code. Lines come from fenced
# bash/sh/shell/console blocks, the CLI table's command column and inline `blackbox …` spans. The
# normaliser is small on purpose; a line it cannot read is made precise in the README instead:
# - `…` / `...` alone is dropped; ending a word it marks repetition and is cut (`V…` is `V`);
# - `[...]` is optional: every combination of a line's groups, each with and without, must parse;
# - a table cell `A` / `B` holds alternatives: a `B` starting with `-` continues A's command
#   (`--file F`), any other `B` is a command of its own, `blackbox` implied (`release …`);
# - `N` (a count) and `S` (seconds) stand for numbers and parse as `1`; every other placeholder
#   (`DECISION_ID`, `NAME=VALUE`, `FILE.json`, `"SQL"`) is already a valid string to the CLI;
# - in prose, a span naming only a command (`blackbox hold`) refers to it: it must merely exist.
SHELL_FENCES = "bash|sh|shell|console"
ELLIPSES = ("…", "...")
NUMBERS = {"N": "1", "S": "1"}
SHELL_OPERATORS = frozenset({"&&", "||", ";", "|"})


@dataclass(frozen=True)
class CommandLine:
    """One command line as the README shows it: ``quoted`` for the failure, ``words`` to parse."""

    quoted: str
    words: tuple[str, ...]
    prose: bool = False  # an inline span in prose, which may just name a command


def normalise(words: Sequence[str]) -> list[list[str]]:
    """Every argv one README line stands for (the rules above); ValueError if it is malformed."""
    items: list[str | list[str]] = []  # a word, or an optional group of words
    group: list[str] | None = None
    for raw in words:
        word = raw
        for mark in ELLIPSES:
            word = word.removesuffix(mark)
        opens, closes = word.startswith("["), word.endswith("]")
        word = word.removeprefix("[").removesuffix("]")
        if opens:
            if group is not None:
                raise ValueError(f"nested [ at {raw!r}")
            group = []
            items.append(group)
        if word:
            (group if group is not None else items).append(NUMBERS.get(word, word))
        if closes:
            if group is None:
                raise ValueError(f"] without [ at {raw!r}")
            group = None
    if group is not None:
        raise ValueError("[ never closed")
    groups = sum(isinstance(item, list) for item in items)
    variants = []
    for keep in itertools.product((True, False), repeat=groups):
        kept = iter(keep)
        argv: list[str] = []
        for item in items:
            if isinstance(item, str):
                argv.append(item)
            elif next(kept):
                argv.extend(item)
        variants.append(argv)
    return variants


def resolve(argv: Sequence[str]) -> tuple[Any, list[str], list[str]]:
    """The CLI command ``argv`` names (through sub-groups such as ``keys``), its path and the rest."""
    command: Any = typer.main.get_command(app)
    path, rest = [argv[0]], list(argv[1:])
    while hasattr(command, "commands") and rest and rest[0] in command.commands:
        command = command.commands[rest[0]]
        path.append(rest.pop(0))
    return command, path, rest


def parse_problem(line: CommandLine) -> str | None:
    """Why the CLI refuses ``line`` (the README line quoted), or None when every variant parses."""
    try:
        variants = normalise(line.words)
    except ValueError as exc:
        return f"{line.quoted}: {exc}"
    for argv in variants:
        command, path, rest = resolve(argv)
        if line.prose and not rest:
            continue  # names a command in prose
        if hasattr(command, "commands"):
            return f"{line.quoted}: no command {shlex.join([*path, *rest[:1]])}"
        try:
            command.make_context(" ".join(path), rest, resilient_parsing=False)
        except TyperException as exc:
            return f"{line.quoted}\n    parsed as {shlex.join(argv)}: {exc.format_message()}"
    return None


def _segments(words: Sequence[str]) -> list[list[str]]:
    """A shell line's commands, split at ``&&``, ``||``, ``;`` and ``|``."""
    segments: list[list[str]] = [[]]
    for word in words:
        if word in SHELL_OPERATORS:
            segments.append([])
        else:
            segments[-1].append(word)
    return segments


def table_cell(cell: str) -> list[CommandLine]:
    """The command lines of one cell of the CLI table's command column: `A` / `B` alternatives."""
    assert re.fullmatch(r"`[^`]+`( / `[^`]+`)*", cell), f"CLI table cell is not `A` / `B`: {cell}"
    first, *others = re.findall(r"`([^`]+)`", cell)
    words = shlex.split(first)
    assert words[0] == "blackbox", f"CLI table cell does not start with `blackbox`: {cell}"
    _, path, _ = resolve(words)
    lines = [CommandLine(cell, tuple(words))]
    for other in others:
        more = shlex.split(other)
        head = path if other.startswith("-") else [] if more[0] == "blackbox" else ["blackbox"]
        lines.append(CommandLine(cell, (*head, *more)))
    return lines


def shown_command_lines(readme: str) -> list[CommandLine]:
    """Every ``blackbox`` command line ``readme`` shows."""
    found: list[CommandLine] = []
    for block in re.findall(rf"```(?:{SHELL_FENCES})\n(.*?)```", readme, flags=re.DOTALL):
        for line in block.splitlines():
            for segment in _segments(shlex.split(line.removeprefix("$ "), comments=True)):
                if segment[:1] == ["blackbox"]:
                    found.append(CommandLine(line.strip(), tuple(segment)))
    lines = readme.splitlines()
    start = lines.index("| command | what it does |") + 2  # past the header and its rule
    table = list(itertools.takewhile(lambda line: line.startswith("| "), lines[start:]))
    cells = [row.removeprefix("| ").split(" | ", 1) for row in table]
    for command, _ in cells:
        found.extend(table_cell(command))
    prose = "\n".join(lines[:start] + [what for _, what in cells] + lines[start + len(table) :])
    for span in re.findall(r"`(blackbox [^`\n]*)`", prose):
        found.append(CommandLine(f"`{span}`", tuple(shlex.split(span)), prose=True))
    return found


def test_every_command_line_the_readme_shows_parses() -> None:
    lines = shown_command_lines(README)
    assert len(lines) >= 20, "the README shows its commands"
    assert any(line.words[:2] == ("blackbox", "bisect") for line in lines)  # the table is read
    problems = [problem for line in lines if (problem := parse_problem(line))]
    assert not problems, "README command lines the CLI refuses:\n" + "\n".join(problems)


@pytest.mark.parametrize(
    ("shown", "refused_for"),
    [
        ("blackbox bisect X --candidates a b", "--candidates"),  # the drift this test exists for
        ("blackbox bisect X --candidate a=1 a=2", "a=2"),  # one value per flag
        ("blackbox hold DECISION_ID", "--reason"),  # a required option
        ("blackbox keys trust", "public_key_file"),  # a required argument, inside a sub-group
        ("blackbox trends NAME [--since] [--json]", "--since"),  # an option without its value
        ("blackbox keys mint", "keys mint"),  # no such command
        ("blackbox query [--limit N] [--json", "never closed"),
    ],
)
def test_a_drifted_command_line_is_refused(shown: str, refused_for: str) -> None:
    problem = parse_problem(CommandLine(shown, tuple(shlex.split(shown))))
    assert problem is not None and refused_for in problem and shown in problem


def test_the_normaliser_expands_groups_alternatives_ellipses_and_numbers() -> None:
    assert normalise(shlex.split("blackbox replay ID [--vary NAME=VALUE]… [--runs N] …")) == [
        ["blackbox", "replay", "ID", "--vary", "NAME=VALUE", "--runs", "1"],
        ["blackbox", "replay", "ID", "--vary", "NAME=VALUE"],
        ["blackbox", "replay", "ID", "--runs", "1"],
        ["blackbox", "replay", "ID"],
    ]
    assert [line.words for line in table_cell("`blackbox verify ID` / `--file F`")] == [
        ("blackbox", "verify", "ID"),
        ("blackbox", "verify", "--file", "F"),
    ]
    assert table_cell("`blackbox hold ID --reason R` / `release ID --reason R`")[1].words[:2] == (
        "blackbox",
        "release",
    )
    # In prose a bare name refers to a command; in the table, and with arguments, it must parse.
    assert parse_problem(CommandLine("`blackbox hold`", ("blackbox", "hold"), prose=True)) is None
    assert parse_problem(CommandLine("`blackbox hold`", ("blackbox", "hold"))) is not None


def test_the_sdk_example_runs_and_its_capture_verifies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (example,) = [b for b in blocks("python") if "Recorder.from_settings" in b]
    seed = bytes(range(32))
    monkeypatch.setenv("BLACKBOX_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("BLACKBOX_SIGNING_KEY_B64", base64.b64encode(seed).decode())
    for name in [k for k in os.environ if k.startswith("BLACKBOX_")]:
        if name not in ("BLACKBOX_DATA_DIR", "BLACKBOX_SIGNING_KEY_B64"):
            monkeypatch.delenv(name)
    namespace = {
        "payload": {"message": "I was charged twice, please refund one.", "channel": "chat"},
        "PROMPT": "You are the support agent.\nPolicy version v4.7.\n",
        "TOOLS": {"tools": [{"type": "function", "function": {"name": "get_balance", "parameters": {}}}]},
        "note": "Customer cus_42 disputed a $120.00 charge.",
    }
    exec(compile(textwrap.dedent(example), "README.md", "exec"), namespace)

    signer = load_signer(b64=base64.b64encode(seed).decode())
    trust = TrustStore()
    trust.add(
        signer.public_raw,
        not_before=datetime(2000, 1, 1, tzinfo=UTC),
    )
    records = list(read_spool(tmp_path / "spool"))
    assert len(records) == 1
    capture = decode(records[0].value).value
    verify_capture(capture, trust)
    assert capture["agentConfiguration"]["systemPromptText"] == namespace["PROMPT"]
    assert capture["executionTrace"]["toolCalls"][0]["output"] == {"balance": 880}


def test_the_retention_snippet_is_a_valid_policy(tmp_path: Path) -> None:
    from consumers.retention.policy import load_policy

    (snippet,) = [b for b in blocks("toml") if "content_days" in b]
    path = tmp_path / "policy.toml"
    path.write_text(snippet, encoding="utf-8")
    policy = load_policy(path)
    assert policy.routine.content_days == 14
    assert policy.consequential.retention_days == 365  # everything else stays the default


def test_the_cookbook_queries_run_on_the_demo_index(demo: tuple[Path, str]) -> None:
    data_dir, _ = demo
    (cookbook,) = blocks("sql")
    queries = [line for line in cookbook.splitlines() if line.strip() and not line.startswith("--")]
    assert len(queries) >= 5
    outputs = [run(["query", q, "--json"], env={"BLACKBOX_DATA_DIR": str(data_dir)}) for q in queries]
    assert "v4.7" in outputs[0]  # the failure-rate query sees the demo's failure cluster
    assert "issue_refund" in outputs[2]

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


def test_the_langchain_snippet_records_a_langgraph_run_with_wire_fidelity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "tests" / "integrations"))
    from langgraph_agent import DOCUMENTS, QUESTION, build_graph, get_order
    from provider_server import ProviderServer, Reply

    from producers.recorder import Recorder

    (snippet,) = [b for b in blocks("python") if "BlackboxCallbackHandler" in b]
    assert len(snippet.strip().splitlines()) < 10
    seed = bytes(range(32))
    for name in [k for k in os.environ if k.startswith("BLACKBOX_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("BLACKBOX_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("BLACKBOX_SIGNING_KEY_B64", base64.b64encode(seed).decode())
    monkeypatch.setenv("BLACKBOX_CAPTURE_SAMPLE_ONE_IN", "1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-readme")
    with ProviderServer() as server:
        server.default_reply = Reply(text="Order A1 shipped.")
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
        rec = Recorder.from_settings(agent_id="agt_readme_langgraph")
        namespace = {
            "rec": rec,
            "question": QUESTION,
            "build_graph": lambda llm: build_graph(llm.bind_tools([get_order])),
        }
        exec(compile(textwrap.dedent(snippet), "README.md", "exec"), namespace)
        assert rec.close(10)
        received = server.received

    trust = TrustStore()
    trust.add(
        load_signer(b64=base64.b64encode(seed).decode()).public_raw,
        not_before=datetime(2000, 1, 1, tzinfo=UTC),
    )
    (record,) = list(read_spool(tmp_path / "spool"))
    capture = decode(record.value).value
    verify_capture(capture, trust)
    assert capture["fidelity"] == "wire"
    assert [c["requestBody"].encode() for c in capture["executionTrace"]["modelCalls"]] == [
        r.body for r in received
    ]
    assert {e["entryId"] for e in capture["memoryState"]["workingSetEntries"]} == {d.id for d in DOCUMENTS}
    assert [s["node"] for s in capture["input"]["requestPayload"]["langgraph"]] == ["retrieve", "agent"]


def test_the_opentelemetry_snippet_records_an_instrumented_openai_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "tests" / "integrations"))
    import openai
    from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor
    from provider_server import ProviderServer, Reply

    from producers.recorder import Recorder

    (snippet,) = [b for b in blocks("python") if "BlackboxSpanExporter" in b]
    assert len(snippet.strip().splitlines()) < 10
    seed = bytes(range(32))
    for name in [k for k in os.environ if k.startswith("BLACKBOX_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("BLACKBOX_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("BLACKBOX_SIGNING_KEY_B64", base64.b64encode(seed).decode())
    monkeypatch.setenv("BLACKBOX_CAPTURE_SAMPLE_ONE_IN", "1")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "span_only")
    rec = Recorder.from_settings(agent_id="agt_readme_otel")
    namespace: dict[str, object] = {"rec": rec}
    exec(compile(textwrap.dedent(snippet), "README.md", "exec"), namespace)
    try:
        with ProviderServer() as server:
            server.default_reply = Reply(text="Bonjour !")
            client = openai.OpenAI(api_key="sk-test-readme", base_url=server.openai_base_url)
            client.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "Salut"}])
    finally:
        OpenAIInstrumentor().uninstrument()
    provider = namespace["provider"]
    provider.force_flush()  # type: ignore[attr-defined]
    assert rec.close(10)

    trust = TrustStore()
    trust.add(
        load_signer(b64=base64.b64encode(seed).decode()).public_raw,
        not_before=datetime(2000, 1, 1, tzinfo=UTC),
    )
    (record,) = list(read_spool(tmp_path / "spool"))
    capture = decode(record.value).value
    verify_capture(capture, trust)
    assert capture["fidelity"] == "semantic"
    assert capture["executionTrace"]["finalOutputText"] == "Bonjour !"


def _run_wire_snippet(
    marker: str,
    *,
    env: dict[str, str],
    namespace: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[list[dict[str, Any]], list[Any], bytes]:
    """Run the README snippet importing ``marker`` against the local provider server (base URL and key
    from the SDK's own environment variables), with ``rec`` on a spool; returns the verified
    captures, what the server received and the spool's bytes."""
    monkeypatch.syspath_prepend(str(ROOT / "tests" / "integrations"))
    from provider_server import ProviderServer

    from producers.recorder import Recorder

    (snippet,) = [b for b in blocks("python") if marker in b and "langchain" not in b]
    assert len(snippet.strip().splitlines()) < 10
    seed = bytes(range(32))
    for name in [k for k in os.environ if k.startswith("BLACKBOX_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("BLACKBOX_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("BLACKBOX_SIGNING_KEY_B64", base64.b64encode(seed).decode())
    monkeypatch.setenv("BLACKBOX_CAPTURE_SAMPLE_ONE_IN", "1")  # routine drop-in calls in full too
    with ProviderServer() as server:
        for name, value in env.items():
            monkeypatch.setenv(
                name, value.format(openai=server.openai_base_url, anthropic=server.anthropic_base_url)
            )
        rec = Recorder.from_settings(agent_id="agt_readme_wire")
        exec(compile(textwrap.dedent(snippet), "README.md", "exec"), {**namespace, "rec": rec})
        assert rec.close(10)
        received = server.received
    trust = TrustStore()
    trust.add(
        load_signer(b64=base64.b64encode(seed).decode()).public_raw,
        not_before=datetime(2000, 1, 1, tzinfo=UTC),
    )
    records = list(read_spool(tmp_path / "spool"))
    captures = [decode(record.value).value for record in records]
    for capture in captures:
        verify_capture(capture, trust)
        assert capture["fidelity"] == "wire"
    return captures, received, b"".join(record.value for record in records)


def test_the_openai_snippet_captures_each_call_byte_for_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    note = "the customer prefers email"
    captures, received, stored = _run_wire_snippet(
        "producers.integrations.openai import wrap",
        env={"OPENAI_BASE_URL": "{openai}", "OPENAI_API_KEY": "sk-readme-openai-SECRET"},
        namespace={
            "messages": [{"role": "user", "content": "Where is order A1?"}],
            "note": note,
            "question": f"Where is order A1? ({note})",
        },
        tmp_path=tmp_path,
        monkeypatch=monkeypatch,
    )
    assert len(captures) == len(received) == 2  # the drop-in call, then the decision
    for capture, sent in zip(
        sorted(captures, key=lambda c: c["executionTrace"]["modelCalls"][0]["path"]), received, strict=True
    ):
        (call,) = capture["executionTrace"]["modelCalls"]
        assert call["requestBody"].encode() == sent.body
    decided = next(c for c in captures if c["memoryState"]["workingSetEntries"])
    assert decided["consequential"]["flagged"] is True
    assert any(s["part"] == "memory:mem_01" for s in decided["renderedContext"]["spans"])
    assert b"sk-readme-openai-SECRET" not in stored


def test_the_anthropic_snippet_captures_the_call_byte_for_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prompt = "You are the shipping agent."
    captures, received, stored = _run_wire_snippet(
        "producers.integrations.anthropic import wrap",
        env={"ANTHROPIC_BASE_URL": "{anthropic}", "ANTHROPIC_API_KEY": "sk-readme-anthropic-SECRET"},
        namespace={"PROMPT": prompt, "messages": [{"role": "user", "content": "Where is order A1?"}]},
        tmp_path=tmp_path,
        monkeypatch=monkeypatch,
    )
    ((capture,), (sent,)) = captures, received
    (call,) = capture["executionTrace"]["modelCalls"]
    assert call["format"] == "anthropic.messages" and call["requestBody"].encode() == sent.body
    assert capture["agentConfiguration"]["systemPromptText"] == prompt
    assert b"sk-readme-anthropic-SECRET" not in stored

"""``blackbox demo`` end to end, in a subprocess (as a newcomer runs it), and the commands it hands over.

The demo's conclusion must be *found* by the pipeline, not printed from a script: the trend names
v4.7, replay reproduces the wrong refund, the prompt and the working set are implicated, the others
cleared, and bisect names v4.7.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from demo_cli import run
from headless_browser import dump_dom


def test_demo_reaches_the_right_conclusion(demo: tuple[Path, str]) -> None:
    _, output = demo
    assert "Transport: spool; blobs: local; index: chdb." in output
    assert "The failures cluster on prompt v4.7, on every model version" in output
    conclusion = output.split("Conclusion", 1)[1]
    assert (
        "Root cause: system prompt v4.7 together with large working sets (failures only from 4-16KiB up)"
        in (conclusion)
    )
    assert "varying system_prompt and memory alone clears it" in conclusion
    assert "while model, sampling, external_state change nothing" in conclusion
    assert re.search(r"Bisect over v4\.5, v4\.6, v4\.7 names v4\.7 in [12] replays", conclusion)


def test_demo_leaves_data_the_commands_can_explore(demo: tuple[Path, str]) -> None:
    data_dir, output = demo
    env = {"BLACKBOX_DATA_DIR": str(data_dir)}
    decision = re.search(r"blackbox show (dec_\w+)", output)
    assert decision, output
    did = decision.group(1)
    since = re.search(r"failure_rate --since (\S+)", output)
    assert since

    rows = json.loads(run(["trends", "failure_rate", "--since", since.group(1), "--json"], env=env))
    by_prompt: dict[str, list[int]] = {}
    for row in rows:
        n, f = by_prompt.setdefault(row["prompt_version"], [0, 0])
        by_prompt[row["prompt_version"]] = [n + row["decisions"], f + row["failures"]]
    assert by_prompt["v4.7"][1] > 0 and by_prompt["v4.5"][1] == 0 and by_prompt["v4.6"][1] == 0

    shown = json.loads(run(["show", did, "--json"], env=env))
    assert json.dumps(shown).count("Policy version v4.7") >= 1

    assert "verified" in run(["verify", did], env=env)

    replay = run(
        [
            "replay",
            did,
            "--model-callable",
            "consumers.demo.model:ScriptedSupportModel",
            "--vary",
            "system_prompt=@prompt-v4.6.txt",
            "--json",
        ],
        env=env,
        cwd=data_dir,
    )
    report = json.loads(replay)
    text = json.dumps(report)
    assert "reproduces the capture" in text and "system_prompt is implicated" in text

    page = data_dir / "report.html"
    run(["report", "--out", str(page), "--since", since.group(1)], env=env)
    html = page.read_text(encoding="utf-8")
    assert "v4.7" in html and "system_prompt" in html
    dom = dump_dom(page)
    rendered = re.search(r'data-rendered="(\d+)"', dom)
    # Six trend charts, a seventh once a probe has run (tests share the demo's data directory).
    assert rendered and int(rendered.group(1)) >= 6, "the report's six charts were not drawn"
    assert dom.count('class="series"') >= 3 + 3  # prompt versions + latency percentiles

"""Console investigation benchmark (not collected by pytest): the console's replay jobs beside the
replay layer called directly (what ``blackbox replay`` / ``blackbox probe`` do), in the same run.

    python tests/benchmarks/bench_investigate.py [--runs 20]

1. Click to verdict: ``POST /console/decisions/{id}/replay`` (as captured, the demo's in-process
   model), then ``GET`` the job page until it shows the verdict; p50 against p50 of
   ``replay_with_report`` + the ``replay_runs`` rows. Target: p50 < 1 s.
2. A 32-point probe (``memory.truncate=0..15.5KB/0.5KB``) from the form to the stated boundary, against
   :func:`~consumers.replay.probe.probe` called directly. Target: < 30 s.

Measured in-process through the ASGI app (Starlette's TestClient): no network, no browser.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "benchmarks")]

from bench_console import BLACKBOX, OPERATOR, sign_in

from consumers.app.http import Surfaces, http_app
from consumers.app.runtime import open_runtime
from consumers.app.settings import load_service_settings

SWEEP = "memory.truncate=0..15.5KB/0.5KB"  # 32 points


def p50(fn: Callable[[], Any], runs: int) -> float:
    fn()  # warm
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    from fastapi.testclient import TestClient

    from consumers.demo.model import ScriptedSupportModel
    from consumers.replay.checks import checks_of
    from consumers.replay.clients import CallableModelClient
    from consumers.replay.probe import Judge, parse_sweep, probe
    from consumers.replay.report import replay_with_report, run_rows
    from consumers.replay.runlog import IndexReplayRunLog

    root = Path(tempfile.mkdtemp(prefix="bb-bench-investigate-"))
    try:
        env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("BLACKBOX_")}
        env["BLACKBOX_DATA_DIR"] = str(root)
        out = subprocess.run([*BLACKBOX, "demo", "--dir", str(root), "--decisions", "100", "--days", "3"],
                             env=env, check=True, capture_output=True, text=True).stdout  # fmt: skip
        found = re.search(r"blackbox show (\S+)", out)
        assert found, out[-2000:]
        did = found.group(1)
        with open_runtime(load_service_settings(data_dir=root), existing_index=True) as rt:
            client = TestClient(http_app(rt, Surfaces(audit=True, console=True)))
            sign_in(client, root)
            form = client.get(f"/console/decisions/{did}/investigate").text
            csrf = re.search(r'name="csrf" value="([^"]+)"', form)
            assert csrf, form[:500]

            def until(job_url: str, marker: str, limit: float) -> None:
                deadline = time.monotonic() + limit
                while True:
                    page = client.get(job_url).text
                    if marker in page:
                        return
                    assert 'job-state">failed' not in page and time.monotonic() < deadline, page[-1500:]

            def console_replay() -> None:
                done = client.post(f"/console/decisions/{did}/replay", follow_redirects=False,
                                   data={"csrf": csrf.group(1), "model": "demo-scripted", "runs": "1"})  # fmt: skip
                assert done.status_code == 303, done.text[:500]
                until(done.headers["location"], 'id="reproduces"', 30)

            replayer = rt.replayer(
                client=CallableModelClient(ScriptedSupportModel(), name="bench"), caller=OPERATOR
            )

            def direct_replay() -> None:
                report = replay_with_report(replayer, replayer.prepare(did))
                IndexReplayRunLog(rt.index).append(run_rows(report, at=datetime.now(UTC)))

            ours, theirs = p50(console_replay, args.runs), p50(direct_replay, args.runs)
            print(
                f"\nclick to verdict, one replay as captured, in-process model (p50 of {args.runs}, ms; target < 1000)"
            )
            print(
                f"{'console job + pages':32} {ours:9.1f}\n{'replay_with_report':32} {theirs:9.1f}\n{'ratio':32} {ours / theirs:8.2f}x"
            )

            started = time.perf_counter()
            done = client.post(f"/console/decisions/{did}/probe", follow_redirects=False,
                               data={"csrf": csrf.group(1), "model": "demo-scripted", "sweep": SWEEP, "sweep2": ""})  # fmt: skip
            until(done.headers["location"], 'id="boundary"', 120)
            console_probe = time.perf_counter() - started
            started = time.perf_counter()
            prepared = replayer.prepare(did)
            probe(replayer, prepared, [parse_sweep(SWEEP, prepared=prepared)], judge=Judge(checks=checks_of(rt.pacts), failed=True),
                  on_rows=IndexReplayRunLog(rt.index).append, clock=lambda: datetime.now(UTC))  # fmt: skip
            direct_probe = time.perf_counter() - started
            print(f"\n32-point probe ({SWEEP}) to its boundary (s; target < 30)")
            print(
                f"{'console job + pages':32} {console_probe:9.2f}\n{'probe()':32} {direct_probe:9.2f}\n{'ratio':32} {console_probe / direct_probe:8.2f}x"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

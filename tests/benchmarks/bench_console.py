"""Console benchmark (not collected by pytest): server time of the console's pages, side by side with
the CLI doing the same work in the same run.

    python tests/benchmarks/bench_console.py [--rows 1000000] [--runs 30] [--path DIR]

1. The decision list over ``--rows`` synthetic decisions on embedded chdb (the rows of
   ``bench_index.py``), for five filters: p95 of the console's ``GET /console/decisions?...`` (the page
   query, the count, the access-log row, the HTML) against p95 of the same two queries through
   ``blackbox query``'s path (:func:`consumers.index.confined.run_query`: parse check, access-log row,
   read-only run). Target: p95 < 300 ms.
2. The decision page of a capture with a ~200 KB rendered context and 50 memory spans (ingested
   into a small demo data dir): p95 of ``GET /console/decisions/{id}`` against p95 of ``blackbox show``'s
   path (read through the gate, verify at read time). Target: p95 < 500 ms. Then the same page in
   Debian's chromium over a real socket: p95 of its largest contentful paint. Target: < 1.5 s.

Both are measured in-process through the ASGI app (Starlette's TestClient), so "server time" holds
no network and no browser.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests" / "benchmarks"), str(ROOT / "tests" / "consumers" / "console")]

from bench_index import START, synth_decisions
from big import big_capture

from consumers.access.log import IndexAccessLog
from consumers.access.scopes import Caller
from consumers.app.http import Surfaces, http_app
from consumers.app.runtime import open_runtime
from consumers.app.settings import load_service_settings
from consumers.console import ConsoleSessions, console_file
from consumers.index.confined import run_query
from consumers.index.engine import QueryLimits
from consumers.index.listing import filter_from, list_sql

BLACKBOX = [sys.executable, "-c", "from consumers.cli import main; main()"]
OPERATOR = Caller(identity="bench-operator", scope="operator")
WEEK = (START + timedelta(days=30)).date().isoformat(), (START + timedelta(days=37)).date().isoformat()
FILTERS: dict[str, dict[str, str]] = {
    "no filter": {},
    "failed on prompt v4.7": {"failed": "yes", "prompt_version": "v4.7"},
    "one agent, one week": {"agent": "agt_03", "since": WEEK[0], "until": WEEK[1]},
    "consequential full captures": {"consequential": "yes", "capture_level": "full"},
    "decision id prefix": {"id_prefix": "dec_0000005"},
}


def p95(fn: Callable[[], Any], runs: int) -> float:
    fn()  # warm-up
    samples = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t) * 1000)
    return statistics.quantiles(samples, n=20)[-1] if len(samples) > 1 else samples[0]


def inline(sql: str, params: dict[str, Any]) -> str:
    """The statement with its ``{name:Type}`` parameters written as literals (``blackbox query`` text)."""

    def literal(value: Any) -> str:
        if isinstance(value, datetime):
            return f"toDateTime64('{value.astimezone(UTC):%Y-%m-%d %H:%M:%S.%f}', 3, 'UTC')"
        if isinstance(value, list):
            return "[" + ", ".join(literal(v) for v in value) + "]"
        if isinstance(value, int):
            return str(value)
        return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"

    return re.sub(r"\{(\w+):[^}]+\}", lambda m: literal(params[m.group(1)]), sql)


def sign_in(client: Any, data_dir: Path) -> None:
    code, _ = ConsoleSessions(console_file(data_dir)).issue_link(OPERATOR, now=datetime.now(UTC))
    page = client.get("/console/signin/link", params={"code": code})
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf, page.text[:500]
    done = client.post(
        "/console/signin/link", data={"csrf": csrf.group(1), "code": code}, follow_redirects=False
    )
    assert done.status_code == 303, done.text[:500]


def bench_list(path: Path, rows: int, runs: int) -> None:
    from fastapi.testclient import TestClient

    settings = load_service_settings(data_dir=path, tlog=False)
    with open_runtime(settings) as rt:
        index = rt.index
        existing = index.query("SELECT count() AS n FROM decisions")[0]["n"]
        if existing != rows:
            index.command("TRUNCATE TABLE decisions")
            rng = np.random.default_rng(7)
            t = time.perf_counter()
            for start in range(0, rows, 10_000):
                cols, _ = synth_decisions(rng, start, min(10_000, rows - start), rows)
                index.insert("decisions", cols)
            print(f"inserted {rows:,} decisions in {time.perf_counter() - t:.0f} s")
        client = TestClient(http_app(rt, Surfaces(audit=True, console=True)))
        sign_in(client, path)
        limits = QueryLimits(max_rows=1000, timeout_s=30)  # `blackbox query` defaults
        log = IndexAccessLog(index)
        print(f"\ndecision list over {rows:,} decisions (p95 of {runs}, ms; target < 300)")
        print(f"{'filter':32} {'console':>9} {'blackbox query':>15} {'ratio':>7}")
        for name, query in FILTERS.items():
            page_sql, count_sql, params = list_sql(filter_from(query), limit=50)
            texts = [inline(page_sql, params), inline(count_sql, params)]

            def console(query: dict[str, str] = query) -> None:
                response = client.get("/console/decisions", params=query)
                assert response.status_code == 200, response.text[:300]

            def cli(texts: list[str] = texts) -> None:
                for text in texts:
                    run_query(index, text, limits=limits, log=log, caller=OPERATOR)

            ours, theirs = p95(console, runs), p95(cli, runs)
            print(f"{name:32} {ours:9.1f} {theirs:15.1f} {ours / theirs:6.2f}x")


def bench_page(path: Path, runs: int) -> None:
    from fastapi.testclient import TestClient

    from consumers.storage.reader import load_capture
    from consumers.verify.stored import judge_shown
    from producers.evidence import TrustStore

    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("BLACKBOX_")}
    env["BLACKBOX_DATA_DIR"] = str(path)
    subprocess.run([*BLACKBOX, "demo", "--dir", str(path), "--decisions", "100", "--days", "3"], env=env,
                   check=True, capture_output=True)  # fmt: skip
    demo = subprocess.run([*BLACKBOX, "query", "SELECT decision_id FROM decisions WHERE content_state = 'full' LIMIT 1"], env=env,
                          check=True, capture_output=True, text=True).stdout  # fmt: skip
    some = re.search(r"dec_\w+", demo)
    assert some, demo
    shown = subprocess.run([*BLACKBOX, "show", some.group(0), "--json"], env=env, check=True,
                           capture_output=True, text=True).stdout  # fmt: skip
    big_id = "dec_01BIGCONTEXT00000000000001"
    file = path / "big.json"
    file.write_text(json.dumps(big_capture(json.loads(shown)["capture"], decision_id=big_id)))
    key = (path / "signing-key.path").read_text().strip()
    subprocess.run([*BLACKBOX, "capture", str(file)], env={**env, "BLACKBOX_SIGNING_KEY": key}, check=True,
                   capture_output=True)  # fmt: skip
    subprocess.run([*BLACKBOX, "consume", "--drain"], env=env, check=True, capture_output=True)

    with open_runtime(load_service_settings(data_dir=path), existing_index=True) as rt:
        client = TestClient(http_app(rt, Surfaces(audit=True, console=True)))
        sign_in(client, path)
        size = len(client.get(f"/console/decisions/{big_id}").content)

        def page() -> None:
            response = client.get(f"/console/decisions/{big_id}")
            assert response.status_code == 200, response.text[:300]

        def show() -> None:
            trust = TrustStore.load(rt.settings.resolved_trust_store, missing_ok=True)
            loaded = load_capture(big_id, index=rt.index, store=rt.blob_store, gate=rt.gate, caller=OPERATOR)
            judge_shown(loaded, index=rt.index, trust=trust)

        ours, theirs = p95(page, runs), p95(show, runs)
        print(
            f"\ndecision page, ~200 KB context with 50 memory spans ({size:,} bytes of HTML; p95 of {runs}, ms; target < 500)"
        )
        print(
            f"{'console page':32} {ours:9.1f}\n{'blackbox show (read + verify)':32} {theirs:9.1f}\n{'ratio':32} {ours / theirs:8.2f}x"
        )
        paint = paint_ms(http_app(rt, Surfaces(audit=True, console=True)), path, big_id, runs=min(runs, 10))
        print(f"{'painted in chromium (LCP)':32} {paint:9.1f}   (p95; target < 1500)")


def paint_ms(app: Any, path: Path, decision_id: str, *, runs: int) -> float:
    """p95 of the page's largest contentful paint in Debian's chromium (Playwright), over a real socket."""
    from playwright.sync_api import sync_playwright

    from consumers.web.server import WebServer

    args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--no-first-run"]  # fmt: skip
    samples: list[float] = []
    with WebServer(app) as server, sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=shutil.which("chromium") or "/usr/bin/chromium", args=args
        )
        page = browser.new_context().new_page()
        code, _ = ConsoleSessions(console_file(path)).issue_link(OPERATOR, now=datetime.now(UTC))
        page.goto(f"{server.url}/console/signin/link?code={code}")
        page.click("#use-link")
        page.wait_for_url("**/console/decisions")
        for _ in range(runs + 1):
            page.goto(f"{server.url}/console/decisions/{decision_id}", wait_until="load")
            samples.append(
                float(
                    page.evaluate(
                        "() => new Promise(done => new PerformanceObserver(list => {"
                        " const e = list.getEntries(); done(e[e.length - 1].startTime); })"
                        ".observe({type: 'largest-contentful-paint', buffered: true}))"
                    )
                )
            )
        browser.close()
    samples = samples[1:]  # the first load warms the browser's caches
    return statistics.quantiles(samples, n=20)[-1] if len(samples) > 1 else samples[0]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--path", type=Path, default=None, help="Keep the 1M-row index here between runs.")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bb-bench-console-"))
    try:
        bench_list(args.path or root / "list", args.rows, args.runs)
        bench_page(root / "page", args.runs)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

"""A wire capture investigated in a real browser: a three-step tool loop recorded through the real
``openai`` SDK (wrapped) against a local scripted provider server, consumed into a data dir of its
own, served by a real ``blackbox serve`` whose allow-list names that server (the key in an
environment variable, never in the browser). From the console: replay it as captured, then with one
memory span changed. The server receives the recorded bytes of every call, then the recorded bytes
with only that span spliced, and the page says which bytes changed and in which recorded part."""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from console_world import clean_env, run, serving, shot, token
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "integrations"))  # the real-SDK rig
from provider_server import ProviderServer
from test_sdk_wrap import SCRIPT, Rig, run_loop

from producers.evidence import Signer, TrustStore
from producers.policy import CapturePolicy
from producers.recorder import Recorder
from producers.transports.spool.sender import SpoolTransport

pytestmark = pytest.mark.slow
WAIT_MS = 120_000
ENDPOINT = "scripted-openai"
KEY_ENV = "CONSOLE_WIRE_TEST_KEY"
OPERATOR_KEY = "sk-operator-CONSOLE-9"
NEW_MEMORY = 'the customer prefers Fahrenheit, "black" tea ☃'


class PacedServer(ProviderServer):
    """The scripted provider, each answer ``pace`` seconds late (a model takes time: a probe can be watched)."""

    pace = 0.0

    def _next(self) -> Any:
        time.sleep(self.pace)
        return super()._next()


@dataclass(frozen=True)
class WireWorld:
    console: str
    server: PacedServer
    decision_id: str
    capture: dict[str, Any]
    operator_token: str


def _record(server: ProviderServer, data: Path) -> str:
    signer = Signer(Ed25519PrivateKey.generate(), name="did:test:console-wire")
    trust = TrustStore()
    trust.add(signer.public_raw, not_before=datetime(2000, 1, 1, tzinfo=UTC))
    trust.save(data / "trust.toml")
    recorder = Recorder(
        agent_id="agt_console_wire",
        transport=SpoolTransport(data / "spool", linger_ms=5),
        signer=signer,
        policy=CapturePolicy(sample_one_in=1),
    )
    server.script(*SCRIPT)
    decision_id = run_loop(
        Rig(recorder, data / "spool", trust, []), server, "chat", asynchronous=False, stream=False
    )
    assert recorder.close(10)
    return decision_id


@pytest.fixture(scope="module")
def wire_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WireWorld]:
    root = tmp_path_factory.mktemp("console-wire")
    data = root / "bb"
    data.mkdir()
    env = {
        **clean_env(),
        "BLACKBOX_DATA_DIR": str(data),
        "BLACKBOX_TRANSPORT": "spool",
        "BLACKBOX_BLOB": "local",
        KEY_ENV: OPERATOR_KEY,
    }
    with PacedServer() as server:
        decision_id = _record(server, data)
        run(["consume", "--drain", "--max-wait", "0.1"], env)
        capture = json.loads(run(["show", decision_id, "--json"], env).stdout)["capture"]
        assert capture["fidelity"] == "wire"
        (data / "model_endpoints.toml").write_text(
            f'[[endpoint]]\nname = "{ENDPOINT}"\nurl = "{server.url}"\napi_key_env = "{KEY_ENV}"\n',
            encoding="utf-8",
        )
        operator = token(env, "--caller", "wire-operator", "--scope", "operator")
        with serving(env, root / "serve.log") as url:
            yield WireWorld(f"{url}/console", server, decision_id, capture, operator)


def _signed_in(browser: Any, world: WireWorld) -> Any:
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{world.console}/signin")
    page.fill("#token", world.operator_token)
    page.click("button[type=submit]")
    page.wait_for_url(f"{world.console}/decisions")
    return page


def _span(call: dict[str, Any], prefix: str) -> dict[str, Any]:
    found: dict[str, Any] = next(s for s in call["spans"] if s["part"].startswith(prefix))
    return found


def test_varying_a_memory_span_sends_the_recorded_bytes_but_that_span(
    wire_world: WireWorld, browser: Any
) -> None:
    world = wire_world
    calls = world.capture["executionTrace"]["modelCalls"]
    recorded = [c["requestBody"].encode() for c in calls]
    page = _signed_in(browser, world)
    page.goto(f"{world.console}/decisions/{world.decision_id}/investigate")
    options = page.locator("#model option").evaluate_all("os => os.map(o => [o.value, o.textContent])")
    assert [v for v, _ in options] == [ENDPOINT, "demo-scripted"], options  # chosen by name
    assert all(OPERATOR_KEY not in text and KEY_ENV not in text for _, text in options)  # no key shown
    assert OPERATOR_KEY not in page.content()
    offered = page.locator("#vary option").evaluate_all("os => os.map(o => o.value)")
    assert not any(v.startswith("memory.") for v in offered), offered  # bytes: a span is replaced, not cut
    assert 'memory=["' in page.inner_text("#wire-hint")

    world.server.clear()
    world.server.script(*SCRIPT, *SCRIPT)
    page.select_option("#model", ENDPOINT)
    page.fill("#vary-text", "memory=" + json.dumps([NEW_MEMORY], ensure_ascii=False))
    page.click("#start-replay")
    page.wait_for_selector("#reproduces", timeout=WAIT_MS)
    shot(page, "26-wire-vary-memory")
    assert "reproduces the capture" in page.inner_text("#run-0 .row-verdict"), page.inner_text("#runs")
    assert page.inner_text("#run-1 .variable") == "memory"

    # What the scripted server received: the recording, then the recording with only the span changed.
    received = world.server.received
    assert len(received) == 2 * len(calls)
    assert [sent.body for sent in received[: len(calls)]] == recorded  # as captured: byte for byte
    for sent in received:
        assert sent.header("authorization") == f"Bearer {OPERATOR_KEY}"  # the allow-list entry's key
    escaped = json.dumps(NEW_MEMORY, ensure_ascii=False)[1:-1].encode()
    for call, body, sent in zip(calls, recorded, received[len(calls) :], strict=True):
        span = _span(call, "memory:")
        assert sent.body == body[: span["start"]] + escaped + body[span["end"] :], call["sequence"]

    # The page: every as-captured request identical; each varied one differs in that span only.
    captured_rows = page.locator("#run-0 table.requests tbody tr")
    assert captured_rows.count() == len(calls)
    assert page.locator("#run-0 table.requests tr.identical").count() == len(calls)
    varied_rows = page.locator("#run-1 table.requests tbody tr.differs")
    assert varied_rows.count() == len(calls)
    for i, call in enumerate(calls):
        row = varied_rows.nth(i)
        span = _span(call, "memory:")
        shown = row.locator(".range")
        start, end = (
            int(shown.get_attribute("data-start") or -1),
            int(shown.get_attribute("data-recorded-end") or -1),
        )
        # the differing range lies inside the span (the new text may share its first or last bytes)
        assert span["start"] <= start <= end <= span["end"], (start, end, span)
        assert row.locator(".parts").inner_text() == span["part"]
        assert f"the other {len(recorded[i]) - (end - start)} bytes identical" in row.inner_text()
    page.context.close()


def test_the_probe_chart_fills_in_as_points_finish(wire_world: WireWorld, browser: Any) -> None:
    world = wire_world
    sweep = [round(i * 0.05, 2) for i in range(21)]
    page = _signed_in(browser, world)
    charted: list[int] = []  # the ?points=N of each chart the page loaded: redrawn as points finish
    polled: list[str] = []

    def seen(url: str) -> None:
        found = re.search(r"/chart\.svg\?points=(\d+)$", url)
        if found:
            charted.append(int(found.group(1)))
        elif url.endswith("/status.json"):
            polled.append(url)

    page.on("request", lambda r: seen(r.url))
    world.server.script(*SCRIPT * (1 + len(sweep)))  # the control, then each point: three calls each
    world.server.pace = 0.04
    try:
        page.goto(f"{world.console}/decisions/{world.decision_id}/investigate")
        page.select_option("#probe-model", ENDPOINT)
        page.fill("#sweep", "sampling.temperature=0..1/0.05")
        page.fill("#sweep2", "")
        page.click("#start-probe")
        page.wait_for_selector("#probe-chart", timeout=WAIT_MS)
        shot(page, "27-probe-chart-filling-in")
        page.wait_for_selector("#boundary", timeout=WAIT_MS)
    finally:
        world.server.pace = 0.0
    shot(page, "28-probe-chart-done")
    assert "sampling.temperature" in page.inner_text("#probe h2") and page.inner_text("#boundary")
    assert page.locator("#probe-points tbody tr.point").count() == len(sweep)
    assert polled, "the page's script never asked for the job's status"
    partial = sorted({n for n in charted if 0 < n < len(sweep)})
    assert len(partial) >= 3, charted  # the chart was redrawn while points were still running
    assert charted == sorted(charted) and charted[-1] == len(sweep)  # it only grows, and ends whole
    page.context.close()

"""HTTP capture benchmark (not collected by pytest): what the capture wrapper adds to an SDK call.

    python tests/benchmarks/bench_http_capture.py [--calls 1000] [--size 20000] [--warmup 50]

The real ``openai`` SDK makes Chat Completions calls with a ~``--size`` byte request body, plain and
streamed (the stream read to its end), timed on the caller's thread from ``create()`` to the last
object the SDK yields. In the same run, call by call alternating:

* **unwrapped**: the SDK's own ``httpx2`` client;
* **wrapped**: ``openai_http_client(on_exchange)``, the callback appending each Exchange to a
  bounded deque (what a recorder's hand-off costs at least).

Then the whole integration, same local server, same run: ``producers.integrations.openai.wrap(client,
recorder)`` (drop-in mode: each call its own decision; a Recorder on a spool transport with its
worker running, every decision captured in full) against the unwrapped SDK.

The hand-off case runs twice: against the local provider server over loopback (``tests/integrations/provider_server.py``,
the end-to-end figure), and over an in-process ``httpx2.MockTransport`` answering the same bytes
(no socket, so the wrapper's own cost is not lost in loopback jitter). Each call reports its wall time
and the caller thread's CPU time (``time.thread_time``: what the caller spent, without the time the
2-core machine gave to other processes). Added = wrapped minus unwrapped at the same percentile.
Target (issue 10): p99 added < 300 µs.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "integrations")]

import httpx2
import openai
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from provider_server import ProviderServer, Reply, _Render

from producers.evidence import Signer
from producers.integrations import openai as openai_integration
from producers.integrations.http_capture import Exchange, capture_stats, openai_http_client, wrap_http_client
from producers.policy import CapturePolicy
from producers.recorder import Recorder
from producers.transports.spool.sender import SpoolTransport

REPLY = Reply(text="The forecast for Paris: mild, light rain on Thursday, 14-18 °C.")


def messages(size: int) -> list[dict[str, str]]:
    system = "You are a careful travel agent. " * (size // 2 // 32)
    context = "Retrieved memory: the customer prefers trains, window seats, quiet hotels. " * (
        (size - len(system)) // 78
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": context + "Weather in Paris?"}]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def one_call(client: openai.OpenAI, body: dict[str, Any], *, stream: bool) -> tuple[float, float]:
    """Wall time and the caller thread's CPU time of one call, in µs."""
    start, cpu = time.perf_counter(), time.thread_time()
    if stream:
        for _ in client.chat.completions.create(**body, stream=True):
            pass
    else:
        client.chat.completions.create(**body)
    return (time.perf_counter() - start) * 1e6, (time.thread_time() - cpu) * 1e6


def row(label: str, bare: list[float], captured: list[float]) -> str:
    p50 = (statistics.median(bare), statistics.median(captured))
    p99 = (percentile(bare, 0.99), percentile(captured, 0.99))
    return (
        f"  {label:<22}{p50[0]:>12.0f}µs{p50[1]:>11.0f}µs{p50[1] - p50[0]:>9.0f}µs   "
        f"{p99[0]:>12.0f}µs{p99[1]:>11.0f}µs{p99[1] - p99[0]:>9.0f}µs"
    )


def mock_transport() -> httpx2.MockTransport:
    plain = _Render(REPLY, "gpt-bench").chat()
    events = _Render(REPLY, "gpt-bench").chat_stream()

    def answer(request: httpx2.Request) -> httpx2.Response:
        if b'"stream":true' in request.content or b'"stream": true' in request.content:
            return httpx2.Response(
                200, headers={"content-type": "text/event-stream"}, content=b"".join(events)
            )
        return httpx2.Response(200, headers={"content-type": "application/json"}, content=plain)

    return httpx2.MockTransport(answer)


def clients(
    base_url: str, transport: Callable[[], httpx2.BaseTransport] | None, sink: Callable[[Exchange], None]
) -> tuple[openai.OpenAI, openai.OpenAI, httpx2.Client]:
    options: dict[str, Any] = {} if transport is None else {"transport": transport()}
    plain = openai.OpenAI(
        api_key="sk-bench", base_url=base_url, http_client=openai.DefaultHttpxClient(**options)
    )
    if transport is None:
        http = openai_http_client(sink)
    else:
        http = wrap_http_client(openai.DefaultHttpxClient(transport=transport()), sink)
    wrapped = openai.OpenAI(api_key="sk-bench", base_url=base_url, http_client=http)
    return plain, wrapped, http


def run(
    label: str, plain: openai.OpenAI, wrapped: openai.OpenAI, args: argparse.Namespace, server: Any
) -> None:
    body: dict[str, Any] = {"model": "gpt-bench", "messages": messages(args.size)}
    sent = len(plain.chat.completions.with_raw_response.create(**body).http_request.content)
    print(f"\n== {label}: request body {sent / 1000:.1f} KB, {args.calls} calls per side, alternating")
    print(
        f"  {'':<22}{'unwrapped p50':>14}{'wrapped p50':>13}{'added p50':>11}   "
        f"{'unwrapped p99':>14}{'wrapped p99':>13}{'added p99':>11}"
    )
    for stream in (False, True):
        for _ in range(args.warmup):
            one_call(plain, body, stream=stream)
            one_call(wrapped, body, stream=stream)
        bare: list[tuple[float, float]] = []
        captured: list[tuple[float, float]] = []
        gc.collect()
        for i in range(args.calls):
            # Alternate which side goes first so neither always gets the warmer cache.
            pair = (
                ((plain, bare), (wrapped, captured)) if i % 2 == 0 else ((wrapped, captured), (plain, bare))
            )
            for client, samples in pair:
                samples.append(one_call(client, body, stream=stream))
            if server is not None and i % 200 == 0:
                server.clear()
        kind = "streamed" if stream else "plain"
        print(row(f"{kind}, wall", [w for w, _ in bare], [w for w, _ in captured]))
        print(row(f"{kind}, caller CPU", [c for _, c in bare], [c for _, c in captured]))


def run_recorder(args: argparse.Namespace, server: ProviderServer, spool: Path) -> None:
    """``wrap(client, recorder)`` against the unwrapped SDK on the same server."""
    recorder = Recorder(
        agent_id="agt_bench",
        transport=SpoolTransport(spool, linger_ms=5),
        signer=Signer(Ed25519PrivateKey.generate(), name="did:bench"),
        policy=CapturePolicy(sample_one_in=1),
    )
    plain = openai.OpenAI(api_key="sk-bench", base_url=server.openai_base_url)
    wrapped = openai_integration.wrap(
        openai.OpenAI(api_key="sk-bench", base_url=server.openai_base_url), recorder
    )
    with plain, wrapped:
        run("openai wrap(client, recorder), drop-in, over loopback", plain, wrapped, args, server)
    assert recorder.flush(60)
    print(f"  recorder: {recorder.stats}")
    recorder.close(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1_000)
    parser.add_argument("--size", type=int, default=20_000)
    parser.add_argument("--warmup", type=int, default=50)
    args = parser.parse_args()
    print(
        f"python {sys.version.split()[0]}, openai {openai.__version__}, {os.cpu_count()} cpus, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    sink: deque[Exchange] = deque(maxlen=64)

    with ProviderServer() as server:
        server.default_reply = REPLY
        plain, wrapped, http = clients(server.openai_base_url, None, sink.append)
        with plain, wrapped:
            run("local provider server over loopback", plain, wrapped, args, server)
        print(f"  capture: {capture_stats(http)}")
        with tempfile.TemporaryDirectory() as spool:
            run_recorder(args, server, Path(spool))

    plain, wrapped, http = clients("http://bench.invalid/v1", mock_transport, sink.append)
    with plain, wrapped:
        run("in-process httpx2.MockTransport (no socket)", plain, wrapped, args, None)
    print(f"  capture: {capture_stats(http)}")


if __name__ == "__main__":
    main()

"""OTLP benchmark (not collected by pytest): the receiver's throughput and the exporter's CPU per span.

    python tests/benchmarks/bench_otlp.py [--decisions 2000] [--size 2000] [--batch 50]

Every decision is the same shape an instrumented agent sends: an ``invoke_agent`` span, a
retrieval span with two documents, two chat spans carrying ~``--size`` bytes of messages each
(official ``gen_ai.*`` attributes, content on) and an ``execute_tool`` span: 5 spans.

1. **Receiver, new beside old, same run**: ``blackbox otlp``'s service (:class:`consumers.otlp.OtlpService`,
   the route of the one ASGI application on uvicorn) and the receiver it replaced (``http.server``,
   loaded from the last commit that had ``consumers/otlp/server.py``) in this process, each over
   the same recorders signing and writing to a local spool; a client in another process POSTs the
   same pre-encoded protobuf requests of ``--batch`` decisions over keep-alive (sized bodies: the
   old receiver reads no other). Spans per second from the first request to the last capture
   delivered (fsync'd in the spool), alternating rounds, best of ``--rounds``, and the ratio; then
   the new receiver once more with chunked bodies (as the JS exporters send them).
2. **Exporter CPU per span, side by side**: the same finished SDK spans exported (batches of
   ``--batch`` decisions) by :class:`BlackboxSpanExporter` into a Recorder on a spool (CPU of every
   thread of this process until the recorder has delivered, so sealing and signing count) and by the
   plain ``OTLPSpanExporter`` (protobuf over HTTP) to a sink in another process that answers 200.
"""

from __future__ import annotations

import argparse
import base64
import json
import multiprocessing
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT)]

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from consumers.app.settings import load_service_settings
from consumers.otlp import OtlpService, ReceiverOptions, parse_listen
from producers.evidence import Signer, load_signer
from producers.integrations.otel import BlackboxSpanExporter
from producers.policy import CapturePolicy
from producers.recorder import Recorder
from producers.transports.spool.sender import SpoolTransport

SPANS_PER_DECISION = 5


def make_spans(decisions: int, size: int) -> list[ReadableSpan]:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "agt_bench"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("bench")
    filler = ("lorem ipsum dolor sit amet ☕ " * (size // 28 + 1))[:size]
    tools = json.dumps([{"type": "function", "name": "lookup", "parameters": {"type": "object"}}])
    for i in range(decisions):
        with tracer.start_as_current_span(
            "invoke_agent", attributes={"gen_ai.operation.name": "invoke_agent"}
        ):
            docs = json.dumps([{"id": f"d{i}a", "score": 0.9}, {"id": f"d{i}b", "score": 0.5}])
            with tracer.start_as_current_span(
                "retrieval",
                attributes={"gen_ai.operation.name": "retrieval", "gen_ai.retrieval.documents": docs},
            ):
                pass
            for step in range(2):
                messages = [
                    {"role": "system", "parts": [{"type": "text", "content": "You are terse."}]},
                    {"role": "user", "parts": [{"type": "text", "content": f"{i}:{step} {filler}"}]},
                ]
                with tracer.start_as_current_span(
                    "chat",
                    attributes={
                        "gen_ai.operation.name": "chat",
                        "gen_ai.request.model": "gpt-bench",
                        "gen_ai.request.temperature": 0.2,
                        "gen_ai.input.messages": json.dumps(messages),
                        "gen_ai.output.messages": json.dumps(
                            [{"role": "assistant", "parts": [{"type": "text", "content": "ok"}]}]
                        ),
                        "gen_ai.tool.definitions": tools,
                    },
                ):
                    pass
                if step == 0:
                    with tracer.start_as_current_span(
                        "execute_tool lookup",
                        attributes={
                            "gen_ai.operation.name": "execute_tool",
                            "gen_ai.tool.name": "lookup",
                            "gen_ai.tool.call.arguments": '{"q": 1}',
                            "gen_ai.tool.call.result": '{"a": 2}',
                        },
                    ):
                        pass
    return list(memory.get_finished_spans())


def batches(spans: list[ReadableSpan], batch_decisions: int) -> list[list[ReadableSpan]]:
    size = batch_decisions * SPANS_PER_DECISION
    return [spans[i : i + size] for i in range(0, len(spans), size)]


# --- 1. the receiver ---------------------------------------------------------------------------------


def _client(url: str, bodies: list[bytes], chunked: bool = False) -> None:
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    for body in bodies:
        if chunked:
            connection.request(
                "POST",
                parts.path,
                iter([body[: len(body) // 2], body[len(body) // 2 :]]),
                {"Content-Type": "application/x-protobuf"},
                encode_chunked=True,
            )
        else:
            connection.request("POST", parts.path, body, {"Content-Type": "application/x-protobuf"})
        response = connection.getresponse()
        response.read()
        if response.status != 200:
            raise SystemExit(f"receiver answered {response.status}")
    connection.close()


def old_receiver_module() -> Any:
    """``consumers/otlp/server.py`` as of the last commit that had it (the http.server receiver)."""
    import importlib.util
    import subprocess

    removed = subprocess.run(
        ["git", "rev-list", "-n", "1", "HEAD", "--", "consumers/otlp/server.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    source = subprocess.run(
        ["git", "show", f"{removed}^:consumers/otlp/server.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "old_otlp_server.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("old_otlp_server", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def bench_receiver(
    spans: list[ReadableSpan], batch: int, *, kind: str, chunked: bool = False
) -> dict[str, Any]:
    bodies = [encode_spans(b).SerializeToString() for b in batches(spans, batch)]
    seed = base64.b64encode(bytes(range(32))).decode()
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_service_settings(
            data_dir=Path(tmp), transport="spool", blob="local", signing_key_b64=seed, capture_sample_one_in=1
        )
        service = OtlpService(
            settings,
            signer=load_signer(b64=seed),
            options=ReceiverOptions(listen=parse_listen("127.0.0.1:0")),
        )
        if kind == "new":
            service.start()
            url, stats_of = service.url, lambda: service.receiver.stats
            stop = service.close
        else:
            old = old_receiver_module().OtlpReceiver(service.decisions, host="127.0.0.1", port=0).start()
            url, stats_of = old.url, lambda: old.stats

            def stop(timeout: float) -> bool:
                old.shutdown()
                return service.close(timeout)

        client = multiprocessing.get_context("fork").Process(target=_client, args=(url, bodies, chunked))
        cpu0, wall0 = time.process_time(), time.perf_counter()
        client.start()
        client.join()
        assert service.recorders.flush(120)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        stats = stats_of()
        stop(30)
    assert client.exitcode == 0
    return {
        "spans": stats.spans,
        "decisions": stats.decisions,
        "request_bytes": sum(map(len, bodies)),
        "wall_s": wall,
        "spans_per_s": stats.spans / wall,
        "decisions_per_s": stats.decisions / wall,
        "receiver_cpu_us_per_span": cpu / stats.spans * 1e6,
    }


# --- 2. exporter CPU, side by side ---------------------------------------------------------------------


class _Sink(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def _serve_sink(port_queue: Any) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    port_queue.put(server.server_address[1])
    server.serve_forever()


def cpu_blackbox(spans: list[ReadableSpan], batch: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        recorder = Recorder(
            agent_id="agt_bench",
            transport=SpoolTransport(Path(tmp), linger_ms=20),
            signer=Signer(Ed25519PrivateKey.generate(), name="did:bench"),
            policy=CapturePolicy(sample_one_in=1),
            queue_size=100_000,
        )
        exporter = BlackboxSpanExporter(recorder)
        cpu0 = time.process_time()
        for chunk in batches(spans, batch):
            exporter.export(chunk)
        assert recorder.flush(120)
        cpu = time.process_time() - cpu0
        recorder.close(30)
    return cpu


def cpu_otlp(spans: list[ReadableSpan], batch: int, endpoint: str) -> float:
    exporter = OTLPSpanExporter(endpoint=endpoint)
    cpu0 = time.process_time()
    for chunk in batches(spans, batch):
        exporter.export(chunk)
    cpu = time.process_time() - cpu0
    exporter.shutdown()
    return cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=2000)
    parser.add_argument("--size", type=int, default=2000, help="bytes of message content per chat span")
    parser.add_argument("--batch", type=int, default=50, help="decisions per export / request")
    parser.add_argument("--rounds", type=int, default=3, help="exporter comparison rounds (alternating)")
    args = parser.parse_args()

    spans = make_spans(args.decisions, args.size)
    n = len(spans)
    print(f"{args.decisions} decisions, {n} spans, ~{args.size} B content per chat span, batch {args.batch}")

    line = (
        "{spans} spans / {decisions} decisions in {wall_s:.2f} s -> {spans_per_s:,.0f} spans/s, "
        "{decisions_per_s:,.0f} decisions/s, {receiver_cpu_us_per_span:.0f} us CPU per span"
    )
    bench_receiver(spans[: 50 * SPANS_PER_DECISION], args.batch, kind="new")  # warm both paths
    bench_receiver(spans[: 50 * SPANS_PER_DECISION], args.batch, kind="old")
    runs: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
    for _ in range(args.rounds):
        for kind in ("old", "new"):
            runs[kind].append(bench_receiver(spans, args.batch, kind=kind))
    best = {kind: max(results, key=lambda r: r["spans_per_s"]) for kind, results in runs.items()}
    print("receiver, old (http.server, last commit):", line.format(**best["old"]))
    print("receiver, new (one ASGI app, uvicorn):    ", line.format(**best["new"]))
    print(
        f"receiver new / old: {best['new']['spans_per_s'] / best['old']['spans_per_s']:.2f}x spans/s (best of "
        f"{args.rounds}; rounds old={[round(r['spans_per_s']) for r in runs['old']]} "
        f"new={[round(r['spans_per_s']) for r in runs['new']]})"
    )
    cpu = {kind: min(r["receiver_cpu_us_per_span"] for r in results) for kind, results in runs.items()}
    print(
        f"receiver CPU per span new / old: {cpu['new']:.0f} / {cpu['old']:.0f} us = {cpu['new'] / cpu['old']:.2f}x "
        "(least of the rounds; steadier than spans/s on a shared machine)"
    )
    chunked = bench_receiver(spans, args.batch, kind="new", chunked=True)
    print("receiver, new, chunked bodies (the old one answers 411):", line.format(**chunked))

    ports: Any = multiprocessing.get_context("fork").Queue()
    sink = multiprocessing.get_context("fork").Process(target=_serve_sink, args=(ports,), daemon=True)
    sink.start()
    endpoint = f"http://127.0.0.1:{ports.get(timeout=10)}/v1/traces"
    ours, plain = [], []
    try:
        cpu_otlp(spans[: 50 * SPANS_PER_DECISION], args.batch, endpoint)  # warm both paths
        cpu_blackbox(spans[: 50 * SPANS_PER_DECISION], args.batch)
        for _ in range(args.rounds):
            plain.append(cpu_otlp(spans, args.batch, endpoint) / n * 1e6)
            ours.append(cpu_blackbox(spans, args.batch) / n * 1e6)
    finally:
        sink.terminate()
    best_ours, best_plain = min(ours), min(plain)
    print(
        f"exporter CPU per span (best of {args.rounds}): BlackboxSpanExporter {best_ours:.1f} us "
        f"(plan + seal + sign + spool) vs OTLPSpanExporter {best_plain:.1f} us (protobuf + HTTP) "
        f"-> {best_ours / best_plain:.2f}x; rounds ours={[round(x, 1) for x in ours]} "
        f"plain={[round(x, 1) for x in plain]}"
    )


if __name__ == "__main__":
    main()

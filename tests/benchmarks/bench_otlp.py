"""OTLP benchmark (not collected by pytest): the receiver's throughput and the exporter's CPU per span.

    python tests/benchmarks/bench_otlp.py [--decisions 2000] [--size 2000] [--batch 50]

Every decision is the same shape an instrumented agent sends: an ``invoke_agent`` span, a
retrieval span with two documents, two chat spans carrying ~``--size`` bytes of messages each
(official ``gen_ai.*`` attributes, content on) and an ``execute_tool`` span: 5 spans.

1. **Receiver**: ``blackbox otlp``'s service (:class:`consumers.otlp.OtlpService`) in this process,
   signing and writing to a local spool; a client in another process POSTs pre-encoded protobuf
   requests of ``--batch`` decisions over keep-alive. Spans per second from the first request to
   the last capture delivered (fsync'd in the spool), per receiving process, with its CPU time.
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


def _client(url: str, bodies: list[bytes]) -> None:
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    for body in bodies:
        connection.request("POST", parts.path, body, {"Content-Type": "application/x-protobuf"})
        response = connection.getresponse()
        response.read()
        if response.status != 200:
            raise SystemExit(f"receiver answered {response.status}")
    connection.close()


def bench_receiver(spans: list[ReadableSpan], batch: int) -> dict[str, Any]:
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
        service.receiver.start()
        client = multiprocessing.get_context("fork").Process(
            target=_client, args=(service.receiver.url, bodies)
        )
        cpu0, wall0 = time.process_time(), time.perf_counter()
        client.start()
        client.join()
        assert service.recorders.flush(120)
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        stats = service.receiver.stats
        service.close(30)
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

    receiver = bench_receiver(spans, args.batch)
    print(
        "receiver: {spans} spans / {decisions} decisions in {wall_s:.2f} s -> {spans_per_s:,.0f} spans/s, "
        "{decisions_per_s:,.0f} decisions/s, {receiver_cpu_us_per_span:.0f} us CPU per span "
        "(one process; request bytes {request_bytes:,})".format(**receiver)
    )

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

"""Producer CPU per decision beside the OpenTelemetry SDK (not collected by pytest).

    python tests/benchmarks/bench_vs_otel.py [--sizes 20000,120000] [--tools 1,20,50]
                                             [--paths configure,pinned] [--count-20k 3000]
                                             [--count-120k 1000] [--warmup 200]
                                             [--variants otel,blackbox,redact-off,native-off]
                                             [--repeat 3] [--before DIR] [--wire N] [--caller N]
                                             [--skip-cpu]

The same decisions (``recorder_testdata.make_content``, the content ``bench_producer.py`` uses, with
a tool schema of ``--tools`` function tools from ``make_tool_schema``: ~800 bytes, ~16 KB, ~40 KB)
are recorded, each variant in a fresh subprocess of its own so its process CPU is clean:

* ``otel``: the OpenTelemetry SDK (1.45) records each decision as one GenAI ``chat`` span, its
  attributes built from the same :class:`DecisionContent` per the GenAI semantic conventions
  (``gen_ai.system_instructions``, ``gen_ai.tool.definitions``, ``gen_ai.input.messages`` holding
  the request, the working set and the tool calls and results, ``gen_ai.output.messages`` holding
  the reasoning and the answer, ``gen_ai.retrieval.documents``, request parameters, usage), through
  a ``BatchSpanProcessor`` into an exporter that OTLP-encodes every batch (``encode_spans`` +
  ``SerializeToString``) and discards the bytes: no network;
* ``blackbox``: ``Recorder.from_settings`` with default settings (redaction ``builtin``, the native
  core when it loads, the flight recorder) into a transport that discards the bytes, every decision
  consequential so every capture is full: hashed per part, Merkle root, signed, Avro-encoded;
* ``redact-off``: the same with ``BLACKBOX_REDACT=off``;
* ``native-off``: the same with ``BLACKBOX_NATIVE=off`` (the pure-Python reference);
* ``before`` (with ``--before DIR``): the ``blackbox`` variant on an earlier commit's tree, e.g.
  ``git archive 7bacf9c | tar -x -C /tmp/before`` (the release before the native core).

Each blackbox variant runs on each ``--paths``: ``configure`` is the README's per-decision
``d.configure(model=..., system_prompt=PROMPT, tool_schema=TOOLS, ...)`` inside every decision (the
same objects each time, as a runtime passes its constants); ``pinned`` is ``Recorder.configure``
once, before the decisions.

``--wire N`` adds the wire-capture comparison: the real ``openai`` client makes N Chat Completions
calls (~20 KB of messages, the 20-tool schema's ``tools``) against the local provider server
(``tests/integrations/provider_server.py``, run by this parent process so its CPU is nobody's),
each variant in a fresh subprocess: ``sdk`` (the client alone), ``otel-openai`` (the official
OpenTelemetry OpenAI instrumentation, ``opentelemetry-instrumentation-genai-openai``, message content
on, into the same OTLP-encoding ``BatchSpanProcessor``) and ``wire`` (the client wrapped by
``producers.integrations.openai.wrap``: each call its own decision, captured in full, sealed,
signed and Avro-encoded into a discarding transport). Reported: CPU per call, the ratio to
``otel-openai`` (target <= 1.0x), and each variant's CPU above ``sdk``; with ``--before``, also
``wire-before`` (the wrapped client on the earlier tree).

``--caller N`` adds what each public call costs the agent's thread (``time.thread_time``, mean over
N decisions of ~20 KB, the worker not running) on the per-decision path with each ``--tools`` count:
which calls grow with the tool schema, and so what is left to move to the worker.

Per variant: ``--warmup`` decisions (flushed, not measured), then ``count`` decisions and the flush
(``force_flush`` / ``Recorder.flush``) inside the measured window; CPU is
``getrusage(RUSAGE_SELF)`` user + system, every thread of the process; ``agent`` is the CPU of the
thread that makes the decisions (``time.thread_time``), over the decisions alone. The variants run
in turn, ``--repeat`` rounds, and each figure is the median of its rounds, so a change in the
machine's load touches every variant alike. Reported: µs of CPU per decision and the ratio to
``otel`` at each size and tool count (targets: total <= 1.0x at ~20 KB, <= 0.7x at ~120 KB; the
agent's thread <= 0.6x OpenTelemetry's at ~20 KB). Run it on a quiet machine; absolute figures
drift between runs, ratios from one run are the result.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
# --before: a child records with an earlier release's tree (an exported commit) instead of this one
TREE = Path(os.environ.get("BENCH_TREE") or ROOT)
sys.path[:0] = [str(TREE), str(TREE / "tests" / "producers" / "recorder")]

VARIANTS: dict[str, dict[str, str]] = {
    "otel": {},
    "blackbox": {},
    "redact-off": {"BLACKBOX_REDACT": "off"},
    "native-off": {"BLACKBOX_NATIVE": "off"},
    "before": {},  # the blackbox variant on the tree given by --before
}
CONTENTS = 16  # distinct decisions cycled through, as in bench_producer.py
PATHS = ("configure", "pinned")
WIRE_VARIANTS = ("sdk", "otel-openai", "wire")


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# --- OpenTelemetry ------------------------------------------------------------------------------------
def otel_attributes(content: Any, tool_schema: dict[str, Any]) -> dict[str, Any]:
    """One decision as GenAI semantic-convention attributes (structured values as JSON strings, as
    the conventions say for span attributes), built from the same content blackbox records."""
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
    from recorder_testdata import SYSTEM_PROMPT

    tool_args = ({"customer_id": "cus_42"}, {"customer_id": "cus_42", "amount": 120.0})
    names = ("get_balance", "issue_refund")
    memory = "\n\n".join(entry for _, entry in content.memory)
    input_messages = [
        {"role": "system", "parts": [{"type": "text", "content": memory}]},
        {"role": "user", "parts": [{"type": "text", "content": content.user_message}]},
        {
            "role": "assistant",
            "parts": [
                {"type": "tool_call", "id": f"call_{i}", "name": name, "arguments": args}
                for i, (name, args) in enumerate(zip(names, tool_args, strict=True))
            ],
        },
        {
            "role": "tool",
            "parts": [
                {"type": "tool_call_response", "id": f"call_{i}", "response": output}
                for i, output in enumerate(content.tool_outputs)
            ],
        },
        # the external value the decision read, as one more tool result
        {
            "role": "tool",
            "parts": [
                {
                    "type": "tool_call_response",
                    "id": "customer.balance",
                    "response": {"amount": 880.0, "currency": "USD"},
                }
            ],
        },
    ]
    output_messages = [
        {
            "role": "assistant",
            "parts": [
                *({"type": "reasoning", "content": text} for text in content.reasoning),
                {"type": "text", "content": content.final_output},
            ],
            "finish_reason": "stop",
        }
    ]
    documents = [
        {"id": entry_id, "score": round(0.84 - position / 10, 2)}
        for position, (entry_id, _) in enumerate(content.memory)
    ]
    return {
        gen_ai.GEN_AI_OPERATION_NAME: "chat",
        gen_ai.GEN_AI_PROVIDER_NAME: "openai",
        gen_ai.GEN_AI_REQUEST_MODEL: "acme-chat",
        gen_ai.GEN_AI_RESPONSE_MODEL: "acme-chat-2026-06-01",
        gen_ai.GEN_AI_REQUEST_TEMPERATURE: 0.2,
        gen_ai.GEN_AI_REQUEST_TOP_P: 0.95,
        gen_ai.GEN_AI_REQUEST_MAX_TOKENS: 4096,
        gen_ai.GEN_AI_REQUEST_STOP_SEQUENCES: ("</done>",),
        gen_ai.GEN_AI_REQUEST_SEED: 7,
        gen_ai.GEN_AI_CONVERSATION_ID: "ses_9",
        gen_ai.GEN_AI_AGENT_ID: "agt_bench",
        gen_ai.GEN_AI_RESPONSE_FINISH_REASONS: ("stop",),
        gen_ai.GEN_AI_USAGE_INPUT_TOKENS: 12483,
        gen_ai.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: 1240,
        "user.id": "usr_42",
        "gen_ai.request.payload": json.dumps(content.request, ensure_ascii=False),
        gen_ai.GEN_AI_SYSTEM_INSTRUCTIONS: json.dumps(
            [{"type": "text", "content": SYSTEM_PROMPT}], ensure_ascii=False
        ),
        gen_ai.GEN_AI_TOOL_DEFINITIONS: json.dumps(tool_schema["tools"], ensure_ascii=False),
        gen_ai.GEN_AI_RETRIEVAL_DOCUMENTS: json.dumps(documents, ensure_ascii=False),
        gen_ai.GEN_AI_INPUT_MESSAGES: json.dumps(input_messages, ensure_ascii=False),
        gen_ai.GEN_AI_OUTPUT_MESSAGES: json.dumps(output_messages, ensure_ascii=False),
    }


def run_otel(
    contents: list[Any], *, tool_schema: dict[str, Any], path: str, warmup: int, count: int
) -> dict[str, Any]:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Discarding(SpanExporter):
        """OTLP protobuf encoding of each batch, as the OTLP exporters do before sending."""

        def __init__(self) -> None:
            self.spans = 0
            self.bytes = 0

        def export(self, spans: Any) -> SpanExportResult:
            self.bytes += len(encode_spans(spans).SerializeToString())
            self.spans += len(spans)
            return SpanExportResult.SUCCESS

    exporter = Discarding()
    provider = TracerProvider(resource=Resource.create({"service.name": "agt_bench"}))
    # a queue that holds the whole run: a dropped span would be CPU not spent
    provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=warmup + count + 2048))
    tracer = provider.get_tracer("bench_vs_otel")

    def decide(content: Any) -> None:
        with tracer.start_as_current_span("chat acme-chat") as span:
            span.set_attributes(otel_attributes(content, tool_schema))

    for i in range(warmup):
        decide(contents[i % len(contents)])
    provider.force_flush()
    spans_before, bytes_before = exporter.spans, exporter.bytes
    c0, t0, a0 = cpu_seconds(), time.perf_counter(), time.thread_time()
    for i in range(count):
        decide(contents[i % len(contents)])
    agent = time.thread_time() - a0
    provider.force_flush()
    cpu, wall = cpu_seconds() - c0, time.perf_counter() - t0
    exported = exporter.spans - spans_before
    provider.shutdown()
    if exported != count:
        raise SystemExit(f"otel exported {exported} of {count} spans")
    return {
        "cpu": cpu,
        "agent": agent,
        "wall": wall,
        "bytes": (exporter.bytes - bytes_before) / count,
        "status": "sdk",
    }


# --- blackbox -------------------------------------------------------------------------------------------
def run_blackbox(
    contents: list[Any], *, tool_schema: dict[str, Any], path: str, warmup: int, count: int
) -> dict[str, Any]:
    from recorder_testdata import CONFIG, NullTransport, configure, new_signer, record

    from producers.recorder import Recorder

    try:
        from producers import native

        status = native.status()
    except ImportError:  # a tree from before the native core
        status = "python (before)"

    sent = [0, 0]

    class Discarding(NullTransport):
        def send(self, key: bytes, value: bytes, on_delivery: Any) -> None:
            sent[0] += 1
            sent[1] += len(value)
            on_delivery(None)

    errors: list[Any] = []
    rec = Recorder.from_settings(
        agent_id="agt_bench", signer=new_signer(), transport=Discarding(), on_error=errors.append
    )
    # per decision: the same objects every time, as a runtime passes its constants
    config = {**CONFIG, "tool_schema": tool_schema} if path == "configure" else None
    if config is None:
        configure(rec, tool_schema=tool_schema)
    for i in range(warmup):
        record(rec, contents[i % len(contents)], consequential=True, config=config)
    rec.flush(120)
    before = list(sent)
    c0, t0, a0 = cpu_seconds(), time.perf_counter(), time.thread_time()
    for i in range(count):
        record(rec, contents[i % len(contents)], consequential=True, config=config)
    agent = time.thread_time() - a0
    ok = rec.flush(600)
    cpu, wall = cpu_seconds() - c0, time.perf_counter() - t0
    rec.close()
    if not ok or errors or sent[0] - before[0] != count:
        raise SystemExit(f"blackbox delivered {sent[0] - before[0]} of {count}; errors {errors[:3]}")
    return {
        "cpu": cpu,
        "agent": agent,
        "wall": wall,
        "bytes": (sent[1] - before[1]) / count,
        "status": status,
    }


# --- the agent's thread, call by call ---------------------------------------------------------------------
CALLS = (
    "decision",
    "configure",
    "add_memory x4",
    "render_context",
    "add_tool_call x2",
    "observe_external",
    "finish",
)


def caller_table(*, decisions: int, tool_counts: list[int]) -> None:
    from recorder_testdata import CONFIG, NullTransport, make_content, make_tool_schema, new_signer

    from producers.recorder import Recorder

    content = make_content(20_000)
    clock = time.thread_time
    costs: dict[int, dict[str, float]] = {}
    for tools in tool_counts:
        rec = Recorder(agent_id="agt_bench", transport=NullTransport(), signer=new_signer())
        rec._submit_decision = lambda builder: None  # type: ignore[method-assign]  # the caller alone
        config = {**CONFIG, "tool_schema": make_tool_schema(tools)}
        spent = dict.fromkeys(CALLS, 0.0)
        for i in range(decisions + 50):
            mark = clock()
            seen: list[float] = []
            d = rec.decision(request=content.request, origin_user_id="usr_42", consequential=True)
            d.__enter__()
            seen.append(clock())
            d.configure(**config)
            seen.append(clock())
            for entry_id, entry in content.memory:
                d.add_memory(entry_id=entry_id, tier="hot", content=entry, score=0.8, method="semantic")
            seen.append(clock())
            d.render_context(user_message=content.user_message)
            seen.append(clock())
            for output in content.tool_outputs:
                d.add_tool_call(
                    name="get_balance", input={"customer_id": "cus_42"}, output=output, latency_ms=1
                )
            seen.append(clock())
            d.observe_external(key="customer.balance", value={"amount": 880.0})
            seen.append(clock())
            d.finish(output=content.final_output, reasoning=content.reasoning, outcome="success")
            d.__exit__(None, None, None)
            seen.append(clock())
            if i >= 50:  # after a warm-up
                for name, start, end in zip(CALLS, [mark, *seen[:-1]], seen, strict=True):
                    spent[name] += end - start
        rec.close(1)
        costs[tools] = {name: total / decisions * 1e6 for name, total in spent.items()}
    print(f"\nthe agent's thread per call, per-decision configure, ~20 KB, {decisions} decisions; us of CPU")
    print(f"{'call':<18}" + "".join(f"{f'{t} tools':>10}" for t in tool_counts))
    for name in CALLS:
        print(f"{name:<18}" + "".join(f"{costs[t][name]:10.1f}" for t in tool_counts))
    print(f"{'all':<18}" + "".join(f"{sum(costs[t].values()):10.1f}" for t in tool_counts))


# --- wire capture: the openai client against the local server -------------------------------------------
def wire_body(size: int, tools: int) -> dict[str, Any]:
    from recorder_testdata import SYSTEM_PROMPT, make_content, make_tool_schema

    content = make_content(size)
    context = "\n\n".join(entry for _, entry in content.memory)
    return {
        "model": "acme-chat",
        "messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": context + "\n\n" + content.user_message},
        ],
        "tools": make_tool_schema(tools)["tools"],
        "temperature": 0.2,
        "max_tokens": 300,
    }


def run_wire(variant: str, *, base_url: str, warmup: int, count: int) -> dict[str, Any]:
    import openai
    from recorder_testdata import NullTransport, new_signer

    body = wire_body(20_000, 20)
    client: Any = openai.OpenAI(api_key="sk-bench", base_url=base_url, max_retries=0)
    finish: Any = None
    status = "sdk"
    delivered = [0]
    if variant == "otel-openai":
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
        from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

        class Discarding(SpanExporter):
            def export(self, spans: Any) -> SpanExportResult:
                encode_spans(spans).SerializeToString()
                delivered[0] += len(spans)
                return SpanExportResult.SUCCESS

        provider = TracerProvider(resource=Resource.create({"service.name": "agt_bench"}))
        provider.add_span_processor(BatchSpanProcessor(Discarding(), max_queue_size=warmup + count + 2048))
        OpenAIInstrumentor().instrument(tracer_provider=provider)
        finish = provider.force_flush
    elif variant == "wire":
        from producers import native
        from producers.integrations import openai as openai_integration
        from producers.recorder import Recorder

        class Kept(NullTransport):
            def send(self, key: bytes, value: bytes, on_delivery: Any) -> None:
                delivered[0] += 1
                on_delivery(None)

        errors: list[Any] = []
        rec = Recorder.from_settings(
            agent_id="agt_bench", signer=new_signer(), transport=Kept(), on_error=errors.append
        )
        client = openai_integration.wrap(client, rec, consequential=True)  # every call captured in full
        finish = lambda: rec.flush(600)  # noqa: E731
        status = native.status()

    for _ in range(warmup):
        client.chat.completions.create(**body)
    if finish is not None:
        finish()
    before = delivered[0]
    c0, t0, a0 = cpu_seconds(), time.perf_counter(), time.thread_time()
    for _ in range(count):
        client.chat.completions.create(**body)
    agent = time.thread_time() - a0
    if finish is not None:
        finish()
    cpu, wall = cpu_seconds() - c0, time.perf_counter() - t0
    if variant != "sdk" and delivered[0] - before != count:
        raise SystemExit(f"{variant} delivered {delivered[0] - before} of {count}")
    return {"cpu": cpu, "agent": agent, "wall": wall, "bytes": 0, "status": status}


def measure_wire(
    variant: str, *, base_url: str, count: int, warmup: int, data_dir: str, before: str | None
) -> dict[str, Any]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("BLACKBOX_", "OTEL_"))},
        "BLACKBOX_DATA_DIR": data_dir,
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "span_only",
        "BENCH_TREE": before if variant == "wire-before" and before else "",
    }
    child_variant = "wire" if variant == "wire-before" else variant
    argv = [
        sys.executable,
        __file__,
        "--wire-child",
        child_variant,
        "--base-url",
        base_url,
        "--count",
        str(count),
    ]
    done = subprocess.run(
        [*argv, "--warmup", str(warmup)], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"wire {variant} failed:\n{done.stderr.strip()}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def wire_table(*, calls: int, warmup: int, repeat: int, data_dir: str, before: str | None) -> None:
    sys.path.insert(0, str(TREE / "tests" / "integrations"))
    from provider_server import ProviderServer

    rounds: dict[str, list[dict[str, Any]]] = {}
    variants = [*WIRE_VARIANTS, *(["wire-before"] if before else [])]
    with ProviderServer() as server:
        for _ in range(max(1, repeat)):
            for variant in variants:
                found = measure_wire(
                    variant,
                    base_url=server.openai_base_url,
                    count=calls,
                    warmup=warmup,
                    data_dir=data_dir,
                    before=before,
                )
                rounds.setdefault(variant, []).append(found)
    cpu = {v: statistics.median(r["cpu"] for r in runs) / calls * 1e6 for v, runs in rounds.items()}
    agent = {v: statistics.median(r["agent"] for r in runs) / calls * 1e6 for v, runs in rounds.items()}
    print(
        f"\nwire capture: openai chat call, ~20 KB of messages, 20 tools, {calls} calls; us of CPU per call"
    )
    print(f"{'variant':<14}{'total':>10}{'x otel':>8}{'above sdk':>11}{'x otel':>8}{'caller':>9}")
    for variant in variants:
        above = cpu[variant] - cpu["sdk"]
        peer_above = cpu["otel-openai"] - cpu["sdk"]
        print(
            f"{variant:<14}{cpu[variant]:10.0f}{cpu[variant] / cpu['otel-openai']:8.2f}"
            f"{above:11.0f}{above / peer_above if peer_above > 0 else float('nan'):8.2f}{agent[variant]:9.0f}"
        )
    print("target: wire <= 1.0x otel-openai (total CPU per call)")


def child(variant: str, *, size: int, tools: int, path: str, count: int, warmup: int) -> None:
    from recorder_testdata import make_content, make_tool_schema

    contents = [make_content(size, seed=seed) for seed in range(CONTENTS)]
    run = run_otel if variant == "otel" else run_blackbox
    found = run(contents, tool_schema=make_tool_schema(tools), path=path, warmup=warmup, count=count)
    print(json.dumps(found))


def measure(
    variant: str,
    *,
    size: int,
    tools: int,
    path: str,
    count: int,
    warmup: int,
    data_dir: str,
    before: str | None = None,
) -> dict[str, Any]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("BLACKBOX_")},
        "BLACKBOX_DATA_DIR": data_dir,
        **VARIANTS[variant],
        "BENCH_TREE": before if variant == "before" and before else "",
    }
    argv = [
        sys.executable,
        __file__,
        "--child",
        "blackbox" if variant == "before" else variant,
        "--size",
        str(size),
        "--tools",
        str(tools),
        "--path",
        path,
        "--count",
        str(count),
    ]
    done = subprocess.run(
        [*argv, "--warmup", str(warmup)], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"{variant} at {size} bytes, {tools} tools, {path} failed:\n{done.stderr.strip()}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="20000,120000")
    parser.add_argument("--tools", default="1,20,50", help="tool counts of the tool schema")
    parser.add_argument("--paths", default=",".join(PATHS), help="how blackbox is configured")
    parser.add_argument("--count-20k", type=int, default=3_000)
    parser.add_argument("--count-120k", type=int, default=1_000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--variants", default="otel,blackbox")
    parser.add_argument("--repeat", type=int, default=3, help="rounds over all variants; medians reported")
    parser.add_argument(
        "--before",
        help="a tree of an earlier commit (git archive <commit> | tar -x -C DIR): adds the 'before' variant",
    )
    parser.add_argument("--wire", type=int, default=0, help="calls of the wire-capture comparison (0: skip)")
    parser.add_argument("--skip-cpu", action="store_true", help="without the per-decision CPU table")
    parser.add_argument("--caller", type=int, default=0, help="decisions of the per-call table (0: skip)")
    parser.add_argument("--child", choices=tuple(VARIANTS), help=argparse.SUPPRESS)
    parser.add_argument("--wire-child", choices=WIRE_VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--path", choices=PATHS, help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.wire_child:
        found = run_wire(args.wire_child, base_url=args.base_url, warmup=args.warmup, count=args.count)
        print(json.dumps(found))
        return
    if args.caller and not args.child:
        caller_table(decisions=args.caller, tool_counts=[int(t) for t in args.tools.split(",")])
    if args.skip_cpu and not args.child:
        if args.wire:
            with tempfile.TemporaryDirectory(prefix="bench-vs-otel-") as data_dir:
                wire_table(
                    calls=args.wire,
                    warmup=args.warmup,
                    repeat=args.repeat,
                    data_dir=data_dir,
                    before=args.before,
                )
        return
    if args.child:
        child(
            args.child,
            size=args.size,
            tools=int(args.tools),
            path=args.path,
            count=args.count,
            warmup=args.warmup,
        )
        return

    variants = [v.strip() for v in args.variants.split(",") if v.strip() and v.strip() != "before"]
    if args.before:
        variants.append("before")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or "otel" not in variants:
        parser.error(f"--variants: choose from {', '.join(VARIANTS)} (otel included); got {args.variants}")
    paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    if not paths or any(p not in PATHS for p in paths):
        parser.error(f"--paths: choose from {', '.join(PATHS)}; got {args.paths}")
    sizes = [int(s) for s in args.sizes.split(",")]
    tool_counts = [int(t) for t in args.tools.split(",")]
    # a row: (variant, path); otel's span holds the same attributes whatever blackbox's path
    rows = [("otel", "-")] + [(v, p) for v in variants if v != "otel" for p in paths]
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, "
        f"load average {os.getloadavg()[0]:.2f}; CPU = all threads of a fresh process per variant, "
        f"median of {max(1, args.repeat)} rounds"
    )
    rounds: dict[tuple[str, str, int, int], list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-vs-otel-") as data_dir:
        for size in sizes:
            count = args.count_20k if size <= 50_000 else args.count_120k
            for tools in tool_counts:
                for _ in range(max(1, args.repeat)):
                    for variant, path in rows:
                        found = measure(
                            variant,
                            size=size,
                            tools=tools,
                            path="configure" if path == "-" else path,
                            count=count,
                            warmup=args.warmup,
                            data_dir=data_dir,
                            before=args.before,
                        )
                        rounds.setdefault((variant, path, size, tools), []).append(found)
    results = {
        key: {
            **runs[0],
            "cpu": statistics.median(run["cpu"] for run in runs),
            "agent": statistics.median(run["agent"] for run in runs),
        }
        for key, runs in rounds.items()
    }
    for size in sizes:
        count = args.count_20k if size <= 50_000 else args.count_120k
        print(f"\n~{size // 1000} KB of content, {count} decisions; us of CPU per decision (x otel)")
        head = f"{'variant':<12}{'path':<11}{'core':<8}" + "".join(
            f"{f'{t} tools total':>22}{'agent':>16}{'bytes':>8}" for t in tool_counts
        )
        print(head)
        for variant, path in rows:
            status = results[variant, path, size, tool_counts[0]]["status"]
            row = f"{variant:<12}{path:<11}{('native' if status == 'native' else status.split(' ')[0]):<8}"
            for tools in tool_counts:
                mine = results[variant, path, size, tools]
                peer = results["otel", "-", size, tools]
                total = f"{mine['cpu'] / count * 1e6:.0f} ({mine['cpu'] / peer['cpu']:.2f}x)"
                agent = f"{mine['agent'] / count * 1e6:.0f} ({mine['agent'] / peer['agent']:.2f}x)"
                row += f"{total:>22}{agent:>16}{mine['bytes']:8.0f}"
            print(row)
    print(
        "\ntargets: total <= 1.0x otel at ~20 KB and <= 0.7x at ~120 KB for every tool count on the "
        "configure path; agent <= 0.6x otel's at ~20 KB, 20 tools; "
        f"load average at the end {os.getloadavg()[0]:.2f}"
    )
    for variant, path in rows:
        status = results[variant, path, sizes[0], tool_counts[0]]["status"]
        if status not in ("sdk", "native"):
            print(f"{variant}: {status}")
    if args.wire:
        with tempfile.TemporaryDirectory(prefix="bench-vs-otel-") as data_dir:
            wire_table(
                calls=args.wire, warmup=args.warmup, repeat=args.repeat, data_dir=data_dir, before=args.before
            )


if __name__ == "__main__":
    main()

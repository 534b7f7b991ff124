/**
 * One variant of tests/benchmarks/bench_node_vs_otel.py, in a process of its own (its CPU clean):
 *   node dist/bench/vs-otel.js VARIANT CONTENTS.json COUNT WARMUP
 * VARIANT: `otel` (the OpenTelemetry JS SDK records each decision as one GenAI `chat` span through a
 * BatchSpanProcessor into an exporter that OTLP-protobuf-encodes each batch and discards the bytes),
 * `blackbox` (the Recorder, every decision consequential: hashed, Merkle root, signed, Avro, into a
 * transport that discards the bytes), or `paced-otel` / `paced-blackbox` / `paced-none`: the agent
 * decides every 2 ms while the event loop's delay is sampled (perf_hooks, 1 ms resolution).
 * Prints one JSON line: CPU seconds (process.cpuUsage: every thread), wall, bytes per decision, and
 * for the paced variants the event loop's delay percentiles and the agent's call (decide) in ms.
 */
import { readFileSync } from "node:fs";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { ProtobufTraceSerializer } from "@opentelemetry/otlp-transformer";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider, BatchSpanProcessor, type ReadableSpan, type SpanExporter } from "@opentelemetry/sdk-trace-base";
import { Recorder, Signer, type Message, type RedactMode, type Transport } from "../src/index.js";

interface Content {
  request: Record<string, unknown>;
  userMessage: string;
  memory: [string, string][];
  toolOutputs: [unknown, unknown];
  finalOutput: string;
  reasoning: string[];
}
interface Contents {
  systemPrompt: string;
  toolSchema: { tools: unknown[] };
  contents: Content[];
}

const [variant = "blackbox", file = "", countText = "1000", warmupText = "100"] = process.argv.slice(2);
const data = JSON.parse(readFileSync(file, "utf8")) as Contents;
const count = Number(countText);
const warmup = Number(warmupText);
const cpu = (): number => {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1e6;
};

function otelAttributes(c: Content): Record<string, string | number | string[]> {
  const names = ["get_balance", "issue_refund"];
  const args = [{ customer_id: "cus_42" }, { customer_id: "cus_42", amount: 120.5 }];
  const input = [
    { role: "system", parts: [{ type: "text", content: c.memory.map(([, t]) => t).join("\n\n") }] },
    { role: "user", parts: [{ type: "text", content: c.userMessage }] },
    { role: "assistant", parts: names.map((name, i) => ({ type: "tool_call", id: `call_${i}`, name, arguments: args[i] })) },
    { role: "tool", parts: c.toolOutputs.map((response, i) => ({ type: "tool_call_response", id: `call_${i}`, response })) },
    { role: "tool", parts: [{ type: "tool_call_response", id: "customer.balance", response: { amount: 880.5, currency: "USD" } }] },
  ];
  const output = [{ role: "assistant", parts: [...c.reasoning.map((content) => ({ type: "reasoning", content })), { type: "text", content: c.finalOutput }], finish_reason: "stop" }];
  const documents = c.memory.map(([id], position) => ({ id, score: Math.round((0.84 - position / 10) * 100) / 100 }));
  return {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "openai",
    "gen_ai.request.model": "acme-chat",
    "gen_ai.response.model": "acme-chat-2026-06-01",
    "gen_ai.request.temperature": 0.2,
    "gen_ai.request.top_p": 0.95,
    "gen_ai.request.max_tokens": 4096,
    "gen_ai.request.stop_sequences": ["</done>"],
    "gen_ai.request.seed": 7,
    "gen_ai.conversation.id": "ses_9",
    "gen_ai.agent.id": "agt_bench",
    "gen_ai.response.finish_reasons": ["stop"],
    "gen_ai.usage.input_tokens": 12483,
    "gen_ai.usage.reasoning.output_tokens": 1240,
    "user.id": "usr_42",
    "gen_ai.request.payload": JSON.stringify(c.request),
    "gen_ai.system_instructions": JSON.stringify([{ type: "text", content: data.systemPrompt }]),
    "gen_ai.tool.definitions": JSON.stringify(data.toolSchema.tools),
    "gen_ai.retrieval.documents": JSON.stringify(documents),
    "gen_ai.input.messages": JSON.stringify(input),
    "gen_ai.output.messages": JSON.stringify(output),
  };
}

function otel(): { decide: (c: Content) => void; flush: () => Promise<void>; bytes: () => number } {
  let bytes = 0;
  const exporter: SpanExporter = {
    export(spans: ReadableSpan[], done) {
      bytes += ProtobufTraceSerializer.serializeRequest(spans)?.length ?? 0;
      done({ code: 0 });
    },
    async shutdown() {},
  };
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": "agt_bench" }),
    spanProcessors: [new BatchSpanProcessor(exporter, { maxQueueSize: count + warmup + 2048 })],
  });
  const tracer = provider.getTracer("bench_vs_otel");
  return {
    decide: (c) => {
      const span = tracer.startSpan("chat acme-chat");
      span.setAttributes(otelAttributes(c));
      span.end();
    },
    flush: () => provider.forceFlush(),
    bytes: () => bytes,
  };
}

function blackbox(redact: RedactMode = "builtin", sealThreads = 0): { decide: (c: Content) => void; flush: () => Promise<void>; bytes: () => number } {
  let bytes = 0;
  const transport: Transport = {
    async send(messages: readonly Message[]) {
      for (const m of messages) bytes += m.value.length;
    },
    async close() {},
  };
  const rec = new Recorder({
    agentId: "agt_bench",
    signer: Signer.fromSeed(Buffer.alloc(32, 7)),
    transport,
    queueSize: count + warmup + 2048,
    redact,
    sealThreads,
    config: {
      model: "acme-chat",
      modelVersion: "2026-06-01",
      endpoint: "http://127.0.0.1:8000/v1",
      systemPrompt: data.systemPrompt,
      systemPromptVersion: "v4.7",
      toolSchema: data.toolSchema,
      toolSchemaVersion: "tools-2026-07",
      sampling: { temperature: 0.2, top_p: 0.95, max_tokens: 4096, stop: ["</done>"], seed: 7 },
    },
    onError: (p) => {
      throw new Error(p.message);
    },
  });
  return {
    decide: (c) => {
      const d = rec.decision({ request: c.request, originUserId: "usr_42", originSessionId: "ses_9", consequential: true, reason: "issues refunds" });
      c.memory.forEach(([entryId, content], position) => {
        d.addMemory({
          entryId,
          tier: position < 2 ? "hot" : "warm",
          content,
          provenance: { writerId: "wrt_crm_sync", writtenAt: "2026-07-20T09:12:00.000Z", sourceType: "crm" },
          score: 0.84 - position / 10,
          method: "semantic",
          embeddingModel: "text-embedding-3-small",
          embeddingVersion: "2024-01",
        });
      });
      d.renderContext({ userMessage: c.userMessage });
      d.addToolCall({ name: "get_balance", input: { customer_id: "cus_42" }, output: c.toolOutputs[0], latencyMs: 142 });
      d.addToolCall({ name: "issue_refund", input: { customer_id: "cus_42", amount: 120.5 }, output: c.toolOutputs[1], latencyMs: 230 });
      d.observeExternal({ key: "customer.balance", value: { amount: 880.5, currency: "USD" }, source: "https://ledger.internal/v2/balance" });
      d.finish({ output: c.finalOutput, stopReason: "end_turn", reasoning: c.reasoning, reasoningTokenCount: 1240, outcome: "success", totalContextTokens: 12483 });
    },
    flush: () => rec.flush(),
    bytes: () => bytes,
  };
}

const kind = variant.replace("paced-", "");
const recorder = kind === "otel" ? otel() : kind === "blackbox" ? blackbox() : kind === "redact-off" ? blackbox("off") : kind === "threads" ? blackbox("builtin", 2) : { decide: () => undefined, flush: async () => undefined, bytes: () => 0 };
for (let i = 0; i < warmup; i++) recorder.decide(data.contents[i % data.contents.length]!);
await recorder.flush();
const bytesBefore = recorder.bytes();

// under --expose-gc (bench/alloc.ts): a full collection and a mark on each side of the measured run
const gc = (globalThis as { gc?: () => void }).gc;
const mark = (name: string): void => {
  if (gc === undefined) return;
  gc();
  console.log(`bench:${name}`);
};

if (!variant.startsWith("paced-")) {
  mark("start");
  const c0 = cpu();
  const t0 = performance.now();
  for (let i = 0; i < count; i++) recorder.decide(data.contents[i % data.contents.length]!);
  await recorder.flush();
  const c1 = cpu();
  const t1 = performance.now();
  mark("end");
  console.log(JSON.stringify({ cpu: c1 - c0, wall: (t1 - t0) / 1000, bytes: (recorder.bytes() - bytesBefore) / count }));
} else {
  const histogram = monitorEventLoopDelay({ resolution: 1 });
  const calls: number[] = [];
  histogram.enable();
  for (let i = 0; i < count; i++) {
    const t = performance.now();
    recorder.decide(data.contents[i % data.contents.length]!);
    calls.push(performance.now() - t);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  await recorder.flush();
  histogram.disable();
  const ms = (p: number): number => histogram.percentile(p) / 1e6;
  calls.sort((a, b) => a - b);
  const call = (p: number): number => calls[Math.min(calls.length - 1, Math.floor((p / 100) * calls.length))]!;
  console.log(JSON.stringify({ p50: ms(50), p99: ms(99), max: histogram.max / 1e6, callP50: call(50), callP99: call(99) }));
}

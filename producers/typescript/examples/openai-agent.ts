/**
 * A Node agent on the real `openai` client, captured at the wire through its `fetch` option: a
 * three-step tool loop inside one decision (plain or streamed, per argv "stream"), then one call
 * on the Vercel AI SDK's `@ai-sdk/openai` outside any decision (a decision of its own).
 * Environment: BLACKBOX_SPOOL_DIR, BLACKBOX_SIGNING_KEY_B64, MODEL_BASE_URL, MODEL_API_KEY.
 * Prints the decision ids and the recorder's stats as JSON.
 */
import OpenAI from "openai";
import { createOpenAI } from "@ai-sdk/openai";
import { generateText } from "ai";
import { Recorder, Signer, SpoolTransport, captureFetch } from "../src/index.js";

const env = (name: string): string => process.env[name] ?? "";
const stream = process.argv.includes("stream");
const SYSTEM = "You are a careful travel agent. Prices in EUR — always ☕ first.";
const MEMORY = "the customer prefers Celsius, café au lait ☕.";
const USER = `Weather in Paris? Remember: ${MEMORY}`;

const rec = new Recorder({
  agentId: "agt_node_wire",
  signer: Signer.fromBase64(env("BLACKBOX_SIGNING_KEY_B64"), { name: "did:blackbox:node" }),
  transport: new SpoolTransport(env("BLACKBOX_SPOOL_DIR")),
  sampleOneIn: 1,
});
const client = new OpenAI({ apiKey: env("MODEL_API_KEY"), baseURL: env("MODEL_BASE_URL"), fetch: captureFetch(rec), maxRetries: 2 });

const tools: OpenAI.Chat.Completions.ChatCompletionTool[] = [
  { type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } } },
  { type: "function", function: { name: "get_time", parameters: { type: "object", properties: { tz: { type: "string" } } } } },
];

async function step(messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[]): Promise<{ content: string | null; calls: { id: string; name: string; arguments: string }[] }> {
  if (!stream) {
    const done = await client.chat.completions.create({ model: "gpt-test", messages, tools, temperature: 0 });
    const message = done.choices[0]!.message;
    const calls = (message.tool_calls ?? []).flatMap((c) => (c.type === "function" ? [{ id: c.id, name: c.function.name, arguments: c.function.arguments }] : []));
    return { content: message.content, calls };
  }
  const chunks = await client.chat.completions.create({ model: "gpt-test", messages, tools, temperature: 0, stream: true });
  let content = "";
  const calls: { id: string; name: string; arguments: string }[] = [];
  for await (const chunk of chunks) {
    const delta = chunk.choices[0]?.delta;
    content += delta?.content ?? "";
    for (const piece of delta?.tool_calls ?? []) {
      const call = (calls[piece.index] ??= { id: "", name: "", arguments: "" });
      call.id = piece.id ?? call.id;
      call.name = piece.function?.name ?? call.name;
      call.arguments += piece.function?.arguments ?? "";
    }
  }
  return { content: content || null, calls };
}

const loop = await rec.decision({ consequential: true, reason: "books travel", request: { user: USER } }, async (d) => {
  d.addMemory({ entryId: "mem_pref", tier: "hot", content: MEMORY });
  d.addMemory({ entryId: "mem_unsent", tier: "cold", content: "never sent to the model" });
  d.observeExternal({ key: "weather.station", value: { id: 7 } });
  const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
    { role: "system", content: SYSTEM },
    { role: "user", content: USER },
  ];
  const seen: string[] = [];
  for (let i = 0; i < 5; i++) {
    const { content, calls } = await step(messages);
    if (calls.length === 0) break;
    seen.push(...calls.map((c) => c.arguments));
    messages.push({ role: "assistant", content, tool_calls: calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: c.arguments } })) });
    for (const call of calls) messages.push({ role: "tool", tool_call_id: call.id, content: JSON.stringify({ step: i, ok: true }) });
  }
  return { id: d.decisionId, arguments: seen };
});

const provider = createOpenAI({ apiKey: env("MODEL_API_KEY"), baseURL: env("MODEL_BASE_URL"), fetch: captureFetch(rec) });
const vercel = await generateText({ model: provider.chat("gpt-test"), system: SYSTEM, prompt: "One word for rain?", maxRetries: 0 });

await rec.close();
console.log(JSON.stringify({ loop: loop.id, arguments: loop.arguments, vercelText: vercel.text, stats: rec.stats }));

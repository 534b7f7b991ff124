/**
 * A Node agent on the real `@anthropic-ai/sdk` client, captured at the wire through its `fetch`
 * option: a tool loop inside one decision (plain or streamed, per argv "stream").
 * Environment: BLACKBOX_SPOOL_DIR, BLACKBOX_SIGNING_KEY_B64, MODEL_BASE_URL, MODEL_API_KEY.
 */
import Anthropic from "@anthropic-ai/sdk";
import { Recorder, Signer, SpoolTransport, captureFetch } from "../src/index.js";

const env = (name: string): string => process.env[name] ?? "";
const stream = process.argv.includes("stream");
const SYSTEM = "You are a careful travel agent. Prices in EUR — always ☕ first.";
const MEMORY = "the customer prefers Celsius, café au lait ☕.";

const problems: string[] = [];
const rec = new Recorder({
  agentId: "agt_node_anthropic",
  signer: Signer.fromBase64(env("BLACKBOX_SIGNING_KEY_B64"), { name: "did:blackbox:node" }),
  transport: new SpoolTransport(env("BLACKBOX_SPOOL_DIR")),
  sampleOneIn: 1,
  onError: (p) => problems.push(p.message),
});
const client = new Anthropic({ apiKey: env("MODEL_API_KEY"), baseURL: env("MODEL_BASE_URL"), fetch: captureFetch(rec) });
const tools: Anthropic.Tool[] = [{ name: "get_weather", input_schema: { type: "object", properties: { city: { type: "string" } } } }];

const id = await rec.decision({ consequential: true, request: { user: MEMORY } }, async (d) => {
  d.addMemory({ entryId: "mem_pref", tier: "hot", content: MEMORY });
  const messages: Anthropic.MessageParam[] = [{ role: "user", content: `Weather in Paris? Remember: ${MEMORY}` }];
  for (let i = 0; i < 5; i++) {
    const message = stream
      ? await client.messages.stream({ model: "claude-test", max_tokens: 256, system: SYSTEM, messages, tools }).finalMessage()
      : await client.messages.create({ model: "claude-test", max_tokens: 256, system: SYSTEM, messages, tools });
    const uses = message.content.filter((b): b is Anthropic.ToolUseBlock => b.type === "tool_use");
    if (uses.length === 0) break;
    messages.push({ role: "assistant", content: message.content });
    messages.push({ role: "user", content: uses.map((u) => ({ type: "tool_result" as const, tool_use_id: u.id, content: JSON.stringify({ step: i, ok: true }) })) });
  }
  return d.decisionId;
});
await rec.close();
console.log(JSON.stringify({ id, problems, stats: rec.stats }));

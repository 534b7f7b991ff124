/** The Recorder: the policy chooses as Python does, nothing reaches the agent, losses are counted. */
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { ConfigurationError, LocalKeyFile, Recorder, Signer, Vault, currentDecision, isSampled, type Message, type Transport } from "../src/index.js";

const vectors = JSON.parse(readFileSync(new URL("../../test/vectors/sealing.json", import.meta.url), "utf8")) as {
  key: { seed: string };
  sampling: { ids: string[]; sampled: Record<string, string[]> };
};
const signer = Signer.fromSeed(Buffer.from(vectors.key.seed, "base64"), { name: "did:blackbox:test" });

class Kept implements Transport {
  readonly sent: Message[] = [];
  async send(messages: readonly Message[]): Promise<void> {
    this.sent.push(...messages);
  }
  async close(): Promise<void> {}
}

class Refusing implements Transport {
  async send(): Promise<void> {
    throw new Error("broker down");
  }
  async close(): Promise<void> {}
}

test("the sampled decisions are the ones Python samples", () => {
  for (const [oneIn, sampled] of Object.entries(vectors.sampling.sampled)) {
    const ours = vectors.sampling.ids.filter((id) => isSampled(id, Number(oneIn)));
    assert.deepEqual(ours, sampled, `one in ${oneIn}`);
  }
});

test("a full queue drops routine decisions, counted and reported, never thrown", async () => {
  const problems: string[] = [];
  const transport = new Kept();
  const rec = new Recorder({ agentId: "agt", signer, transport, queueSize: 2, onError: (p) => problems.push(p.message) });
  for (let i = 0; i < 5; i++) rec.decision({ request: { i } }).finish({ output: String(i) });
  assert.equal(rec.stats.dropped, 3);
  assert.equal(problems.filter((p) => p.includes("queue full")).length, 3);
  await rec.close();
  assert.equal(transport.sent.length, 2);
  assert.equal(rec.stats.delivered, 2);
});

test("delivery failures, a throwing error handler and values that are not JSON never reach the agent", async () => {
  const rec = new Recorder({
    agentId: "agt",
    signer,
    transport: new Refusing(),
    onError: () => {
      throw new Error("handler bug");
    },
  });
  const circular: Record<string, unknown> = {};
  circular["self"] = circular;
  const d = rec.decision({ request: circular });
  d.addToolCall({ name: "t", input: { n: Number.NaN }, output: new Map() });
  d.observeExternal({ key: "k", value: 10n });
  assert.equal(d.finish({ output: "ok" }), d.decisionId);
  assert.equal(d.finish({ output: "twice" }), d.decisionId);
  await rec.close();
  assert.equal(rec.stats.failed, 1);
  assert.equal(rec.stats.unrecordable, 1);
  assert.equal(d.problems.length, 4);
});

test("the current decision follows async work inside decision(); a throw is recorded and rethrown", async () => {
  const transport = new Kept();
  const rec = new Recorder({ agentId: "agt", signer, transport, sampleOneIn: 1 });
  assert.equal(currentDecision(), undefined);
  const id = await rec.decision({}, async (d) => {
    await new Promise((resolve) => setTimeout(resolve, 1));
    assert.equal(currentDecision(), d);
    return d.decisionId;
  });
  assert.match(id, /^dec_[0-9A-HJKMNP-TV-Z]{26}$/);
  await assert.rejects(rec.decision({}, async () => {
    throw new Error("tool exploded");
  }), /tool exploded/);
  assert.equal(currentDecision(), undefined);
  await rec.close();
  assert.equal(transport.sent.length, 2);
  const failed = transport.sent[1]!.value.toString("latin1");
  assert.ok(failed.includes("tool exploded") && failed.includes("failure indicator"), "captured in full as a failure");
});

test("the agent's call returns before any sealing: finish() only queues", async () => {
  const transport = new Kept();
  const rec = new Recorder({ agentId: "agt", signer, transport });
  rec.decision({ consequential: true }).finish({ output: "x".repeat(20_000) });
  assert.equal(transport.sent.length, 0);
  await rec.flush();
  assert.equal(transport.sent.length, 1);
  assert.equal(transport.sent[0]!.key.toString(), "agt");
});

test("renderContext renders the chat messages and spans the Python SDK renders", async () => {
  const { renderChatContext } = await import("../src/index.js");
  const rendering = (JSON.parse(readFileSync(new URL("../../test/vectors/sealing.json", import.meta.url), "utf8")) as {
    rendering: { systemPrompt: string; memory: [string, string][]; userMessage: string; text: string; spans: unknown[] }[];
  }).rendering;
  assert.ok(rendering.length >= 3);
  for (const vector of rendering) {
    const rendered = renderChatContext(vector.systemPrompt, vector.memory, vector.userMessage);
    assert.equal(rendered.text, vector.text);
    assert.deepEqual(rendered.spans, vector.spans);
  }
  const rec = new Recorder({ agentId: "agt", signer, transport: new Kept(), config: { model: "m", systemPrompt: "Be exact." } });
  const d = rec.decision({});
  d.addMemory({ entryId: "b", tier: "hot", content: "second", position: 2 }).addMemory({ entryId: "a", tier: "hot", content: "first", position: 1 });
  assert.equal(d.renderContext({ userMessage: "hi" }).text, renderChatContext("Be exact.", [["a", "first"], ["b", "second"]], "hi").text);
  // in order, equal positions kept as added (a stable sort), out of order sorted
  const e = rec.decision({});
  e.addMemory({ entryId: "a", tier: "hot", content: "1", position: 1 }).addMemory({ entryId: "b", tier: "hot", content: "2", position: 1 }).addMemory({ entryId: "c", tier: "hot", content: "3", position: 3 });
  assert.equal(e.renderContext({ userMessage: "hi" }).text, renderChatContext("Be exact.", [["a", "1"], ["b", "2"], ["c", "3"]], "hi").text);
  e.addMemory({ entryId: "d", tier: "hot", content: "0", position: 0 });
  assert.equal(e.renderContext({ userMessage: "hi" }).text, renderChatContext("Be exact.", [["d", "0"], ["a", "1"], ["b", "2"], ["c", "3"]], "hi").text);
  d.finish({ output: null });
  await rec.close();
});

test("redaction is on by default; off sends the content as it is; a failing key store fails only that capture", async () => {
  const email = "ada@example.com";
  const record = async (options: Partial<ConstructorParameters<typeof Recorder>[0]>): Promise<{ sent: string; rec: Recorder; problems: string[] }> => {
    const transport = new Kept();
    const problems: string[] = [];
    const rec = new Recorder({ agentId: "agt", signer, transport, sampleOneIn: 1, onError: (p) => problems.push(p.message), ...options });
    const d = rec.decision({ request: { message: `write to ${email}` } });
    d.finish({ output: `sent to ${email}` });
    await rec.close();
    return { sent: Buffer.concat(transport.sent.map((m) => m.value)).toString("latin1"), rec, problems };
  };
  const on = await record({});
  assert.equal(on.rec.stats.delivered, 1);
  assert.ok(!on.sent.includes(email) && on.sent.includes("[EMAIL_1]"));
  const off = await record({ redact: "off" });
  assert.ok(off.sent.includes(email) && !off.sent.includes("[EMAIL_1]"));
  const broken = await record({ vault: new Vault(new LocalKeyFile(join(mkdtempSync(join(tmpdir(), "kek-")), "kek.key")), { put: () => Promise.reject(new Error("store down")) }) });
  assert.equal(broken.rec.stats.failed, 1);
  assert.equal(broken.rec.stats.delivered, 0);
  assert.ok(broken.problems.some((p) => p.includes("store down")), broken.problems.join("\n"));
});

test("sealing threads: a bad count is a configuration error; captures sealed on threads are delivered in order", async () => {
  assert.throws(() => new Recorder({ agentId: "agt", signer, transport: new Kept(), sealThreads: -1 }), ConfigurationError);
  const transport = new Kept();
  const rec = new Recorder({ agentId: "agt", signer, transport, sampleOneIn: 1, sealThreads: 2, redact: "off" });
  const ids: string[] = [];
  for (let i = 0; i < 20; i++) {
    const d = rec.decision({ request: { n: i } });
    ids.push(d.decisionId);
    d.finish({ output: `turn ${i}` });
  }
  await rec.close();
  assert.equal(rec.stats.delivered, 20);
  assert.equal(rec.stats.failed, 0);
  const order = transport.sent.map((m) => ids.findIndex((id) => m.value.includes(Buffer.from(id))));
  assert.deepEqual(order, [...ids.keys()]);
});

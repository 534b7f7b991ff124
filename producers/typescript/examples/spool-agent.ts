/**
 * A Node agent recording through the spool (what the README's Node section shows, and what the
 * Python ingest test runs): a consequential decision, a routine one flagged later (flight recorder),
 * and one holding a value that cannot be recorded. Prints the decision ids and stats as JSON.
 * Environment: BLACKBOX_SPOOL_DIR, BLACKBOX_SIGNING_KEY_B64, BLACKBOX_SEAL_THREADS (default 0).
 */
import { Recorder, Signer, SpoolTransport } from "../src/index.js";

const rec = new Recorder({
  agentId: "agt_node_support",
  runtimeId: "rt_node_1",
  signer: Signer.fromBase64(process.env["BLACKBOX_SIGNING_KEY_B64"] ?? "", { name: "did:blackbox:node" }),
  transport: new SpoolTransport(process.env["BLACKBOX_SPOOL_DIR"] ?? "spool"),
  sealThreads: Number(process.env["BLACKBOX_SEAL_THREADS"] ?? 0), // worker threads that seal (0: on the event loop)
  sampleOneIn: 0, // routine turns are structured-only (no sampling), so the flag below must bring the content in
});

const note = "Customer cus_42 opened ticket T-17 about a double charge of $120.00. 日本語 ✓ 𝄞";
const full = await rec.decision({ request: { message: "refund one charge?" }, originUserId: "usr_42", consequential: true, reason: "issues refunds" }, async (d) => {
  d.configure({ model: "acme-chat", modelVersion: "2026-06-01", systemPrompt: "You are the support agent.", systemPromptVersion: "v4.7", toolSchema: { tools: [{ name: "get_balance" }] }, sampling: { temperature: 0.2, max_tokens: 512 } });
  d.addMemory({ entryId: "mem_01", tier: "hot", content: note, score: 0.84, method: "semantic", provenance: { writerId: "wrt_crm", sourceType: "crm" } });
  d.setRenderedContext(JSON.stringify([{ role: "system", content: note }]));
  d.addToolCall({ name: "get_balance", input: { customer_id: "cus_42" }, output: { balance: 880, currency: "EUR" }, latencyMs: 12 });
  d.observeExternal({ key: "customer.balance", value: 880, source: "https://ledger.example/v2/balance" });
  return d.finish({ output: "Refunded $120.00.", stopReason: "end_turn", outcome: "success" });
});

const routine = rec.decision({ request: { message: "what is my balance?" } });
routine.configure({ model: "acme-chat" }).addMemory({ entryId: "mem_02", tier: "warm", content: "prefers email" });
routine.finish({ output: "Your balance is 880 EUR." });

const odd = rec.decision({ request: { id: 2n ** 64n } });
odd.finish({ output: "ok" });

await rec.flush();
const flagged = rec.flagConsequential(routine.decisionId, "refund disputed");
await rec.close();
console.log(JSON.stringify({ full, routine: routine.decisionId, odd: odd.decisionId, flagged, stats: rec.stats }));

/**
 * A Node agent whose captures hold personal data: redaction is on by default, and with a key file
 * and a blob store the originals are kept sealed where Python's `blackbox show --reveal` opens them
 * (the key file and the blob directory are the ones BLACKBOX_DATA_DIR gives the Python side:
 * `<dir>/kek.key`, `<dir>/blobs`). Prints the decision id and stats as JSON.
 * Environment: BLACKBOX_DATA_DIR, BLACKBOX_SIGNING_KEY_B64, BLACKBOX_SEAL_THREADS (default 0).
 */
import { join } from "node:path";
import { LocalBlobStore, Recorder, Signer, SpoolTransport } from "../src/index.js";

const dataDir = process.env["BLACKBOX_DATA_DIR"] ?? "bb";
const rec = new Recorder({
  agentId: "agt_node_support",
  signer: Signer.fromBase64(process.env["BLACKBOX_SIGNING_KEY_B64"] ?? "", { name: "did:blackbox:node" }),
  transport: new SpoolTransport(join(dataDir, "spool")),
  blobStore: new LocalBlobStore(join(dataDir, "blobs")),
  kekFile: join(dataDir, "kek.key"),
  sealThreads: Number(process.env["BLACKBOX_SEAL_THREADS"] ?? 0),
});

const note = "Jane writes from jane.doe@example.com, phone +1 415-555-0132. 日本語 ✓ 𝄞";
const decisionId = await rec.decision({ request: { message: "refund to card 4111 1111 1111 1111?" }, originUserId: "cus_jane", consequential: true, reason: "issues refunds" }, async (d) => {
  d.configure({ model: "acme-chat", systemPrompt: "You are Acme's support agent.", sampling: {} });
  d.addMemory({ entryId: "mem_01", tier: "hot", content: note });
  d.renderContext({ userMessage: "refund please" }); // its spans are mapped through the redaction
  d.addToolCall({ name: "lookup", input: { email: "jane.doe@example.com" }, output: { iban: "GB82 WEST 1234 5698 7654 32" } });
  d.finish({ output: "Refunded; a receipt goes to jane.doe@example.com.", stopReason: "end_turn", outcome: "success" });
  return d.decisionId;
});
await rec.close();
console.log(JSON.stringify({ decisionId, stats: rec.stats }));

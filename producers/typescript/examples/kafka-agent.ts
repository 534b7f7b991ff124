/**
 * A Node agent recording to the real Kafka broker: N consequential decisions and one whose capture
 * is above the message limit (it goes by claim check to a local blob directory).
 * Environment: BLACKBOX_KAFKA_BOOTSTRAP, BLACKBOX_TOPIC, BLACKBOX_SIGNING_KEY_B64, COUNT, and
 * BLACKBOX_BLOB_DIR or BLACKBOX_S3_ENDPOINT / _BUCKET / _ACCESS_KEY / _SECRET_KEY.
 */
import { KafkaTransport, LocalBlobStore, Recorder, S3BlobStore, Signer } from "../src/index.js";

const env = (name: string): string => process.env[name] ?? "";
const rec = new Recorder({
  agentId: "agt_node_kafka",
  signer: Signer.fromBase64(env("BLACKBOX_SIGNING_KEY_B64"), { name: "did:blackbox:node" }),
  transport: new KafkaTransport({ brokers: [env("BLACKBOX_KAFKA_BOOTSTRAP")], topic: env("BLACKBOX_TOPIC") }),
  // BLACKBOX_S3_ENDPOINT set: the claim check goes to that bucket, else to a local directory
  blobStore: env("BLACKBOX_S3_ENDPOINT")
    ? new S3BlobStore({ endpoint: env("BLACKBOX_S3_ENDPOINT"), bucket: env("BLACKBOX_S3_BUCKET"), accessKeyId: env("BLACKBOX_S3_ACCESS_KEY"), secretAccessKey: env("BLACKBOX_S3_SECRET_KEY") })
    : new LocalBlobStore(env("BLACKBOX_BLOB_DIR")),
  maxMessageBytes: 20_000,
});
const ids: string[] = [];
for (let i = 0; i < Number(env("COUNT") || "10"); i++) {
  const d = rec.decision({ consequential: true, request: { i } });
  d.configure({ model: "acme-chat" }).addToolCall({ name: "lookup", input: { i }, output: { ok: true } });
  ids.push(d.finish({ output: `answer ${i}` }));
}
const big = rec.decision({ consequential: true, request: { big: true } });
big.setRenderedContext("context line ✓ ".repeat(4_000));
ids.push(big.finish({ output: "a long answer" }));
await rec.close();
console.log(JSON.stringify({ ids, big: big.decisionId, stats: rec.stats }));

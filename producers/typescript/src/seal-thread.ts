/**
 * A sealing thread of the Recorder (`sealThreads`): redaction, hashing, signing and Avro encoding
 * of a capture built on the agent's thread, so the agent's event loop pays only for handing the
 * capture over and taking the bytes back. The data key is made on the agent's side (its wrapped
 * form is stored there, before the capture is sent); the thread says whether the capture used it.
 */
import { parentPort, workerData } from "node:worker_threads";
import type { KeyObject } from "node:crypto";
import { encodeCapture } from "./avro.js";
import { Signer } from "./keys.js";
import { adoptJson } from "./canonical.js";
import { partRefs } from "./parts.js";
import { stripContent } from "./policy.js";
import { builtinDetectors } from "./privacy/detectors.js";
import { Redactor } from "./privacy/protect.js";
import { seal } from "./seal.js";

export interface SealJob {
  readonly id: number;
  readonly capture: Record<string, unknown>;
  readonly redact: boolean;
  readonly dataKey: Uint8Array | null;
  readonly structuredOnly: boolean;
}

export type SealDone =
  | { readonly id: number; readonly encoded: Uint8Array; readonly held: Record<string, unknown> | null; readonly keyUsed: boolean }
  | { readonly id: number; readonly error: string };

if (parentPort !== null) {
  const port = parentPort;
  const signer = Signer.fromThread(workerData as { key: KeyObject; name: string | undefined });
  // one detector list for the thread's life: what is learnt per list (the united trigger, the
  // configuration's findings) is kept from job to job
  const detectors = builtinDetectors();
  port.on("message", (job: SealJob) => {
    void run(job).then(
      // the encoded bytes are moved, not copied (avro.ts gives each message an ArrayBuffer of its own, never Node's pool)
      (done) => port.postMessage(done, "encoded" in done && done.encoded.byteOffset === 0 ? [done.encoded.buffer as ArrayBuffer] : []),
      (error: unknown) => port.postMessage({ id: job.id, error: String(error) }),
    );
  });

  async function run(job: SealJob): Promise<SealDone> {
    let keyUsed = false;
    const dataKey = job.dataKey;
    // the JSON parts were checked copies on the agent's side and are this thread's own now: their
    // RFC 8785 text (hashed) and Python text (Avro) are made in one walk, as there
    for (const ref of partRefs(job.capture)) if (ref.field.kind === "json") adoptJson(ref.holder[ref.field.contentKey]);
    if (job.redact) {
      const issuer = dataKey === null ? undefined : { issue: async (): Promise<Buffer> => ((keyUsed = true), Buffer.from(dataKey)) };
      await new Redactor({ detectors, vault: issuer }).protect(job.capture);
    }
    const sealed = seal(job.capture, signer, { inPlace: true });
    const sent = job.structuredOnly ? stripContent(sealed) : sealed;
    return { id: job.id, encoded: encodeCapture(sent), held: job.structuredOnly ? sealed : null, keyUsed };
  }
}

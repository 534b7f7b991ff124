/**
 * Claim check, as `producers/claimcheck.py`: an encoded capture larger than the broker's message
 * limit is written to the blob store first, under `claims/<agentId>/<decisionId>/<sha256>.avro`,
 * and a `claim_check` event naming the key, hash and size travels instead. Nothing is truncated.
 */
import { createHash, randomBytes } from "node:crypto";
import { closeSync, fsyncSync, mkdirSync, openSync, renameSync, writeSync } from "node:fs";
import { dirname, join } from "node:path";

/** Where claim-checked bodies go (the Python `BlobStore` seam). */
export interface BlobStore {
  put(key: string, data: Buffer): Promise<void>;
}

/** Blobs as files under `root`, laid out as the Python `LocalBlobStore` lays them out. */
export class LocalBlobStore implements BlobStore {
  constructor(readonly root: string) {}

  async put(key: string, data: Buffer): Promise<void> {
    const path = join(this.root, ...key.split("/"));
    mkdirSync(dirname(path), { recursive: true });
    const temp = join(dirname(path), `.tmp-${randomBytes(6).toString("hex")}`);
    const fd = openSync(temp, "w");
    try {
      writeSync(fd, data);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(temp, path);
  }
}

function segment(value: string): string {
  const safe = [...value].map((c) => (/[\p{L}\p{N}\-_.:]/u.test(c) ? c : "_")).join("");
  return safe === "" || safe === "." || safe === ".." ? "_" : safe;
}

export function claimKey(agentId: string, decisionId: string, sha256Hex: string): string {
  return `claims/${segment(agentId)}/${segment(decisionId)}/${sha256Hex}.avro`;
}

/** Store `encoded` and return the claim-check event value. */
export async function checkIn(store: BlobStore, encoded: Buffer, capture: Record<string, unknown>): Promise<Record<string, unknown>> {
  const digest = createHash("sha256").update(encoded).digest("hex");
  const agentId = String(capture["agentId"]);
  const decisionId = String(capture["decisionId"]);
  const key = claimKey(agentId, decisionId, digest);
  await store.put(key, encoded);
  const consequential = capture["consequential"] as { flagged?: unknown } | null;
  return {
    decisionId,
    agentId,
    blobKey: key,
    sha256: `sha256:${digest}`,
    size: encoded.length,
    captureLevel: (capture["captureLevel"] as string | null) || "full",
    consequential: consequential?.flagged === true,
  };
}

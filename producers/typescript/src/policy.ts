/**
 * The capture policy, as `producers/policy.py`: consequential decisions are captured in `full`;
 * routine ones `structured-only`, except one in N (`sampled`) chosen from the decision id
 * (sha256 of its UTF-8, first 8 bytes big-endian, mod N == 0), so Python and Node choose alike.
 */
import { createHash } from "node:crypto";
import { partRefs } from "./parts.js";

export type CaptureLevel = "full" | "sampled" | "structured-only";
export const DEFAULT_SAMPLE_ONE_IN = 100;

export function isSampled(decisionId: string, sampleOneIn: number): boolean {
  if (sampleOneIn === 0) return false;
  const head = createHash("sha256").update(decisionId, "utf8").digest().readBigUInt64BE(0);
  return head % BigInt(sampleOneIn) === 0n;
}

export function captureLevel(decisionId: string, consequential: boolean, sampleOneIn: number): CaptureLevel {
  if (consequential) return "full";
  return isSampled(decisionId, sampleOneIn) ? "sampled" : "structured-only";
}

/** A copy of a sealed capture with every content part null; hash fields untouched (still verifies). */
export function stripContent(sealed: Record<string, unknown>): Record<string, unknown> {
  const copy = structuredClone(sealed);
  for (const ref of partRefs(copy)) {
    if (ref.holder[ref.field.contentKey] !== undefined) ref.holder[ref.field.contentKey] = null;
  }
  return copy;
}

/** Decision ids (`dec_` + a ULID, as the Python SDK makes them) and timestamps (ISO-8601, ms, `Z`). */
import { randomFillSync } from "node:crypto";

const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

export function newDecisionId(ms: number = Date.now()): string {
  let time = "";
  for (let shift = 45; shift >= 0; shift -= 5) time += CROCKFORD[Math.floor(ms / 2 ** shift) & 31];
  let random = "";
  const at = take16();
  for (let i = at; i < at + 16; i++) random += CROCKFORD[POOL[i]! & 31];
  return `dec_${time}${random}`;
}

let lastMs = Number.NaN;
let lastText = "";

export function timestamp(ms: number = Date.now()): string {
  // decisions made within the same millisecond share its text
  if (ms !== lastMs) {
    lastText = new Date(ms).toISOString();
    lastMs = ms;
  }
  return lastText;
}

// random bytes drawn from the CSPRNG a pool at a time (one call per 256 ids, not one per id)
const POOL = Buffer.alloc(4096);
let used = POOL.length;

function take16(): number {
  if (used + 16 > POOL.length) {
    randomFillSync(POOL);
    used = 0;
  }
  used += 16;
  return used - 16;
}

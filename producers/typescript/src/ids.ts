/** Decision ids (`dec_` + a ULID, as the Python SDK makes them) and timestamps (ISO-8601, ms, `Z`). */
import { randomBytes } from "node:crypto";

const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

export function newDecisionId(ms: number = Date.now()): string {
  let time = "";
  for (let shift = 45; shift >= 0; shift -= 5) time += CROCKFORD[Math.floor(ms / 2 ** shift) & 31];
  let random = "";
  for (const byte of randomBytes(16)) random += CROCKFORD[byte & 31];
  return `dec_${time}${random}`;
}

export function timestamp(ms: number = Date.now()): string {
  return new Date(ms).toISOString();
}

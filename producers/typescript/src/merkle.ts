/**
 * RFC 6962 §2.1 Merkle tree hash and the working-set root (`memoryState.contextSetHash`), as
 * `producers/evidence/merkle.py`: one leaf per entry in `contextPosition` order, the leaf being the
 * RFC 8785 form (nulls omitted) of the entry's leaf fields.
 */
import { ContractError } from "./errors.js";
import { isPlainObject, putMembers, putText, sha256Hex, writePieces } from "./canonical.js";

export const CONTEXT_SET_ALGORITHM = "rfc6962-sha256";
export const WORKING_SET_LEAF_KEYS = [
  "entryId",
  "tier",
  "provenance",
  "renderedContentHash",
  "contextPosition",
  "retrievalScore",
  "retrievalMethod",
  "embeddingModel",
  "embeddingVersion",
] as const;

const ENTRIES = "memoryState.workingSetEntries";
const LEAF = Buffer.from([0]);
const EMPTY_ROOT = sha256Hex(Buffer.alloc(0));

// a node hash is sha256(0x01 || left || right): written into one buffer (hashes are carried as
// hex, which node:crypto returns without making a Buffer)
const NODE_INPUT = Buffer.alloc(65, 1);

function nodeHex(left: string, right: string): string {
  NODE_INPUT.write(left, 1, 32, "hex");
  NODE_INPUT.write(right, 33, 32, "hex");
  return sha256Hex(NODE_INPUT);
}

/** The root (hex) above leaf hashes (hex), pairing each level and carrying an odd last node up. */
function rootHex(leafHashes: string[]): string {
  if (leafHashes.length === 0) return EMPTY_ROOT;
  let level = leafHashes;
  while (level.length > 1) {
    const next: string[] = [];
    for (let i = 0; i + 1 < level.length; i += 2) next.push(nodeHex(level[i]!, level[i + 1]!));
    if (level.length % 2) next.push(level[level.length - 1]!);
    level = next;
  }
  return level[0]!;
}

/** The RFC 6962 Merkle tree hash of `leaves` (raw leaf data); 32 bytes. */
export function merkleRoot(leaves: readonly Buffer[]): Buffer {
  return Buffer.from(rootHex(leaves.map((leaf) => sha256Hex(Buffer.concat([LEAF, leaf])))), "hex");
}

/** Indices of `entries` in `contextPosition` order; `ContractError` naming the entry otherwise. */
export function positionOrder(entries: readonly unknown[]): number[] {
  // most working sets are already in order: then the order is the indices (nothing sorted)
  let previous = -Infinity;
  let ordered = true;
  for (let i = 0; i < entries.length && ordered; i++) {
    const entry = entries[i];
    const position = isPlainObject(entry) ? entry["contextPosition"] : undefined;
    ordered = typeof position === "number" && Number.isSafeInteger(position) && position > previous;
    if (ordered) previous = position as number;
  }
  if (ordered) {
    const order = new Array<number>(entries.length);
    for (let i = 0; i < order.length; i++) order[i] = i;
    return order;
  }
  const keyed: [number, number][] = [];
  entries.forEach((entry, index) => {
    if (!isPlainObject(entry)) throw new ContractError("a working-set entry must be a JSON object", `${ENTRIES}[${index}]`);
    const position = entry["contextPosition"];
    if (typeof position !== "number" || !Number.isSafeInteger(position)) {
      throw new ContractError(
        `entry ${String(entry["entryId"])}: contextPosition must be an integer, got ${JSON.stringify(position) ?? "undefined"}`,
        `${ENTRIES}[${index}].contextPosition`,
      );
    }
    keyed.push([position, index]);
  });
  keyed.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  for (let i = 1; i < keyed.length; i++) {
    if (keyed[i]![0] === keyed[i - 1]![0]) {
      throw new ContractError(`two working-set entries share contextPosition ${keyed[i]![0]}`, `${ENTRIES}[${keyed[i]![1]}].contextPosition`);
    }
  }
  return keyed.map(([, index]) => index);
}

/** Leaf bytes of the working set in `contextPosition` order. */
export function workingSetLeaves(entries: readonly unknown[]): Buffer[] {
  return positionOrder(entries).map((index) => Buffer.from(leafText(entries, index), "utf8"));
}

const LEAF_KEY_SET: ReadonlySet<string> = new Set(WORKING_SET_LEAF_KEYS);

/** The entry's leaf fields (nulls omitted) as RFC 8785 text, written from the entry itself. */
function leafText(entries: readonly unknown[], index: number): string {
  return leafInput(entries, index).slice(1);
}

/** Leaf texts are written in a piece list of their own (a leaf is a few dozen pieces, a manifest hundreds). */
const LEAF_PIECES: string[] = [];

/** U+0000 (the leaf prefix: that byte in UTF-8) and the leaf text, written as one flat string. */
function leafInput(entries: readonly unknown[], index: number): string {
  const entry = entries[index] as Record<string, unknown>;
  return writePieces(() => {
    putText("\u0000");
    putMembers(entry, LEAF_KEY_SET, true, ENTRIES, undefined, index);
  }, LEAF_PIECES);
}

/**
 * The working-set root, `merkleRoot(workingSetLeaves(entries))`, in hex. `manifestForms` receives
 * the leaf text of each entry that has no member but its leaf fields and its rendered content: the
 * manifest (which drops the content) writes that entry as exactly this text.
 */
export function workingSetRootHex(entries: readonly unknown[], manifestForms?: Map<object, string>): string {
  // a leaf hash is sha256(0x00 || leaf): U+0000 is that byte in UTF-8
  return rootHex(
    positionOrder(entries).map((index) => {
      const input = leafInput(entries, index);
      const entry = entries[index] as Record<string, unknown>;
      if (manifestForms !== undefined && onlyLeafFields(entry)) manifestForms.set(entry, input.slice(1));
      return sha256Hex(input);
    }),
  );
}

function onlyLeafFields(entry: Record<string, unknown>): boolean {
  for (const key in entry) if (!LEAF_KEY_SET.has(key) && key !== "renderedContent") return false;
  return true;
}

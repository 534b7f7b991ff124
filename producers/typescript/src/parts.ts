/**
 * The content parts of a capture: which fields they are, how each is hashed, where its hash lives.
 * The same table, in the same order, as `producers/evidence/parts.py` (PART_FIELDS).
 */
import { ContractError } from "./errors.js";
import { contentHash, isPlainObject, jsonHash, textHash } from "./canonical.js";

export type PartKind = "text" | "json";

export interface PartField {
  readonly section: string;
  readonly contentKey: string;
  readonly hashKey: string;
  readonly kind: PartKind;
  readonly listKey?: string;
}

function field(section: string, contentKey: string, hashKey: string, kind: PartKind, listKey?: string): PartField {
  return Object.freeze(listKey === undefined ? { section, contentKey, hashKey, kind } : { section, contentKey, hashKey, kind, listKey });
}

export const PART_FIELDS: readonly PartField[] = Object.freeze([
  field("input", "requestPayload", "requestPayloadHash", "json"),
  field("agentConfiguration", "systemPromptText", "systemPromptHash", "text"),
  field("agentConfiguration", "toolSchemaJson", "toolSchemaHash", "json"),
  field("renderedContext", "text", "hash", "text"),
  field("memoryState", "renderedContent", "renderedContentHash", "text", "workingSetEntries"),
  field("executionTrace", "reasoningTokens", "reasoningTokensHash", "json"),
  field("executionTrace", "input", "inputHash", "json", "toolCalls"),
  field("executionTrace", "output", "outputHash", "json", "toolCalls"),
  field("executionTrace", "requestBody", "requestBodyHash", "text", "modelCalls"),
  field("executionTrace", "responseBody", "responseBodyHash", "text", "modelCalls"),
  field("executionTrace", "finalOutputText", "finalOutputHash", "text"),
  field("externalState", "capturedValue", "capturedValueHash", "json", "observableExternals"),
  field("privacy", "sealedOriginal", "sealedOriginalHash", "text"),
]);

/** section -> [content keys of the section itself, {list key: content keys of its records}] */
export const SECTION_CONTENT: ReadonlyMap<string, { top: Set<string>; lists: Map<string, Set<string>> }> = (() => {
  const out = new Map<string, { top: Set<string>; lists: Map<string, Set<string>> }>();
  for (const part of PART_FIELDS) {
    let entry = out.get(part.section);
    if (entry === undefined) {
      entry = { top: new Set(), lists: new Map() };
      out.set(part.section, entry);
    }
    if (part.listKey === undefined) entry.top.add(part.contentKey);
    else {
      const keys = entry.lists.get(part.listKey) ?? new Set<string>();
      keys.add(part.contentKey);
      entry.lists.set(part.listKey, keys);
    }
  }
  return out;
})();

/** One content part slot of one capture. */
export interface PartRef {
  readonly field: PartField;
  readonly index: number | undefined;
  readonly holder: Record<string, unknown>;
}

export function partPath(ref: PartRef, key: string = ref.field.contentKey): string {
  const { field: f } = ref;
  return f.listKey === undefined ? `${f.section}.${key}` : `${f.section}.${f.listKey}[${ref.index}].${key}`;
}

/** Every content-part slot of `capture` (present or absent), in contract order. */
export function* iterParts(capture: Record<string, unknown>): Generator<PartRef> {
  yield* partRefs(capture);
}

/** `[...iterParts(capture)]`, without a generator. */
export function partRefs(capture: Record<string, unknown>): PartRef[] {
  const refs: PartRef[] = [];
  for (let n = 0; n < PART_FIELDS.length; n++) {
    const f = PART_FIELDS[n]!;
    const section = capture[f.section];
    if (!isPlainObject(section)) continue;
    if (f.listKey === undefined) {
      refs.push({ field: f, index: undefined, holder: section });
      continue;
    }
    const records = section[f.listKey];
    if (!Array.isArray(records)) continue;
    for (let i = 0; i < records.length; i++) {
      const record: unknown = records[i];
      if (isPlainObject(record)) refs.push({ field: f, index: i, holder: record });
    }
  }
  return refs;
}

/** The hash of present content; `ContractError(path)` if it is not of its kind. */
export function computePartHash(ref: PartRef): string {
  const content = ref.holder[ref.field.contentKey];
  if (ref.field.kind === "text") {
    if (typeof content !== "string") throw new ContractError(`a text part, got ${kindOf(content)}`, partPath(ref));
    // the configuration repeats in every capture of an agent: its text is hashed once (by content)
    if (ref.field.section === "agentConfiguration") return repeatedTextHash(content, ref);
    if (!content.isWellFormed()) return textHash(content, partPath(ref)); // refuses it, with the path
    return contentHash(content);
  }
  return jsonHash(content, () => partPath(ref));
}

/** Hashes of recent configuration texts, by the text itself (a changed text is another key). */
const REPEATED = new Map<string, string>();
const REPEATED_MAX = 64;

function repeatedTextHash(text: string, ref: PartRef): string {
  let hash = REPEATED.get(text);
  if (hash === undefined) {
    hash = textHash(text, partPath(ref));
    if (REPEATED.size >= REPEATED_MAX) REPEATED.clear();
    REPEATED.set(text, hash);
  }
  return hash;
}

/** `{path: hash}` for every content part present in `capture`. */
export function contentParts(capture: Record<string, unknown>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const ref of partRefs(capture)) {
    const content = ref.holder[ref.field.contentKey];
    if (content !== null && content !== undefined) out[partPath(ref)] = computePartHash(ref);
  }
  return out;
}

export function kindOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  return typeof value;
}

/**
 * Redaction of a capture's content parts, as `producers/privacy/redact.py` does it: each finding
 * becomes a placeholder `[KIND_n]`, numbered per distinct value and kind in order of first sight
 * across the whole capture (the configuration first, so its redacted form is the same in every
 * capture). Each replacement is recorded with UTF-8 byte offsets of the placeholder in the redacted
 * string; the rendered context's and model calls' spans are mapped through the edits; a changed
 * part's hash is cleared (a supplied one must be the original's) and so is the working-set root.
 */
import { ContractError } from "../errors.js";
import { isPlainObject, setOwn } from "../canonical.js";
import { computePartHash, partPath, partRefs, type PartRef } from "../parts.js";
import { findAll, type Detector, type Finding } from "./detectors.js";

export interface Redacted {
  readonly part: string;
  readonly pointer: string;
  readonly start: number;
  readonly end: number;
  readonly kind: string;
  readonly placeholder: string;
}

/** `[KIND_n]` per distinct value and kind, numbered in order of first sight, for one capture. */
export class Placeholders {
  readonly #names = new Map<string, string>();
  readonly #counts = new Map<string, number>();

  name(kind: string, value: string): string {
    const key = `${kind}\u0000${value}`;
    let name = this.#names.get(key);
    if (name === undefined) {
      const count = (this.#counts.get(kind) ?? 0) + 1;
      this.#counts.set(kind, count);
      name = `[${kind}_${count}]`;
      this.#names.set(key, name);
    }
    return name;
  }
}

interface Edit {
  readonly start: number;
  readonly end: number;
  readonly length: number;
}

export interface TextResult {
  readonly text: string;
  /** (start, end) UTF-8 bytes in the redacted text, kind, placeholder */
  readonly placed: [number, number, string, string][];
  readonly edits: Edit[];
}

const utf8 = (text: string): number => Buffer.byteLength(text, "utf8");

/** `text` with every finding replaced, or undefined when nothing was found. */
export function redactText(text: string, detectors: readonly Detector[], placeholders: Placeholders): TextResult | undefined {
  return replace(text, findAll(text, detectors), placeholders);
}

function replace(text: string, findings: readonly Finding[], placeholders: Placeholders): TextResult | undefined {
  if (findings.length === 0) return undefined;
  const pieces: string[] = [];
  const placed: [number, number, string, string][] = [];
  const edits: Edit[] = [];
  let cursor = 0;
  let oldBytes = 0;
  let newBytes = 0;
  for (const finding of findings) {
    const between = text.slice(cursor, finding.start);
    const size = utf8(between);
    pieces.push(between);
    oldBytes += size;
    newBytes += size;
    const value = text.slice(finding.start, finding.end);
    const placeholder = placeholders.name(finding.kind, value);
    const replaced = utf8(value);
    pieces.push(placeholder);
    placed.push([newBytes, newBytes + placeholder.length, finding.kind, placeholder]);
    edits.push({ start: oldBytes, end: oldBytes + replaced, length: placeholder.length });
    oldBytes += replaced;
    newBytes += placeholder.length;
    cursor = finding.end;
  }
  pieces.push(text.slice(cursor));
  return { text: pieces.join(""), placed, edits };
}

function remap(offset: number, edits: readonly Edit[], isEnd: boolean): number {
  let shift = 0;
  for (const edit of edits) {
    if (edit.end <= offset) shift += edit.length - (edit.end - edit.start);
    else if (edit.start < offset) return edit.start + shift + (isEnd ? edit.length : 0);
    else break;
  }
  return offset + shift;
}

function remapSpans(spans: unknown, edits: readonly Edit[]): unknown {
  if (!Array.isArray(spans)) return spans;
  return spans.map((span: unknown) => {
    if (isPlainObject(span) && Number.isInteger(span["start"]) && Number.isInteger(span["end"])) {
      return { ...span, start: remap(span["start"] as number, edits, false), end: remap(span["end"] as number, edits, true) };
    }
    return span;
  });
}

function pointerOf(parent: string, key: string | number): string {
  return `${parent}/${String(key).replaceAll("~", "~0").replaceAll("/", "~1")}`;
}

type Find = (text: string) => readonly Finding[];

/** `value` with its strings redacted: new containers along changed paths, else `value` itself.
 * `keys` is the way down to `value` (its JSON pointer is made only when something is found). */
function redactJson(value: unknown, keys: (string | number)[], ref: PartRef, find: Find, placeholders: Placeholders, out: Redacted[]): unknown {
  if (typeof value === "string") {
    const result = replace(value, find(value), placeholders);
    if (result === undefined) return value;
    const part = partPath(ref);
    const pointer = keys.reduce<string>((parent, key) => pointerOf(parent, key), "");
    for (const [start, end, kind, placeholder] of result.placed) out.push({ part, pointer, start, end, kind, placeholder });
    return result.text;
  }
  if (Array.isArray(value)) {
    let items: unknown[] | undefined;
    for (let index = 0; index < value.length; index++) {
      const item: unknown = value[index];
      if (item === null || typeof item === "number" || typeof item === "boolean") continue;
      keys.push(index);
      const changed = redactJson(item, keys, ref, find, placeholders, out);
      keys.pop();
      if (changed !== item) (items ??= [...value])[index] = changed;
    }
    return items ?? value;
  }
  if (isPlainObject(value)) {
    let copy: Record<string, unknown> | undefined;
    for (const key in value) {
      const item = value[key];
      if (item === null || item === undefined || typeof item === "number" || typeof item === "boolean") continue;
      keys.push(key);
      const changed = redactJson(item, keys, ref, find, placeholders, out);
      keys.pop();
      if (changed !== item) setOwn((copy ??= { ...value }), key, changed);
    }
    return copy ?? value;
  }
  return value;
}

export interface CaptureRedaction {
  readonly capture: Record<string, unknown>;
  readonly redactions: Redacted[];
  /** Original content of each changed part, by part path. */
  readonly originals: Record<string, unknown>;
  /** The ordinary `sha256:` hash of each changed part's original, by part path. */
  readonly originalHashes: Record<string, string>;
  /** The spans of each changed text part that has spans, as they framed the original. */
  readonly originalSpans: Record<string, unknown>;
}

const ENCODING_KEYS = new Map<string, string>();

/** `<contentKey>Encoding`, the member that says a text part is base64 (made once per key). */
function encodingKey(contentKey: string): string {
  let key = ENCODING_KEYS.get(contentKey);
  // kept as a property key (internalized), so looking it up on a record does not hash it again
  if (key === undefined) ENCODING_KEYS.set(contentKey, (key = Object.keys({ [`${contentKey}Encoding`]: 0 })[0]!));
  return key;
}

function searched(ref: PartRef): boolean {
  const content = ref.holder[ref.field.contentKey];
  if (content === null || content === undefined || ref.field.contentKey === "sealedOriginal") return false;
  if (ref.field.kind === "text") return typeof content === "string" && ref.holder[encodingKey(ref.field.contentKey)] !== "base64";
  return true;
}

/** Findings in recent configuration texts, by detector set and by the text itself (a changed text
 * is another key): the system prompt and tool schema repeat in every capture of an agent. */
const REPEATED = new WeakMap<readonly Detector[], Map<string, readonly Finding[]>>();
const REPEATED_MAX = 1024;

function repeatedFinder(detectors: readonly Detector[]): Find {
  let known = REPEATED.get(detectors);
  if (known === undefined) REPEATED.set(detectors, (known = new Map()));
  const cache = known;
  return (text) => {
    let found = cache.get(text);
    if (found === undefined) {
      found = findAll(text, detectors);
      if (cache.size >= REPEATED_MAX) cache.clear();
      cache.set(text, found);
    }
    return found;
  };
}

/** Redact every content part of `capture` in place (it is the recorder's own); undefined when nothing was found. */
export function redactCapture(capture: Record<string, unknown>, detectors: readonly Detector[]): CaptureRedaction | undefined {
  const placeholders = new Placeholders();
  const redactions: Redacted[] = [];
  const originals: Record<string, unknown> = {};
  const originalHashes: Record<string, string> = {};
  const originalSpans: Record<string, unknown> = {};
  const refs = partRefs(capture);
  const find: Find = (text) => findAll(text, detectors);
  const findRepeated = repeatedFinder(detectors);
  const changes: { ref: PartRef; content: unknown; spans: unknown; hasSpans: boolean }[] = [];
  // the configuration first: the same in every capture of an agent, so its placeholders are too
  // (two passes in contract order, the configuration's parts, then the others)
  for (let pass = 0; pass < 2; pass++) {
    for (let index = 0; index < refs.length; index++) {
      const ref = refs[index]!;
      const { field } = ref;
      const configuration = field.section === "agentConfiguration";
      if (configuration !== (pass === 0) || !searched(ref)) continue;
      const content = ref.holder[field.contentKey];
      const findIn = configuration ? findRepeated : find;
      let path: string;
      if (field.kind === "text") {
        const result = replace(content as string, findIn(content as string), placeholders);
        if (result === undefined) continue;
        path = partPath(ref);
        for (const [start, end, kind, placeholder] of result.placed) redactions.push({ part: path, pointer: "", start, end, kind, placeholder });
        const hasSpans = "spans" in ref.holder && (field.contentKey === "text" || field.contentKey === "requestBody");
        if (hasSpans) originalSpans[path] = structuredClone(ref.holder["spans"]);
        changes.push({ ref, content: result.text, spans: hasSpans ? remapSpans(ref.holder["spans"], result.edits) : undefined, hasSpans });
      } else {
        const found: Redacted[] = [];
        const changed = redactJson(content, [], ref, findIn, placeholders, found);
        if (changed === content) continue;
        path = partPath(ref);
        redactions.push(...found);
        changes.push({ ref, content: changed, spans: undefined, hasSpans: false });
      }
      originals[path] = content;
      originalHashes[path] = originalHash(ref, path);
    }
  }
  if (changes.length === 0) return undefined;
  let memoryChanged = false;
  for (const { ref, content, spans, hasSpans } of changes) {
    ref.holder[ref.field.contentKey] = content;
    ref.holder[ref.field.hashKey] = null;
    if (hasSpans) ref.holder["spans"] = spans;
    memoryChanged ||= ref.field.listKey === "workingSetEntries";
  }
  const memory = capture["memoryState"];
  if (memoryChanged && isPlainObject(memory)) memory["contextSetHash"] = null;
  return { capture, redactions, originals, originalHashes, originalSpans };
}

function originalHash(ref: PartRef, path: string): string {
  const computed = computePartHash(ref);
  const supplied = ref.holder[ref.field.hashKey];
  if (supplied !== null && supplied !== undefined && supplied !== computed) {
    throw new ContractError(`${path}: supplied hash ${String(supplied)} disagrees with the content, which hashes to ${computed}`, partPath(ref, ref.field.hashKey));
  }
  return computed;
}

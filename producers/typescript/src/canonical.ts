/**
 * RFC 8785 (JCS) canonical JSON bytes and the `sha256:<hex>` content hash.
 *
 * Byte-identical to `producers/evidence/canonical.py` (proven by the committed vectors). JavaScript
 * already has two of RFC 8785's rules built in: `String(number)` is ES6 Number::toString (the
 * form RFC 8785 prescribes), and the default string sort compares UTF-16 code units (RFC 8785's key
 * order). `JSON.stringify` of a well-formed string escapes exactly what RFC 8785 escapes. What is
 * left is refusing what has no canonical form, with the path of the offending member:
 * lone surrogates, NaN and the infinities, `bigint` (RFC 8785 numbers are doubles: carry big ids as
 * strings), `undefined` inside an array, and anything that is not a plain object, an array or a
 * JSON atom (a `Date`, a `Map`, a class instance: convert it first, nothing is guessed).
 * An object member whose value is `undefined` is absent, as in `JSON.stringify`.
 */
import * as crypto from "node:crypto";
import { ContractError } from "./errors.js";

export const HASH_PREFIX = "sha256:";

/** Deeper than this is refused (the Python reference refuses at its recursion limit, and so circles). */
export const MAX_DEPTH = 900;

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** RFC 8785 text of `value`; `omitNulls` drops object members whose value is null, at every depth. */
export function canonicalText(value: unknown, options: { omitNulls?: boolean; path?: string } = {}): string {
  const omit = options.omitNulls === true;
  try {
    return fast(value, omit, 0);
  } catch (error) {
    if (!(error instanceof Refused)) throw error;
    // the fast walk keeps no paths; walk again, keeping them, to name the member (and say why)
    write(value, omit, options.path ?? "", 0);
    throw new ContractError(error.message, options.path ?? "");
  }
}

/** `canonicalText(value, { omitNulls, path: path() })`, the path made only if `value` is refused
 * (for writers of many small members: the manifest, Merkle leaves). */
export function canonicalMember(value: unknown, omitNulls: boolean, path: () => string): string {
  try {
    return fast(value, omitNulls, 0);
  } catch (error) {
    if (!(error instanceof Refused)) throw error;
    return canonicalText(value, { omitNulls, path: path() });
  }
}

/** `canonicalMember(value, omitNulls, ...)` whose path, made only if the value is refused, is
 * `head`, then `.key`, `[index]` and `.field` where given (no closure made per member). */
export function canonicalAt(value: unknown, omitNulls: boolean, head: string, key?: string, index = -1, field?: string): string {
  try {
    return fast(value, omitNulls, 0);
  } catch (error) {
    if (!(error instanceof Refused)) throw error;
    let path = head;
    if (key !== undefined) path = joinKey(path, key);
    if (index >= 0) path += `[${index}]`;
    if (field !== undefined) path = joinKey(path, field);
    return canonicalText(value, { omitNulls, path });
  }
}

class Refused extends Error {}

/** `write` without paths (the hot path); throws `Refused` where `write` names the member. */
function fast(value: unknown, omit: boolean, depth: number): string {
  switch (typeof value) {
    case "string":
      if (!value.isWellFormed()) throw new Refused("a lone surrogate");
      return quote(value);
    case "number":
      if (!Number.isFinite(value)) throw new Refused(`${value} is not JSON`);
      return String(value);
    case "boolean":
      return value ? "true" : "false";
    case "object":
      break;
    default:
      throw new Refused(`${typeof value} is not JSON`);
  }
  if (value === null) return "null";
  if (depth >= MAX_DEPTH) throw new Refused("nested too deeply");
  if (Array.isArray(value)) {
    // a list of atoms (strings, finite numbers, booleans, null) is JSON.stringify's text exactly
    let atoms = true;
    for (let i = 0; i < value.length && atoms; i++) atoms = isAtom(value[i], false);
    if (atoms) return JSON.stringify(value);
    let out = "[";
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      if (item === undefined) throw new Refused("undefined is not JSON");
      if (i > 0) out += ",";
      out += fast(item, omit, depth + 1);
    }
    return out + "]";
  }
  if (!isPlainObject(value)) throw new Refused("not a plain object");
  const keys = Object.keys(value);
  // so is an object of atoms whose keys are already in RFC 8785 order (JSON.stringify keeps key order)
  let atoms = true;
  for (let i = 0; i < keys.length && atoms; i++) {
    const key = keys[i]!;
    atoms = key.isWellFormed() && (i === 0 || keys[i - 1]! < key) && (value[key] === undefined || isAtom(value[key], omit));
  }
  if (atoms) return JSON.stringify(value);
  const order = sortedKeys(keys);
  let out = "{";
  let first = true;
  for (let i = 0; i < order.length; i++) {
    const key = order[i]!;
    const item = value[key];
    if (item === undefined || (omit && item === null)) continue;
    if (first) first = false;
    else out += ",";
    out += memberName(key) + fast(item, omit, depth + 1);
  }
  return out + "}";
}

/** True for a value whose RFC 8785 text is `JSON.stringify`'s: a well-formed string, a finite
 * number, a boolean, or null (unless nulls are omitted). */
function isAtom(value: unknown, omitNulls: boolean): boolean {
  switch (typeof value) {
    case "string":
      return value.isWellFormed();
    case "number":
      return Number.isFinite(value);
    case "boolean":
      return true;
    case "object":
      return value === null && !omitNulls;
    default:
      return false;
  }
}

const NEEDS_ESCAPE = /["\\\u0000-\u001f]/;

/** `JSON.stringify` of a well-formed string (most need no escape: they are only quoted). */
function quote(value: string): string {
  return NEEDS_ESCAPE.test(value) ? JSON.stringify(value) : '"' + value + '"';
}

interface KeyOrder {
  readonly keys: readonly string[];
  readonly sorted: readonly string[];
  /** `sorted[i] === keys[order[i]]` */
  readonly order: readonly number[];
}

/** Key lists seen before, by their first key: each with its sorted form (shared: never mutated). */
const SORTED = new Map<string, KeyOrder[]>();
let sortedCount = 0;
const SORTED_MAX = 512;
const SORTED_KEYS_MAX = 32;

/** `[...keys].sort()` (RFC 8785 order: UTF-16 code units), remembered for the key lists that
 * repeat from capture to capture (the same members in the same order). Never mutate the result. */
function sortedKeys(keys: readonly string[]): readonly string[] {
  return keys.length < 2 ? keys : keyOrder(keys).sorted;
}

function keyOrder(keys: readonly string[]): KeyOrder {
  const n = keys.length;
  const first = keys[0]!;
  const seen = SORTED.get(first);
  if (seen !== undefined) {
    for (let j = 0; j < seen.length; j++) {
      const entry = seen[j]!;
      const known = entry.keys;
      if (known.length !== n) continue;
      let i = 1;
      while (i < n && known[i] === keys[i]) i++;
      if (i === n) return entry;
    }
  }
  const order = keys.map((_, i) => i).sort((a, b) => (keys[a]! < keys[b]! ? -1 : keys[a]! > keys[b]! ? 1 : 0));
  const entry: KeyOrder = { keys: [...keys], sorted: order.map((i) => keys[i]!), order };
  if (n <= SORTED_KEYS_MAX) {
    if (sortedCount >= SORTED_MAX) {
      SORTED.clear();
      sortedCount = 0;
    }
    const list = SORTED.get(first);
    if (list === undefined) SORTED.set(first, [entry]);
    else list.push(entry);
    sortedCount += 1;
  }
  return entry;
}

/** `"key":` for the member names captures repeat (a bounded memo: arbitrary JSON can't grow it). */
const NAMES = new Map<string, string>();
const NAMES_MAX = 1024;

function memberName(key: string): string {
  let name = NAMES.get(key);
  if (name === undefined) {
    if (!key.isWellFormed()) throw new Refused("a key with a lone surrogate");
    name = JSON.stringify(key) + ":";
    if (NAMES.size < NAMES_MAX) NAMES.set(key, name);
  }
  return name;
}

/**
 * RFC 8785 text of the plain object `value` as `member` writes its members (undefined: the member
 * is left out); members that are null or undefined are left out. For views of a value (the
 * manifest) written without building the view.
 */
export function objectText(value: Record<string, unknown>, member: (key: string, item: unknown) => string | undefined, path: string | (() => string) = ""): string {
  const keys = sortedKeys(Object.keys(value));
  let out = "{";
  let first = true;
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!;
    const item = value[key];
    if (item === undefined || item === null) continue;
    const text = member(key, item);
    if (text === undefined) continue;
    if (!key.isWellFormed()) throw new ContractError("not canonicalizable: a key with a lone surrogate", joinKey(typeof path === "string" ? path : path(), key));
    if (first) first = false;
    else out += ",";
    out += memberName(key) + text;
  }
  return out + "}";
}

/**
 * Pieces of one text being written (the manifest), joined once at the end: no intermediate
 * strings (each `+=` of a member would make a cons string, a short one a flat copy). The list is
 * this module's and reused; its slots are blanked after the join so it holds no text between
 * captures (young strings held by an old list would survive collections). Or, with `writeUtf8`,
 * the same pieces written straight into a reused buffer as UTF-8 (no text made at all).
 */
const MAIN_PIECES: string[] = [];
let PIECES = MAIN_PIECES;
/** The number of pieces put; when writing bytes, the offset in `BYTES` the next one goes to. */
let pieceCount = 0;
/** Where `put` writes UTF-8 (`writeUtf8`), else undefined (pieces). */
let BYTES: Buffer | undefined;
let utf8Buffer = Buffer.allocUnsafeSlow(16 * 1024);

// Buffer's UTF-8 writer without `write`'s argument handling, where Node has it
type Utf8Write = (this: Buffer, text: string, offset: number, length: number) => number;
const nativeUtf8Write = (Buffer.prototype as unknown as { utf8Write?: Utf8Write }).utf8Write;
const utf8Write: Utf8Write =
  typeof nativeUtf8Write === "function"
    ? nativeUtf8Write
    : function (this: Buffer, text: string, offset: number, length: number): number {
        return this.write(text, offset, length, "utf8");
      };

function put(piece: string): void {
  if (BYTES === undefined) PIECES[pieceCount++] = piece;
  else putUtf8(piece);
}

function putUtf8(piece: string): void {
  const length = piece.length;
  let buffer = BYTES!;
  if (pieceCount + length * 3 > buffer.length) {
    const bigger = Buffer.allocUnsafeSlow(Math.max(buffer.length * 2, pieceCount + length * 3));
    buffer.copy(bigger, 0, 0, pieceCount);
    BYTES = utf8Buffer = buffer = bigger;
  }
  let at = pieceCount;
  if (length < 32) {
    // short (most pieces): ASCII by hand, anything else through Buffer's UTF-8 writer
    let i = 0;
    for (; i < length; i++) {
      const c = piece.charCodeAt(i);
      if (c >= 0x80) break;
      buffer[at++] = c;
    }
    if (i < length) at += utf8Write.call(buffer, i === 0 ? piece : piece.slice(i), at, buffer.length - at);
    pieceCount = at;
    return;
  }
  pieceCount = at + utf8Write.call(buffer, piece, at, buffer.length - at);
}

/**
 * Write a text with `write` (which calls the `put*` functions below) and return it joined.
 * `list`: the piece list to use (default the module's): a caller writing many texts of another
 * size keeps its own, so neither list is trimmed and grown again by the other's texts.
 */
export function writePieces(write: () => void, list: string[] = MAIN_PIECES): string {
  const outerList = PIECES;
  const outerCount = pieceCount;
  const outerBytes = BYTES;
  PIECES = list;
  pieceCount = 0;
  BYTES = undefined;
  try {
    write();
    const count = pieceCount;
    if (list.length !== count) list.length = count;
    return list.join("");
  } finally {
    for (let i = 0; i < list.length; i++) list[i] = "";
    PIECES = outerList;
    pieceCount = outerCount;
    BYTES = outerBytes;
  }
}

/**
 * What `writePieces(write)` would return, as UTF-8 written into a buffer this module reuses,
 * starting at `room`: returns the offset after the last byte; the buffer is `utf8Scratch()`
 * (valid until the next call: for a caller that uses the bytes at once). Not reentrant.
 */
export function writeUtf8(room: number, write: () => void): number {
  if (BYTES !== undefined) throw new Error("writeUtf8 is not reentrant");
  const outerCount = pieceCount;
  if (utf8Buffer.length < room + 1024) utf8Buffer = Buffer.allocUnsafeSlow(room + 16 * 1024);
  BYTES = utf8Buffer;
  pieceCount = room;
  try {
    write();
    return pieceCount;
  } finally {
    BYTES = undefined;
    pieceCount = outerCount;
  }
}

/** The buffer `writeUtf8` last wrote into. */
export function utf8Scratch(): Buffer {
  return utf8Buffer;
}

/** Put text written elsewhere (already RFC 8785). */
export function putText(text: string): void {
  put(text);
}

/** `fast` writing its pieces (the same text); throws `Refused`. */
function fastPut(value: unknown, omit: boolean, depth: number): void {
  switch (typeof value) {
    case "string":
      if (!value.isWellFormed()) throw new Refused("a lone surrogate");
      if (NEEDS_ESCAPE.test(value)) put(JSON.stringify(value));
      else {
        put('"');
        put(value);
        put('"');
      }
      return;
    case "number":
      if (!Number.isFinite(value)) throw new Refused(`${value} is not JSON`);
      put(String(value));
      return;
    case "boolean":
      put(value ? "true" : "false");
      return;
    case "object":
      break;
    default:
      throw new Refused(`${typeof value} is not JSON`);
  }
  if (value === null) {
    put("null");
    return;
  }
  if (depth >= MAX_DEPTH) throw new Refused("nested too deeply");
  if (Array.isArray(value)) {
    put("[");
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      if (item === undefined) throw new Refused("undefined is not JSON");
      if (i > 0) put(",");
      fastPut(item, omit, depth + 1);
    }
    put("]");
    return;
  }
  if (!isPlainObject(value)) throw new Refused("not a plain object");
  const order = sortedKeys(Object.keys(value));
  put("{");
  let first = true;
  for (let i = 0; i < order.length; i++) {
    const key = order[i]!;
    const item = value[key];
    if (item === undefined || (omit && item === null)) continue;
    if (first) first = false;
    else put(",");
    put(memberName(key));
    fastPut(item, omit, depth + 1);
  }
  put("}");
}

/** `put(canonicalAt(value, omitNulls, head, key, index, field))`, without the intermediate strings. */
export function putAt(value: unknown, omitNulls: boolean, head: string, key?: string, index = -1, field?: string): void {
  const mark = pieceCount;
  try {
    fastPut(value, omitNulls, 0);
  } catch (error) {
    if (!(error instanceof Refused)) throw error;
    pieceCount = mark;
    put(canonicalAt(value, omitNulls, head, key, index, field)); // throws, naming the member
  }
}

/** `put(objectText(value, ...))`: `member` puts the member's text and returns true, or puts
 * nothing and returns false (the member is left out). */
export function putObject(value: Record<string, unknown>, member: (key: string, item: unknown) => boolean, path: string | (() => string) = ""): void {
  const keys = sortedKeys(Object.keys(value));
  put("{");
  let first = true;
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!;
    const item = value[key];
    if (item === undefined || item === null) continue;
    const mark = pieceCount;
    if (!key.isWellFormed()) {
      // refused if it is written (its value is checked first, as the plain walk does)
      if (member(key, item)) throw new ContractError("not canonicalizable: a key with a lone surrogate", joinKey(typeof path === "string" ? path : path(), key));
      pieceCount = mark;
      continue;
    }
    if (!first) put(",");
    put(memberName(key));
    if (!member(key, item)) {
      pieceCount = mark;
      continue;
    }
    first = false;
  }
  put("}");
}

/**
 * `putObject` of the members of `value` that are in `names` (`keep`), or not in it (`!keep`),
 * each written by `putAt(item, true, head, key, index, member)`: without a closure per object.
 */
export function putMembers(value: Record<string, unknown>, names: ReadonlySet<string>, keep: boolean, head: string, key?: string, index = -1): void {
  const keys = sortedKeys(Object.keys(value));
  put("{");
  let first = true;
  for (let i = 0; i < keys.length; i++) {
    const member = keys[i]!;
    const item = value[member];
    if (item === undefined || item === null || names.has(member) !== keep) continue;
    if (!member.isWellFormed()) {
      putAt(item, true, head, key, index, member); // its value is checked first, as the plain walk does
      let path = key === undefined ? head : joinKey(head, key);
      if (index >= 0) path += `[${index}]`;
      throw new ContractError("not canonicalizable: a key with a lone surrogate", joinKey(path, member));
    }
    if (!first) put(",");
    first = false;
    put(memberName(member));
    putAt(item, true, head, key, index, member);
  }
  put("}");
}

/** RFC 8785 canonical UTF-8 bytes of `value`; `ContractError` naming the member if it has none. */
export function canonicalJson(value: unknown, options: { omitNulls?: boolean; path?: string } = {}): Buffer {
  return Buffer.from(canonicalText(value, options), "utf8");
}

// `crypto.hash` (Node >= 20.12) hashes in one call without a Hash object: several times cheaper
// for the small inputs a capture is made of (part hashes, Merkle nodes)
const oneShot = typeof crypto.hash === "function" ? crypto.hash : undefined;

/** hex(sha256(data)); a string is hashed as its UTF-8 bytes. */
export function sha256Hex(data: Buffer | string): string {
  return oneShot !== undefined ? oneShot("sha256", data, "hex") : crypto.createHash("sha256").update(data).digest("hex");
}

/** sha256(data), 32 bytes; a string is hashed as its UTF-8 bytes. */
export function sha256Digest(data: Buffer | string): Buffer {
  return oneShot !== undefined ? oneShot("sha256", data, "buffer") : crypto.createHash("sha256").update(data).digest();
}

/** `"sha256:" + hex(sha256(data))`. */
export function contentHash(data: Buffer | string): string {
  return HASH_PREFIX + sha256Hex(data);
}

/** Hash of a text part: its UTF-8 bytes exactly as given (a lone surrogate is refused). */
export function textHash(text: string, path = ""): string {
  if (!text.isWellFormed()) throw new ContractError("not valid Unicode text (a lone surrogate)", path);
  return HASH_PREFIX + sha256Hex(text);
}

/** Hash of a JSON part: its RFC 8785 bytes (computed once for a value `copyJson` made). `path`
 * (or the function that makes it, called only if the value is refused) names it in errors. */
export function jsonHash(value: unknown, path: string | (() => string) = ""): string {
  const known = typeof value === "object" && value !== null ? CANONICAL.get(value) : undefined;
  if (known === undefined) return HASH_PREFIX + sha256Hex(canonicalLazy(value, path));
  return (known.hash ??= HASH_PREFIX + sha256Hex((known.canonical ??= knownTexts(known, value) ?? canonicalLazy(value, path))));
}

/** The RFC 8785 text of a `copyJson` copy whose numbers print alike in Python, its Python text
 * kept too (one walk makes both; the strings of members where the two agree are shared); else
 * undefined. */
function knownTexts(known: Known, value: unknown): string | undefined {
  if (!known.pythonSafe) return undefined;
  // keys in RFC 8785 order at every depth (most JSON handed over): both texts are JSON.stringify's,
  // one flat string (no member strings, joins or copies)
  const canonical = stringifiesCanonically(value, 0) ? (bothPython = JSON.stringify(value)) : both(value);
  known.python ??= bothPython;
  return canonical;
}

/** True when `JSON.stringify` of a checked copy (`copyJson`'s, or adopted) is its RFC 8785 text:
 * every object's keys, in the order JSON.stringify writes them, ascend by UTF-16 code units. */
function stringifiesCanonically(value: unknown, depth: number): boolean {
  if (typeof value !== "object" || value === null) return true;
  if (depth >= MAX_DEPTH) return false;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (!stringifiesCanonically(value[i], depth + 1)) return false;
    return true;
  }
  let previous: string | undefined;
  for (const key in value) {
    if (previous !== undefined && !(previous < key)) return false;
    previous = key;
    if (!stringifiesCanonically((value as Record<string, unknown>)[key], depth + 1)) return false;
  }
  return true;
}

/** What `both` left: the `JSON.stringify` text of the value it was given. */
let bothPython = "";

/**
 * RFC 8785 text of a checked copy (`copyJson`'s: plain objects, finite numbers, well-formed
 * strings, no undefined), leaving its `JSON.stringify` text in `bothPython` (the same string
 * wherever the two agree: atoms, and containers whose keys are already in RFC 8785 order).
 */
function both(value: unknown): string {
  if (typeof value === "string") return (bothPython = quote(value));
  if (typeof value !== "object" || value === null) return (bothPython = JSON.stringify(value));
  if (Array.isArray(value)) {
    let atoms = true;
    for (let i = 0; i < value.length && atoms; i++) atoms = typeof value[i] !== "object" || value[i] === null;
    if (atoms) return (bothPython = JSON.stringify(value));
    let canonical = "[";
    let python: string | undefined; // made once the two differ
    for (let i = 0; i < value.length; i++) {
      const separator = i > 0 ? "," : "";
      const text = both(value[i]);
      const itemPython = bothPython;
      if (python === undefined && itemPython !== text) python = canonical;
      canonical += separator + text;
      if (python !== undefined) python += separator + itemPython;
    }
    canonical += "]";
    bothPython = python === undefined ? canonical : python + "]";
    return canonical;
  }
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  let sorted = true;
  let atoms = true;
  for (let i = 0; i < keys.length; i++) {
    if (i > 0 && !(keys[i - 1]! < keys[i]!)) sorted = false;
    const item = record[keys[i]!];
    if (typeof item === "object" && item !== null) atoms = false;
  }
  if (sorted && atoms) return (bothPython = JSON.stringify(record));
  const members = new Array<string>(keys.length);
  let pythonMembers: string[] | undefined; // made once the two differ
  for (let i = 0; i < keys.length; i++) {
    const name = memberName(keys[i]!);
    const text = both(record[keys[i]!]);
    const itemPython = bothPython;
    members[i] = name + text;
    if (pythonMembers === undefined && itemPython !== text) pythonMembers = members.slice(0, i);
    if (pythonMembers !== undefined) pythonMembers.push(itemPython === text ? members[i]! : name + itemPython);
  }
  const python = "{" + (pythonMembers ?? members).join(",") + "}";
  if (sorted) {
    const canonical = pythonMembers === undefined ? python : "{" + members.join(",") + "}";
    bothPython = python;
    return canonical;
  }
  const order = keyOrder(keys).order;
  let canonical = "{";
  for (let i = 0; i < order.length; i++) canonical += (i > 0 ? "," : "") + members[order[i]!]!;
  bothPython = python;
  return canonical + "}";
}

function canonicalLazy(value: unknown, path: string | (() => string)): string {
  return typeof path === "string" ? canonicalText(value, { path }) : canonicalMember(value, false, path);
}

/**
 * A deep copy of a JSON value (plain objects, arrays, finite numbers, well-formed strings,
 * booleans, null; object members that are `undefined` are left out), or `ContractError` naming
 * the member that is not JSON. What a decision keeps of what the agent handed it.
 */
export function copyJson(value: unknown, path = ""): unknown {
  try {
    const walk: Walk = { pythonSafe: true };
    const copied = copy(value, 0, walk);
    // the copy is the decision's own and never changes: what is learnt of it is kept by identity
    if (typeof copied === "object" && copied !== null) CANONICAL.set(copied, { canonical: undefined, pythonSafe: walk.pythonSafe, hash: undefined, python: undefined });
    return copied;
  } catch (error) {
    if (!(error instanceof Refused)) throw error;
    canonicalText(value, { path }); // names the member
    throw new ContractError(error.message, path);
  }
}

/**
 * What is known of a JSON value `copyJson` made (by identity: those objects are never mutated).
 * Its texts are made when first asked for, on the recorder's turn: a decision waiting in the
 * queue holds only its copy (long-lived text would be copied by every young-generation GC).
 */
interface Known {
  canonical: string | undefined;
  /** every number in it prints alike in JavaScript and Python, so `JSON.stringify` is the Python codec's text */
  readonly pythonSafe: boolean;
  hash: string | undefined;
  python: string | undefined;
}

const CANONICAL = new WeakMap<object, Known>();

/** The RFC 8785 text of an object `copyJson` made (made once), if it is one. */
export function knownCanonical(value: unknown): string | undefined {
  const known = typeof value === "object" && value !== null ? CANONICAL.get(value) : undefined;
  if (known === undefined) return undefined;
  return (known.canonical ??= knownTexts(known, value) ?? canonicalText(value));
}

/** The Python codec's JSON text of an object `copyJson` made whose numbers all print alike in
 * JavaScript and Python (then it is `JSON.stringify`'s, made once), else undefined. */
export function knownPythonText(value: unknown): string | undefined {
  const known = typeof value === "object" && value !== null ? CANONICAL.get(value) : undefined;
  if (known === undefined || !known.pythonSafe) return undefined;
  if (known.python === undefined && known.canonical === undefined) known.canonical = knownTexts(known, value);
  return (known.python ??= JSON.stringify(value));
}

/** True when JavaScript's and Python's `json` write this number alike (an int in range, or a
 * non-integral double that neither writes with an exponent). */
export function printsAlike(value: number): boolean {
  if (Number.isSafeInteger(value)) return !Object.is(value, -0);
  const magnitude = Math.abs(value);
  return Number.isFinite(value) && !Number.isInteger(value) && magnitude >= 1e-4 && magnitude < 1e16;
}

interface Walk {
  pythonSafe: boolean;
}

/**
 * Know `value` as `copyJson`'s copies are known (its RFC 8785 and Python texts made once, in one
 * walk), without copying it: for JSON this process owns and will never change, such as a capture's
 * parts after they crossed to a sealing thread. False (nothing learnt) if it is not plain JSON.
 */
export function adoptJson(value: unknown): boolean {
  if (typeof value !== "object" || value === null || CANONICAL.has(value)) return false;
  const walk: Walk = { pythonSafe: true };
  if (!isJson(value, 0, walk)) return false;
  CANONICAL.set(value, { canonical: undefined, pythonSafe: walk.pythonSafe, hash: undefined, python: undefined });
  return true;
}

/** True for what `copy` would copy as it is (no undefined members, which a copy leaves out). */
function isJson(value: unknown, depth: number, walk: Walk): boolean {
  switch (typeof value) {
    case "string":
      return value.isWellFormed();
    case "number":
      if (!Number.isFinite(value)) return false;
      if (walk.pythonSafe && !printsAlike(value)) walk.pythonSafe = false;
      return true;
    case "boolean":
      return true;
    case "object":
      break;
    default:
      return false;
  }
  if (value === null) return true;
  if (depth >= MAX_DEPTH) return false;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (!isJson(value[i], depth + 1, walk)) return false;
    return true;
  }
  if (!isPlainObject(value)) return false;
  for (const key in value) {
    if (!Object.hasOwn(value, key) || !key.isWellFormed() || !isJson(value[key], depth + 1, walk)) return false;
  }
  return true;
}

/** A checked copy of `value` (refusing what has no RFC 8785 form). */
function copy(value: unknown, depth: number, walk: Walk): unknown {
  switch (typeof value) {
    case "string":
      if (!value.isWellFormed()) throw new Refused("a lone surrogate");
      return value;
    case "number":
      if (!Number.isFinite(value)) throw new Refused(`${value} is not JSON`);
      if (walk.pythonSafe && !printsAlike(value)) walk.pythonSafe = false;
      return value;
    case "boolean":
      return value;
    case "object":
      break;
    default:
      throw new Refused(`${typeof value} is not JSON`);
  }
  if (value === null) return null;
  if (depth >= MAX_DEPTH) throw new Refused("nested too deeply");
  if (Array.isArray(value)) {
    const out = new Array<unknown>(value.length);
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      if (item === undefined) throw new Refused("undefined is not JSON");
      out[i] = copy(item, depth + 1, walk);
    }
    return out;
  }
  if (!isPlainObject(value)) throw new Refused("not a plain object");
  const out: Record<string, unknown> = {};
  for (const key in value) {
    const item = value[key];
    if (item === undefined) continue;
    if (!key.isWellFormed()) throw new Refused("a key with a lone surrogate");
    setOwn(out, key, copy(item, depth + 1, walk));
  }
  return out;
}

/** `target[key] = value` as an own data member, the key `__proto__` included: plain assignment takes
 * that key as the object's prototype, so a member of content named so would vanish from what is
 * sealed (and escape redaction) instead of being kept like any other. */
export function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  if (key === "__proto__") Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  else target[key] = value;
}

/** True for a well-formed `sha256:<64 lowercase hex>`. */
export function isHash(value: unknown): value is string {
  return typeof value === "string" && /^sha256:[0-9a-f]{64}$/.test(value);
}

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

export function joinKey(path: string, key: string): string {
  return path ? `${path}.${key}` : key;
}

function write(value: unknown, omit: boolean, path: string, depth: number): string {
  switch (typeof value) {
    case "string":
      if (!value.isWellFormed()) throw new ContractError("not canonicalizable: a lone surrogate", path);
      return JSON.stringify(value);
    case "number":
      if (!Number.isFinite(value)) throw new ContractError(`not canonicalizable: ${value} is not JSON`, path);
      return String(value);
    case "boolean":
      return value ? "true" : "false";
    case "bigint":
      throw new ContractError(
        "a bigint has no RFC 8785 form (numbers are doubles); carry big integers as strings",
        path,
      );
    case "object":
      break;
    default:
      throw new ContractError(`${typeof value} is not JSON`, path);
  }
  if (value === null) return "null";
  if (depth >= MAX_DEPTH) throw new ContractError("JSON value is nested too deeply (or is circular)", path);
  if (Array.isArray(value)) {
    let out = "[";
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      if (item === undefined) throw new ContractError("undefined is not JSON", `${path}[${i}]`);
      if (i > 0) out += ",";
      out += write(item, omit, `${path}[${i}]`, depth + 1);
    }
    return out + "]";
  }
  if (!isPlainObject(value)) {
    const kind = (value as object).constructor?.name ?? "object";
    throw new ContractError(`a ${kind} is not JSON (convert it to a plain value first)`, path);
  }
  const keys = Object.keys(value).sort();
  let out = "{";
  let first = true;
  for (const key of keys) {
    const item = value[key];
    if (item === undefined || (omit && item === null)) continue;
    const at = joinKey(path, key);
    if (!key.isWellFormed()) throw new ContractError("not canonicalizable: a key with a lone surrogate", at);
    out += (first ? "" : ",") + JSON.stringify(key) + ":" + write(item, omit, at, depth + 1);
    first = false;
  }
  return out + "}";
}

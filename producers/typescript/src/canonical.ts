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
import { createHash } from "node:crypto";
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

class Refused extends Error {}

/** `write` without paths (the hot path); throws `Refused` where `write` names the member. */
function fast(value: unknown, omit: boolean, depth: number): string {
  switch (typeof value) {
    case "string":
      if (!value.isWellFormed()) throw new Refused("a lone surrogate");
      return JSON.stringify(value);
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
    let out = "[";
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      if (item === undefined) throw new Refused("undefined is not JSON");
      out += (i > 0 ? "," : "") + fast(item, omit, depth + 1);
    }
    return out + "]";
  }
  if (!isPlainObject(value)) throw new Refused("not a plain object");
  const keys = Object.keys(value).sort();
  let out = "{";
  for (const key of keys) {
    const item = value[key];
    if (item === undefined || (omit && item === null)) continue;
    if (!key.isWellFormed()) throw new Refused("a key with a lone surrogate");
    out += (out.length > 1 ? "," : "") + JSON.stringify(key) + ":" + fast(item, omit, depth + 1);
  }
  return out + "}";
}

/** RFC 8785 canonical UTF-8 bytes of `value`; `ContractError` naming the member if it has none. */
export function canonicalJson(value: unknown, options: { omitNulls?: boolean; path?: string } = {}): Buffer {
  return Buffer.from(canonicalText(value, options), "utf8");
}

/** `"sha256:" + hex(sha256(data))`. */
export function contentHash(data: Buffer | string): string {
  return HASH_PREFIX + createHash("sha256").update(data).digest("hex");
}

/** Hash of a text part: its UTF-8 bytes exactly as given (a lone surrogate is refused). */
export function textHash(text: string, path = ""): string {
  if (!text.isWellFormed()) throw new ContractError("not valid Unicode text (a lone surrogate)", path);
  return HASH_PREFIX + createHash("sha256").update(text, "utf8").digest("hex");
}

/** Hash of a JSON part: its RFC 8785 bytes. */
export function jsonHash(value: unknown, path = ""): string {
  return HASH_PREFIX + createHash("sha256").update(canonicalText(value, { path }), "utf8").digest("hex");
}

/**
 * A deep copy of a JSON value (plain objects, arrays, finite numbers, well-formed strings,
 * booleans, null; object members that are `undefined` are left out), or `ContractError` naming
 * the member that is not JSON. What a decision keeps of what the agent handed it.
 */
export function copyJson(value: unknown, path = ""): unknown {
  try {
    const [copied, text] = copy(value, 0);
    // the copy is the decision's own and never changes: its RFC 8785 text is known from here on
    if (typeof copied === "object" && copied !== null) CANONICAL.set(copied, text);
    return copied;
  } catch (error) {
    if (!(error instanceof Refused)) throw error;
    canonicalText(value, { path }); // names the member
    throw new ContractError(error.message, path);
  }
}

/** RFC 8785 text of the JSON values `copyJson` made (by identity: those objects are never mutated). */
const CANONICAL = new WeakMap<object, string>();

/** The RFC 8785 text `copyJson` already made for this very object, if any. */
export function knownCanonical(value: unknown): string | undefined {
  return typeof value === "object" && value !== null ? CANONICAL.get(value) : undefined;
}

/** [copy, its RFC 8785 text] in one walk. */
function copy(value: unknown, depth: number): [unknown, string] {
  switch (typeof value) {
    case "string":
      if (!value.isWellFormed()) throw new Refused("a lone surrogate");
      return [value, JSON.stringify(value)];
    case "number":
      if (!Number.isFinite(value)) throw new Refused(`${value} is not JSON`);
      return [value, String(value)];
    case "boolean":
      return [value, value ? "true" : "false"];
    case "object":
      break;
    default:
      throw new Refused(`${typeof value} is not JSON`);
  }
  if (value === null) return [null, "null"];
  if (depth >= MAX_DEPTH) throw new Refused("nested too deeply");
  if (Array.isArray(value)) {
    const out = new Array<unknown>(value.length);
    let text = "[";
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      if (item === undefined) throw new Refused("undefined is not JSON");
      const [copied, inner] = copy(item, depth + 1);
      out[i] = copied;
      text += (i > 0 ? "," : "") + inner;
    }
    return [out, text + "]"];
  }
  if (!isPlainObject(value)) throw new Refused("not a plain object");
  const out: Record<string, unknown> = {};
  const texts = new Map<string, string>();
  for (const key in value) {
    const item = value[key];
    if (item === undefined) continue;
    if (!key.isWellFormed()) throw new Refused("a key with a lone surrogate");
    const [copied, inner] = copy(item, depth + 1);
    out[key] = copied;
    texts.set(key, inner);
  }
  let text = "{";
  for (const key of [...texts.keys()].sort()) text += (text.length > 1 ? "," : "") + JSON.stringify(key) + ":" + texts.get(key)!;
  return [out, text + "}"];
}/** True for a well-formed `sha256:<64 lowercase hex>`. */
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

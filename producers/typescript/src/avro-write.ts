/**
 * A writer compiled once from an avsc type tree that checks a value while it writes its Avro
 * binary form into one growing scratch buffer: no separate validation pass, no generic type
 * dispatch per value. It accepts a subset of what avsc accepts (records must be plain objects) and
 * writes the same bytes for what it accepts; anything else (or anything it does not handle) stops
 * it with `Invalid`, and the caller falls back to avsc, which accepts or names the problem.
 *
 * Per-field hooks convert a member before it is written (the JSON-valued content fields of a
 * capture travel as JSON text), so no converted copy of the value is built.
 */
import type avro from "avsc";
import { isPlainObject } from "./canonical.js";

/** The writer met a value it will not write (the caller asks avsc instead). */
export class Invalid extends Error {}
const INVALID = new Invalid("not written by the compiled writer");

/** The parts of avsc's (5.7.9) parsed types the compiler reads. */
interface AvscType {
  readonly typeName: string;
  readonly fields?: readonly { readonly name: string; readonly type: AvscType; defaultValue(): unknown }[];
  readonly itemsType?: AvscType;
  readonly types?: readonly AvscType[];
  readonly branchName?: string;
  toBuffer(value: unknown): Buffer;
}

/** A member converted before it is written. */
export type Hook = (value: unknown) => unknown;

type Write = (value: unknown) => void;

// Buffer's UTF-8 writer without `write`'s argument handling (avsc calls it too), where Node has it
type Utf8Write = (this: Buffer, text: string, offset: number, length: number) => number;
const nativeUtf8Write = (Buffer.prototype as unknown as { utf8Write?: Utf8Write }).utf8Write;
/** `buffer.write(text, offset, length, "utf8")`, called as `utf8Write.call(buffer, ...)`. */
export const utf8Write: Utf8Write =
  typeof nativeUtf8Write === "function"
    ? nativeUtf8Write
    : function (this: Buffer, text: string, offset: number, length: number): number {
        return this.write(text, offset, length, "utf8");
      };

let buf = Buffer.allocUnsafeSlow(64 * 1024);
let pos = 0;

function reserve(size: number): void {
  if (pos + size <= buf.length) return;
  let length = buf.length * 2;
  while (length < pos + size) length *= 2;
  const bigger = Buffer.allocUnsafeSlow(length);
  buf.copy(bigger, 0, 0, pos);
  buf = bigger;
}

/** Avro's zigzag varint of a long (the arithmetic avsc's Tap.writeLong does). */
function writeLong(n: number): void {
  reserve(10);
  if (n >= -1073741824 && n < 1073741824) {
    let m = n >= 0 ? n << 1 : (~n << 1) | 1;
    while (m > 0x7f) {
      buf[pos++] = (m & 0x7f) | 0x80;
      m >>>= 7;
    }
    buf[pos++] = m;
  } else {
    let f = n >= 0 ? n * 2 : -n * 2 - 1;
    while (f >= 128) {
      buf[pos++] = (f % 128) | 0x80;
      f = Math.floor(f / 128);
    }
    buf[pos++] = f;
  }
}

function varintSize(n: number): number {
  let size = 1;
  while (n >= 128) {
    n = Math.floor(n / 128);
    size += 1;
  }
  return size;
}

function writeString(s: string): void {
  const length = s.length;
  if (length < 64) {
    // short: ASCII by hand (one byte per code unit); anything else through Buffer's UTF-8 writer
    reserve(2 + length * 3); // a length of 64 bytes or more takes two
    const start = pos;
    let i = 0;
    pos += 1;
    for (; i < length; i++) {
      const c = s.charCodeAt(i);
      if (c >= 0x80) break;
      buf[pos++] = c;
    }
    if (i < length) {
      const rest = s.slice(i);
      // avsc writes a short string's lone surrogate its own way: leave such a string to it
      if (!rest.isWellFormed()) throw INVALID;
      pos += utf8Write.call(buf, rest, pos, buf.length - pos);
    }
    const size = pos - start - 1;
    if (size < 64) buf[start] = size << 1;
    else {
      // two-byte length (size < 192): move the bytes up one
      buf.copyWithin(start + 2, start + 1, pos);
      buf[start] = ((size << 1) & 0x7f) | 0x80;
      buf[start + 1] = size >>> 6;
      pos += 1;
    }
    return;
  }
  // long: write at the room the largest length needs, then move down if the length is shorter
  const room = varintSize(length * 6);
  reserve(room + length * 3);
  const start = pos;
  const size = utf8Write.call(buf, s, start + room, buf.length - start - room);
  const prefix = varintSize(size * 2);
  if (prefix < room) buf.copyWithin(start + prefix, start + room, start + room + size);
  pos = start;
  writeLong(size);
  pos = start + prefix + size;
}

function isLong(value: unknown): value is number {
  return typeof value === "number" && value % 1 === 0 && value >= -9007199254740990 && value <= 9007199254740990;
}

const writeNullValue: Write = (value) => {
  if (value !== null) throw INVALID;
};
const writeBoolean: Write = (value) => {
  if (typeof value !== "boolean") throw INVALID;
  reserve(1);
  buf[pos++] = value ? 1 : 0;
};
const writeLongValue: Write = (value) => {
  if (!isLong(value)) throw INVALID;
  writeLong(value);
};
const writeDouble: Write = (value) => {
  if (typeof value !== "number") throw INVALID;
  reserve(8);
  pos = buf.writeDoubleLE(value, pos);
};
const writeStringValue: Write = (value) => {
  if (typeof value !== "string") throw INVALID;
  writeString(value);
};

/** avsc's value bucket of an unwrapped union branch. */
function bucketOf(type: AvscType): string {
  switch (type.typeName) {
    case "double":
    case "float":
    case "int":
    case "long":
      return "number";
    case "record":
    case "map":
    case "error":
      return "object";
    default:
      return type.typeName;
  }
}

function compileRecord(type: AvscType, hooks: ReadonlyMap<string, Hook>, path: string): Write {
  const fields = (type.fields ?? []).map((field) => {
    const fallback = field.defaultValue();
    return {
      name: field.name,
      write: compile(field.type, hooks, `${path}.${field.name}`),
      // the bytes avsc writes for a missing member that has a default
      defaultBytes: fallback === undefined ? undefined : field.type.toBuffer(fallback),
      hook: hooks.get(`${path}.${field.name}`),
    };
  });
  const names = new Set(fields.map((field) => field.name));
  return (value) => {
    if (!isPlainObject(value)) throw INVALID;
    for (const key in value) if (!names.has(key)) throw INVALID; // avsc's noUndeclaredFields
    for (let i = 0; i < fields.length; i++) {
      const field = fields[i]!;
      let item = value[field.name];
      if (field.hook !== undefined) item = field.hook(item);
      if (item !== undefined) field.write(item);
      else if (field.defaultBytes !== undefined) {
        const bytes = field.defaultBytes;
        reserve(bytes.length);
        for (let j = 0; j < bytes.length; j++) buf[pos++] = bytes[j]!;
      } else throw INVALID;
    }
  };
}

function compile(type: AvscType, hooks: ReadonlyMap<string, Hook>, path: string): Write {
  switch (type.typeName) {
    case "null":
      return writeNullValue;
    case "boolean":
      return writeBoolean;
    case "long":
      return writeLongValue;
    case "double":
      return writeDouble;
    case "string":
      return writeStringValue;
    case "record":
      return compileRecord(type, hooks, path);
    case "array": {
      const items = compile(type.itemsType!, hooks, path);
      return (value) => {
        if (!Array.isArray(value)) throw INVALID;
        const n = value.length;
        if (n > 0) {
          writeLong(n);
          for (let i = 0; i < n; i++) items(value[i]);
        }
        reserve(1);
        buf[pos++] = 0;
      };
    }
    case "union:unwrapped": {
      const branches = type.types!;
      let nullIndex = -1;
      const byBucket = new Map<string, { index: number; write: Write }>();
      branches.forEach((branch, index) => {
        if (branch.typeName === "null") nullIndex = index;
        else byBucket.set(bucketOf(branch), { index, write: compile(branch, hooks, path) });
      });
      const strings = byBucket.get("string");
      const objects = byBucket.get("object");
      const arrays = byBucket.get("array");
      const numbers = byBucket.get("number");
      const booleans = byBucket.get("boolean");
      return (value) => {
        let branch: { index: number; write: Write } | undefined;
        if (value === null) {
          if (nullIndex < 0) throw INVALID;
          writeLong(nullIndex);
          return;
        }
        switch (typeof value) {
          case "string":
            branch = strings;
            break;
          case "number":
            branch = numbers;
            break;
          case "boolean":
            branch = booleans;
            break;
          case "object":
            branch = Array.isArray(value) ? arrays : Buffer.isBuffer(value) ? undefined : objects;
            break;
          default:
            branch = undefined;
        }
        if (branch === undefined) throw INVALID;
        writeLong(branch.index);
        branch.write(value);
      };
    }
    case "union:wrapped": {
      const branches = (type.types ?? []).map((branch, index) => ({ name: branch.branchName ?? "", index, write: compile(branch, hooks, path) }));
      const byName = new Map(branches.map((branch) => [branch.name, branch]));
      const nullBranch = byName.get("null");
      return (value) => {
        if (value === null) {
          if (nullBranch === undefined) throw INVALID;
          writeLong(nullBranch.index);
          return;
        }
        if (typeof value !== "object") throw INVALID;
        const keys = Object.keys(value);
        const branch = keys.length === 1 ? byName.get(keys[0]!) : undefined;
        if (branch === undefined || branch.name === "null") throw INVALID;
        writeLong(branch.index);
        branch.write((value as Record<string, unknown>)[branch.name]);
      };
    }
    default:
      throw new Error(`the compiled Avro writer has no ${type.typeName}`);
  }
}

export type Encode = (value: unknown) => Buffer;

/**
 * An encoder of values of `type` (a record): `header` then the Avro body, in a buffer of their own
 * (exactly their size, never a slice of Node's pool). `hooks` by `<record name path>.<field>`,
 * where the path is the top record `$` and field names down to the record (`$.input.requestPayload`;
 * list items share their list's path). Throws `Invalid` when the value is not one it writes.
 */
export function compileEncoder(type: avro.Type, header: Buffer, hooks: ReadonlyMap<string, Hook> = new Map()): Encode {
  const write = compile(type as unknown as AvscType, hooks, "$");
  return (value) => {
    pos = 0;
    reserve(header.length);
    pos += header.copy(buf, 0);
    write(value);
    const out = Buffer.allocUnsafeSlow(pos);
    out.set(buf.subarray(0, pos));
    return out;
  };
}

/**
 * Avro single-object encoding of captures (capture/v3), events (flag/v1) and claim checks, as
 * `schemas/codec.py` writes them: `C3 01`, the CRC-64-AVRO fingerprint of the writer schema, the
 * Avro binary body. The JSON form maps 1:1 onto the records; JSON-valued content fields travel as
 * JSON text (`pyjson.ts`) and `samplingParameters` as its typed slots plus `otherParametersJson`.
 * The schemas are copies of `schemas/` that a Python test keeps current.
 */
import { readFileSync } from "node:fs";
import avro from "avsc";
import { ContractError, SerializationError } from "./errors.js";
import { isPlainObject, setOwn } from "./canonical.js";
import { pythonJsonText } from "./pyjson.js";
import { compileEncoder, type Encode } from "./avro-write.js";

export const MAGIC = Buffer.from([0xc3, 0x01]);

const SCHEMA_FILES = { capture: "capture-v3.avsc", flag: "flag-v1.avsc", claim_check: "claim-check-v1.avsc" } as const;
export type Kind = keyof typeof SCHEMA_FILES;

// CRC-64-AVRO (the Avro specification's fingerprint), table-driven over BigInt once per schema.
const EMPTY = 0xc15d213aa4d7a795n;
const TABLE = (() => {
  const table: bigint[] = [];
  for (let i = 0; i < 256; i++) {
    let fp = BigInt(i);
    for (let j = 0; j < 8; j++) fp = (fp >> 1n) ^ (EMPTY & -(fp & 1n));
    table.push(fp);
  }
  return table;
})();

/** CRC-64-AVRO of the schema's Parsing Canonical Form, 8 bytes little-endian. */
export function fingerprint(canonicalForm: string): Buffer {
  let fp = EMPTY;
  for (const byte of Buffer.from(canonicalForm, "utf8")) fp = (fp >> 8n) ^ TABLE[Number((fp ^ BigInt(byte)) & 0xffn)]!;
  const out = Buffer.alloc(8);
  out.writeBigUInt64LE(fp);
  return out;
}

interface Writer {
  readonly type: avro.Type;
  readonly header: Buffer;
  /** The buffer each message of this kind is written into: a quarter more than the last one
   * (avsc's `toBuffer` writes into 1 KB, and so writes a larger value twice, then copies it). */
  capacity: number;
}

const writers = new Map<Kind, Writer>();
const MIN_CAPACITY = 1024;

function writer(kind: Kind): Writer {
  let found = writers.get(kind);
  if (found === undefined) {
    const url = new URL(`../../schemas/${SCHEMA_FILES[kind]}`, import.meta.url);
    const schema = JSON.parse(readFileSync(url, "utf8")) as avro.Schema;
    const type = avro.Type.forSchema(schema, { wrapUnions: "auto" });
    // avsc's schema() without attributes is the Parsing Canonical Form the fingerprint is over
    found = { type, header: Buffer.concat([MAGIC, fingerprint(JSON.stringify(type.schema()))]), capacity: MIN_CAPACITY };
    writers.set(kind, found);
  }
  return found;
}

/** The 10-byte single-object header of `kind`. */
export function header(kind: Kind): Buffer {
  return writer(kind).header;
}

const SAMPLING_NUMBER = new Set(["temperature", "top_p", "presence_penalty", "frequency_penalty"]);
const SAMPLING_LONG = new Set(["max_tokens", "seed"]);

function isLong(value: number): boolean {
  return Number.isSafeInteger(value) && !Object.is(value, -0);
}

/** `samplingParameters` into its Avro record: typed slots where the value fits, else JSON text. */
function samplingToAvro(params: unknown, path: string): Record<string, unknown> {
  if (!isPlainObject(params)) throw new ContractError("samplingParameters must be a JSON object", path);
  const record: Record<string, unknown> = { presentKeys: Object.keys(params) };
  let other: Record<string, unknown> | undefined;
  for (const [key, value] of Object.entries(params)) {
    let slot: unknown;
    let fits = false;
    if (SAMPLING_NUMBER.has(key)) {
      fits = value === null || (typeof value === "number" && Number.isFinite(value));
      slot = typeof value === "number" ? (isLong(value) ? { long: value } : { double: value }) : null;
    } else if (SAMPLING_LONG.has(key)) {
      fits = value === null || (typeof value === "number" && isLong(value));
      slot = value;
    } else if (key === "stop") {
      fits = value === null || (Array.isArray(value) && value.every((item) => typeof item === "string"));
      slot = value;
    }
    if (fits) record[key] = slot;
    else setOwn((other ??= {}), key, value);
  }
  record["otherParametersJson"] = other === undefined ? null : pythonJsonText(other, `${path}.otherParametersJson`);
  return record;
}

function mapList(list: unknown, convert: (record: Record<string, unknown>, index: number) => Record<string, unknown>): unknown {
  return Array.isArray(list) ? list.map((record: unknown, i) => (isPlainObject(record) ? convert(record, i) : record)) : list;
}

/** The capture's Avro datum (a shallow rewrite: only the converted fields are new). */
function captureToAvro(capture: Record<string, unknown>): Record<string, unknown> {
  const datum: Record<string, unknown> = { ...capture };
  const input = capture["input"];
  if (isPlainObject(input)) datum["input"] = { ...input, requestPayload: pythonJsonText(input["requestPayload"], "input.requestPayload") };
  const config = capture["agentConfiguration"];
  if (isPlainObject(config)) {
    datum["agentConfiguration"] = {
      ...config,
      toolSchemaJson: pythonJsonText(config["toolSchemaJson"], "agentConfiguration.toolSchemaJson"),
      samplingParameters: samplingToAvro(config["samplingParameters"], "agentConfiguration.samplingParameters"),
    };
  }
  const trace = capture["executionTrace"];
  if (isPlainObject(trace)) {
    datum["executionTrace"] = {
      ...trace,
      toolCalls: mapList(trace["toolCalls"], (call, i) => ({
        ...call,
        input: pythonJsonText(call["input"], `executionTrace.toolCalls[${i}].input`),
        output: pythonJsonText(call["output"], `executionTrace.toolCalls[${i}].output`),
      })),
    };
  }
  const state = capture["externalState"];
  if (isPlainObject(state)) {
    datum["externalState"] = {
      ...state,
      observableExternals: mapList(state["observableExternals"], (external, i) => ({
        ...external,
        capturedValue: pythonJsonText(external["capturedValue"], `externalState.observableExternals[${i}].capturedValue`),
      })),
    };
  }
  return datum;
}


function encode(kind: Kind, datum: unknown): Buffer {
  const found = writer(kind);
  const { type, header: head } = found;
  if (!type.isValid(datum, { noUndeclaredFields: true })) {
    // walk again with a hook only to name what is wrong (the hook slows every check down)
    let problem: string | undefined;
    type.isValid(datum, {
      noUndeclaredFields: true,
      errorHook: (path: string[], value: unknown) => {
        problem ??= `${path.join(".") || kind}: ${value === undefined ? "missing" : `invalid value ${JSON.stringify(value)?.slice(0, 80)}`}`;
      },
    });
    throw new SerializationError(`cannot encode ${kind}: ${problem ?? "invalid"}`);
  }
  let out = Buffer.allocUnsafeSlow(found.capacity);
  let end = type.encode(datum, out, head.length);
  if (end < 0) {
    // too small: `-end` more bytes were needed
    out = Buffer.allocUnsafeSlow(out.length - end);
    end = type.encode(datum, out, head.length);
  }
  head.copy(out, 0);
  found.capacity = Math.max(MIN_CAPACITY, Math.ceil(end * 1.25));
  // a message far smaller than its buffer gets bytes of its own (a queued message must not hold a big buffer)
  if (end * 2 >= out.length) return out.subarray(0, end);
  const own = Buffer.allocUnsafeSlow(end); // never a slice of Node's shared pool (a sealing thread moves it)
  out.copy(own, 0, 0, end);
  return own;
}

const jsonText = (value: unknown): unknown => pythonJsonText(value);

let captureEncoder: Encode | null | undefined; // null: the schema has a type it does not write

/** @internal The capture written in one pass, checked as it is written and converted where `captureToAvro`
 * converts (no converted copy made); undefined for anything it does not write, which the avsc
 * path then encodes or refuses with the reason. */
export function encodeCaptureFast(capture: Record<string, unknown>): Buffer | undefined {
  if (captureEncoder === null) return undefined;
  try {
    if (captureEncoder === undefined) {
      captureEncoder = null;
      const found = writer("capture");
      const hooks = new Map<string, (value: unknown) => unknown>([
        ["$.input.requestPayload", jsonText],
        ["$.agentConfiguration.toolSchemaJson", jsonText],
        ["$.agentConfiguration.samplingParameters", (value) => samplingToAvro(value, "agentConfiguration.samplingParameters")],
        ["$.executionTrace.toolCalls.input", jsonText],
        ["$.executionTrace.toolCalls.output", jsonText],
        ["$.externalState.observableExternals.capturedValue", jsonText],
      ]);
      captureEncoder = compileEncoder(found.type, found.header, hooks);
    }
    return captureEncoder(capture);
  } catch {
    return undefined;
  }
}

/** Single-object Avro bytes of a capture in JSON form (the Python codec's bytes for the same value). */
export function encodeCapture(capture: Record<string, unknown>): Buffer {
  if (!isPlainObject(capture)) throw new SerializationError("a capture is a JSON object");
  return encodeCaptureFast(capture) ?? encodeCaptureAvsc(capture);
}

/** @internal The capture's bytes through avsc (checked first, then written): the reference the
 * compiled writer is tested against, and the path that names what is wrong. */
export function encodeCaptureAvsc(capture: Record<string, unknown>): Buffer {
  if (!isPlainObject(capture)) throw new SerializationError("a capture is a JSON object");
  try {
    return encode("capture", captureToAvro(capture));
  } catch (error) {
    if (error instanceof ContractError) throw new SerializationError(error.message);
    throw error;
  }
}

/** Single-object Avro bytes of an event (`flag`, `claim_check`). */
export function encodeEvent(kind: Exclude<Kind, "capture">, value: Record<string, unknown>): Buffer {
  return encode(kind, value);
}

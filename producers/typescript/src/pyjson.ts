/**
 * JSON text exactly as the Python codec writes a JSON-valued content field into Avro
 * (`json.dumps(value, ensure_ascii=False, separators=(",", ":"))`, keys in their order), so the
 * Avro bytes of a TypeScript capture equal the Python SDK's for the same value.
 *
 * Numbers are the one place JavaScript and Python differ: a JavaScript number is a double, where
 * Python holds `1` (int) and `1.0` (float) apart. An integral double within ±(2**53 - 1) is written
 * as Python writes the int that `json.loads` gives back for it (`1`); every other double as
 * Python's float `repr` (shortest round-trip digits, the same digits ES6 picks, but `1e-05`,
 * `1e+16`, `-0.0`, `9007199254740994.0`). These texts are not signed (the hashes are over RFC 8785
 * bytes), so a number spelled differently never breaks a signature; it only changes Avro bytes.
 */
import { ContractError } from "./errors.js";
import { MAX_DEPTH, isPlainObject, joinKey, knownPythonText, printsAlike } from "./canonical.js";

/** Python `repr` of a finite double, from JavaScript's shortest digits. */
export function pythonFloat(value: number): string {
  if (Object.is(value, -0)) return "-0.0";
  const [mantissa = "", exponentText = "0"] = value.toExponential().split("e");
  const exponent = Number(exponentText);
  const negative = mantissa.startsWith("-");
  const digits = mantissa.replace("-", "").replace(".", "");
  const sign = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    const fraction = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    const magnitude = Math.abs(exponent);
    return `${sign}${fraction}e${exponent < 0 ? "-" : "+"}${magnitude < 10 ? "0" : ""}${magnitude}`;
  }
  if (exponent < 0) return `${sign}0.${"0".repeat(-exponent - 1)}${digits}`;
  const whole = digits.slice(0, exponent + 1).padEnd(exponent + 1, "0");
  const fraction = digits.slice(exponent + 1);
  return `${sign}${whole}.${fraction || "0"}`;
}

/** How Python's `json` writes the value Python reads back for this JavaScript number. */
export function pythonNumber(value: number, path = ""): string {
  if (!Number.isFinite(value)) throw new ContractError(`${value} is not JSON`, path);
  if (Number.isSafeInteger(value) && !Object.is(value, -0)) return String(value);
  return pythonFloat(value);
}

/** The Python codec's JSON text of `value` (undefined and null give null: absent content). */
export function pythonJsonText(value: unknown, path = ""): string | null {
  if (value === undefined || value === null) return null;
  const known = knownPythonText(value); // a copyJson copy, checked as it was made
  if (known !== undefined) return known;
  // JSON.stringify writes the same text wherever every number is one both print alike
  return sameAsStringify(value, 0) ? JSON.stringify(value) : write(value, path, 0);
}

/** True when `JSON.stringify(value)` is Python's text: plain JSON whose numbers print alike. */
function sameAsStringify(value: unknown, depth: number): boolean {
  switch (typeof value) {
    case "string":
      return value.isWellFormed();
    case "number":
      return printsAlike(value);
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
    for (const item of value) if (item === undefined || !sameAsStringify(item, depth + 1)) return false;
    return true;
  }
  if (!isPlainObject(value)) return false;
  for (const key in value) {
    const item = value[key];
    if (item !== undefined && (!key.isWellFormed() || !sameAsStringify(item, depth + 1))) return false;
  }
  return true;
}

function write(value: unknown, path: string, depth: number): string {
  switch (typeof value) {
    case "string":
      if (!value.isWellFormed()) throw new ContractError("a lone surrogate is not UTF-8", path);
      return JSON.stringify(value);
    case "number":
      return pythonNumber(value, path);
    case "boolean":
      return value ? "true" : "false";
    case "object":
      break;
    default:
      throw new ContractError(`${typeof value} is not JSON`, path);
  }
  if (value === null) return "null";
  if (depth >= MAX_DEPTH) throw new ContractError("JSON value is nested too deeply (or is circular)", path);
  if (Array.isArray(value)) {
    return "[" + value.map((item: unknown, i) => (item === undefined ? "null" : write(item, `${path}[${i}]`, depth + 1))).join(",") + "]";
  }
  if (!isPlainObject(value)) throw new ContractError(`a ${(value as object).constructor?.name ?? "object"} is not JSON`, path);
  const members: string[] = [];
  for (const [key, item] of Object.entries(value)) {
    if (item === undefined) continue;
    if (!key.isWellFormed()) throw new ContractError("a key with a lone surrogate is not UTF-8", joinKey(path, key));
    members.push(JSON.stringify(key) + ":" + write(item, joinKey(path, key), depth + 1));
  }
  return "{" + members.join(",") + "}";
}

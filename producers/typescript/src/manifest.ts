/**
 * The signed manifest, as `producers/evidence/manifest.py` defines it: the capture without its
 * content parts and without `signature.signatureBytes`, the capture/v2 members that hold their
 * defaults (`fidelity: "sdk"`, an empty `executionTrace.modelCalls`) left out, null members
 * omitted at every depth, RFC 8785 bytes.
 */
import { canonicalJson, isPlainObject } from "./canonical.js";
import { SECTION_CONTENT } from "./parts.js";

export const MANIFEST_PAYLOAD_TYPE = "application/vnd.blackbox.manifest+json;version=replay/v1";

/** The manifest as a view sharing nested values with `capture` (never mutate it). */
export function manifestView(capture: Record<string, unknown>): Record<string, unknown> {
  const view: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(capture)) {
    if (key === "fidelity" && value === "sdk") continue;
    view[key] = value;
  }
  for (const [name, { top, lists }] of SECTION_CONTENT) {
    const section = capture[name];
    if (!isPlainObject(section)) continue;
    const stripped: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(section)) {
      if (top.has(key)) continue;
      if (name === "executionTrace" && key === "modelCalls" && Array.isArray(value) && value.length === 0) continue;
      stripped[key] = value;
    }
    for (const [listKey, recordKeys] of lists) {
      const records = stripped[listKey];
      if (!Array.isArray(records)) continue;
      stripped[listKey] = records.map((record: unknown) => {
        if (!isPlainObject(record)) return record;
        const kept: Record<string, unknown> = {};
        for (const [key, value] of Object.entries(record)) if (!recordKeys.has(key)) kept[key] = value;
        return kept;
      });
    }
    view[name] = stripped;
  }
  const signature = capture["signature"];
  if (isPlainObject(signature)) {
    const kept: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(signature)) if (key !== "signatureBytes") kept[key] = value;
    view["signature"] = kept;
  }
  return view;
}

/** The bytes the signature covers (before PAE); `ContractError` naming a field with no RFC 8785 form. */
export function manifestBytes(capture: Record<string, unknown>): Buffer {
  return canonicalJson(manifestView(capture), { omitNulls: true });
}

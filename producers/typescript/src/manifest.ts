/**
 * The signed manifest, as `producers/evidence/manifest.py` defines it: the capture without its
 * content parts and without `signature.signatureBytes`, the capture/v2 members that hold their
 * defaults (`fidelity: "sdk"`, an empty `executionTrace.modelCalls`) left out, null members
 * omitted at every depth, RFC 8785 bytes.
 */
import { isPlainObject, putAt, putMembers, putObject, putText, utf8Scratch, writePieces, writeUtf8 } from "./canonical.js";
import { paeAround, paeRoom } from "./dsse.js";
import { SECTION_CONTENT } from "./parts.js";

const SIGNATURE_BYTES: ReadonlySet<string> = new Set(["signatureBytes"]);

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

/** The bytes the signature covers (before PAE); `ContractError` naming a field with no RFC 8785 form.
 * `entryTexts`: the RFC 8785 text of working-set entries whose manifest form is their Merkle leaf
 * (`workingSetRootHex` made them), written as they are. */
export function manifestBytes(capture: Record<string, unknown>, entryTexts?: ReadonlyMap<object, string>): Buffer {
  return Buffer.from(manifestText(capture, entryTexts), "utf8");
}

/** The RFC 8785 text of `manifestView(capture)` (nulls omitted), written without building the
 * view and joined once (no intermediate strings). */
export function manifestText(capture: Record<string, unknown>, entryTexts?: ReadonlyMap<object, string>): string {
  return writePieces(() => putManifest(capture, entryTexts));
}

/** `pae(MANIFEST_PAYLOAD_TYPE, manifestBytes(capture, entryTexts))`, written straight into a
 * buffer this module reuses (no manifest text made): valid only until the next call, for a
 * caller that signs it at once. */
export function manifestPae(capture: Record<string, unknown>, entryTexts?: ReadonlyMap<object, string>): Buffer {
  const room = paeRoom(MANIFEST_PAYLOAD_TYPE);
  const end = writeUtf8(room, () => putManifest(capture, entryTexts));
  return paeAround(MANIFEST_PAYLOAD_TYPE, utf8Scratch(), room, end - room);
}

function putManifest(capture: Record<string, unknown>, entryTexts: ReadonlyMap<object, string> | undefined): void {
  putObject(capture, (key, value) => {
    if (key === "fidelity" && value === "sdk") return false;
    const section = SECTION_CONTENT.get(key);
    if (section !== undefined && isPlainObject(value)) putSection(key, value, section, entryTexts);
    else if (key === "signature" && isPlainObject(value)) putMembers(value, SIGNATURE_BYTES, false, key);
    else putAt(value, true, key);
    return true;
  });
}

function putSection(name: string, section: Record<string, unknown>, content: { top: Set<string>; lists: Map<string, Set<string>> }, entryTexts: ReadonlyMap<object, string> | undefined): void {
  putObject(
    section,
    (key, value) => {
      if (content.top.has(key)) return false;
      if (name === "executionTrace" && key === "modelCalls" && Array.isArray(value) && value.length === 0) return false;
      const recordKeys = content.lists.get(key);
      if (recordKeys === undefined || !Array.isArray(value)) {
        putAt(value, true, name, key);
        return true;
      }
      const known = key === "workingSetEntries" ? entryTexts : undefined;
      putText("[");
      for (let i = 0; i < value.length; i++) {
        const record: unknown = value[i];
        if (i > 0) putText(",");
        if (!isPlainObject(record)) putAt(record, true, name, key, i);
        else {
          const text = known?.get(record);
          if (text !== undefined) putText(text);
          else putMembers(record, recordKeys, false, name, key, i);
        }
      }
      putText("]");
      return true;
    },
    name,
  );
}

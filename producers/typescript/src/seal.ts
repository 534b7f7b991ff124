/**
 * Sealing, as `producers/evidence/seal.py`: every hash field filled (a supplied hash must agree),
 * the working-set Merkle root, algorithm and leaf count, and ed25519 over the DSSE PAE of the
 * manifest bytes in `signature.signatureBytes`.
 */
import { ContractError } from "./errors.js";
import { HASH_PREFIX, isHash, isPlainObject } from "./canonical.js";
import { keyIdFromRef, type Signer } from "./keys.js";
import { manifestPae } from "./manifest.js";
import { CONTEXT_SET_ALGORITHM, workingSetRootHex } from "./merkle.js";
import { computePartHash, partPath, partRefs } from "./parts.js";

export const SIGNATURE_ALGORITHM = "ed25519";
export const SIGNATURE_PREFIX = "base64:";

// ISO-8601 as Python's datetime.fromisoformat reads the SDK's own times (date, time, optional offset).
const ISO_TIME = /^\d{4}-\d{2}-\d{2}([T ]\d{2}(:\d{2}(:\d{2}(\.\d{1,6})?)?)?(Z|[+-]\d{2}(:?\d{2})?)?)?$/;

export interface SealOptions {
  /** Fill `capture` itself instead of a deep copy (for a caller that owns it and won't touch it again). */
  readonly inPlace?: boolean;
}

/** The signed capture. Throws `ContractError` naming the field that breaks the contract. */
export function seal(capture: Record<string, unknown>, signer: Signer, options: SealOptions = {}): Record<string, unknown> {
  if (!isPlainObject(capture)) throw new ContractError("a capture is a JSON object");
  const sealed = options.inPlace === true ? capture : (structuredClone(capture) as Record<string, unknown>);
  const capturedAt = sealed["capturedAt"];
  if (typeof capturedAt !== "string" || !ISO_TIME.test(capturedAt)) {
    throw new ContractError(
      `capturedAt must be an ISO-8601 time (it is the signing time), got ${JSON.stringify(capturedAt) ?? "undefined"}`,
      "capturedAt",
    );
  }
  fillPartHashes(sealed);
  const memory = workingSet(sealed);
  const signature = signatureBlock(sealed, signer);
  const entries = memory["workingSetEntries"] as unknown[];
  const entryTexts = new Map<object, string>();
  const root = HASH_PREFIX + workingSetRootHex(entries, entryTexts);
  const supplied = memory["contextSetHash"];
  if (supplied !== undefined && supplied !== null && supplied !== root) {
    throw new ContractError(`supplied ${JSON.stringify(supplied)} disagrees with the working set, which gives ${JSON.stringify(root)}`, "memoryState.contextSetHash");
  }
  memory["contextSetHash"] = root;
  // the PAE of the manifest's UTF-8, written straight into a reused buffer and signed at once
  signature["signatureBytes"] = SIGNATURE_PREFIX + signer.sign(manifestPae(sealed, entryTexts)).toString("base64");
  return sealed;
}

function fillPartHashes(sealed: Record<string, unknown>): void {
  for (const ref of partRefs(sealed)) {
    const { holder, field } = ref;
    const supplied = holder[field.hashKey];
    const content = holder[field.contentKey];
    if (content === null || content === undefined) {
      if (supplied !== null && supplied !== undefined && !isHash(supplied)) {
        throw new ContractError(`${JSON.stringify(supplied)} is not sha256:<64 hex>`, partPath(ref, field.hashKey));
      }
      continue;
    }
    const computed = computePartHash(ref);
    if (supplied !== null && supplied !== undefined && supplied !== computed) {
      throw new ContractError(`supplied hash ${String(supplied)} disagrees with the content, which hashes to ${computed}`, partPath(ref, field.hashKey));
    }
    holder[field.hashKey] = computed;
  }
}

function workingSet(sealed: Record<string, unknown>): Record<string, unknown> {
  let memory = sealed["memoryState"];
  if (memory === null || memory === undefined) memory = sealed["memoryState"] = {};
  if (!isPlainObject(memory)) throw new ContractError("memoryState must be a JSON object", "memoryState");
  let entries = memory["workingSetEntries"];
  if (entries === null || entries === undefined) entries = memory["workingSetEntries"] = [];
  if (!Array.isArray(entries)) throw new ContractError("workingSetEntries must be a list", "memoryState.workingSetEntries");
  const algorithm = memory["contextSetAlgorithm"];
  if (algorithm !== null && algorithm !== undefined && algorithm !== CONTEXT_SET_ALGORITHM) {
    throw new ContractError(`unknown context-set algorithm ${JSON.stringify(algorithm)} (blackbox computes ${CONTEXT_SET_ALGORITHM})`, "memoryState.contextSetAlgorithm");
  }
  const count = memory["contextSetLeafCount"];
  if (count !== null && count !== undefined && count !== entries.length) {
    throw new ContractError(`supplied ${JSON.stringify(count)} disagrees with the working set, which has ${entries.length} entries`, "memoryState.contextSetLeafCount");
  }
  memory["contextSetAlgorithm"] = CONTEXT_SET_ALGORITHM;
  memory["contextSetLeafCount"] = entries.length;
  return memory;
}

function signatureBlock(sealed: Record<string, unknown>, signer: Signer): Record<string, unknown> {
  let signature = sealed["signature"];
  if (signature === null || signature === undefined) signature = {};
  if (!isPlainObject(signature)) throw new ContractError("signature must be a JSON object", "signature");
  const algorithm = signature["algorithm"];
  if (algorithm !== null && algorithm !== undefined && algorithm !== SIGNATURE_ALGORITHM) {
    throw new ContractError(`blackbox signs with ${SIGNATURE_ALGORITHM}, the capture asks for ${JSON.stringify(algorithm)}`, "signature.algorithm");
  }
  let reference = signature["publicKeyRef"];
  if (reference === null || reference === undefined) reference = signer.publicKeyRef;
  else if (keyIdFromRef(reference) !== signer.keyId) {
    throw new ContractError(`publicKeyRef ${JSON.stringify(reference)} does not name the signing key ${signer.keyId}`, "signature.publicKeyRef");
  }
  signature["algorithm"] = SIGNATURE_ALGORITHM;
  signature["publicKeyRef"] = reference;
  signature["signatureBytes"] = null;
  sealed["signature"] = signature;
  return signature;
}

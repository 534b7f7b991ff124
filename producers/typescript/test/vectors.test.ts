/**
 * Every byte of the committed vectors (written by tests/producers/typescript/generate_vectors.py
 * from the Python reference) is reproduced by the TypeScript SDK.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { describe, test } from "node:test";
import {
  ContractError,
  MANIFEST_PAYLOAD_TYPE,
  Signer,
  canonicalJson,
  contentParts,
  copyJson,
  knownCanonical,
  encodeCapture,
  header,
  manifestBytes,
  merkleRoot,
  pae,
  pythonJsonText,
  seal,
  textHash,
  workingSetLeaves,
} from "../src/index.js";

interface CaptureVector {
  name: string;
  input: Record<string, unknown>;
  parts: Record<string, string>;
  manifest: string;
  leaves: string[];
  contextSetHash: string;
  paeSha256: string;
  signature: string;
  sealed: Record<string, unknown>;
  avro: string;
}

const vectors = JSON.parse(readFileSync(new URL("../../test/vectors/sealing.json", import.meta.url), "utf8")) as {
  key: { seed: string; publicKey: string; keyId: string; publicKeyRef: string };
  payloadType: string;
  schemaFingerprints: Record<string, string>;
  canonical: { name: string; input: unknown; omitNulls: boolean; expected: string | null; sha256?: string }[];
  numbers: { bits: string; canonical: string; pythonJson: string }[];
  texts: { input: string; sha256: string }[];
  merkle: { leaves: string[]; root: string }[];
  pae: { type: string; payload: string; pae: string }[];
  signatures: { message: string; signature: string }[];
  captures: CaptureVector[];
};

const signer = Signer.fromSeed(Buffer.from(vectors.key.seed, "base64"), { name: "did:blackbox:test" });
const sha256 = (data: Buffer): string => createHash("sha256").update(data).digest("hex");

describe("canonical JSON", () => {
  for (const vector of vectors.canonical) {
    test(vector.name, () => {
      if (vector.expected === null) {
        assert.throws(() => canonicalJson(vector.input, { omitNulls: vector.omitNulls, path: "p" }), ContractError);
        return;
      }
      const bytes = canonicalJson(vector.input, { omitNulls: vector.omitNulls });
      assert.equal(bytes.toString("utf8"), vector.expected);
      assert.equal(sha256(bytes), vector.sha256);
    });
  }

  test("a decision's copy of a value carries the same RFC 8785 text, made in the same walk", () => {
    for (const vector of vectors.canonical) {
      if (vector.omitNulls || typeof vector.input !== "object" || vector.input === null) continue;
      if (vector.expected === null) {
        assert.throws(() => copyJson(vector.input, "p"), ContractError);
        continue;
      }
      const copied = copyJson(vector.input);
      assert.notEqual(copied, vector.input);
      assert.deepEqual(copied, vector.input);
      assert.equal(knownCanonical(copied), vector.expected, vector.name);
    }
  });

  test("every number form: RFC 8785's and the Python codec's JSON text", () => {
    assert.ok(vectors.numbers.length > 6000);
    for (const { bits, canonical, pythonJson } of vectors.numbers) {
      const value = Buffer.from(bits, "hex").readDoubleBE(0);
      assert.equal(canonicalJson(value).toString(), canonical, bits);
      assert.equal(pythonJsonText(value), pythonJson, bits);
    }
  });

  test("what has no RFC 8785 form is refused with its path", () => {
    for (const bad of [Number.NaN, Infinity, 10n, new Date(0), new Map(), () => 1, [undefined]]) {
      assert.throws(() => canonicalJson({ part: { ids: [1, bad] } }, { path: "input.requestPayload" }), (error: unknown) => {
        assert.ok(error instanceof ContractError);
        assert.match(error.path, /^input\.requestPayload\.part\.ids\[1\]/);
        return true;
      });
    }
    let circular: unknown[] = [];
    circular.push(circular);
    assert.throws(() => canonicalJson(circular), /nested too deeply/);
    circular = [];
  });
});

test("text hashes", () => {
  for (const { input, sha256: expected } of vectors.texts) assert.equal(textHash(input), `sha256:${expected}`);
});

test("Merkle roots (RFC 6962)", () => {
  for (const { leaves, root } of vectors.merkle) {
    assert.equal(merkleRoot(leaves.map((leaf) => Buffer.from(leaf, "hex"))).toString("hex"), root);
  }
});

test("DSSE PAE", () => {
  for (const vector of vectors.pae) {
    assert.equal(pae(vector.type, Buffer.from(vector.payload, "hex")).toString("hex"), vector.pae);
  }
  assert.equal(vectors.payloadType, MANIFEST_PAYLOAD_TYPE);
});

test("the test key: public key, key id, reference and ed25519 signatures", () => {
  assert.equal(signer.publicRaw.toString("hex"), vectors.key.publicKey);
  assert.equal(signer.keyId, vectors.key.keyId);
  assert.equal(signer.publicKeyRef, vectors.key.publicKeyRef);
  for (const { message, signature } of vectors.signatures) {
    assert.equal(signer.sign(Buffer.from(message, "hex")).toString("base64"), signature);
  }
  assert.ok(!String(signer).includes(vectors.key.seed));
});

test("single-object headers carry the Python fingerprints", () => {
  for (const [kind, expected] of Object.entries(vectors.schemaFingerprints)) {
    assert.equal(header(kind as "capture" | "flag" | "claim_check").toString("hex"), expected, kind);
  }
});

describe("captures", () => {
  for (const vector of vectors.captures) {
    test(vector.name, () => {
      assert.deepEqual(contentParts(vector.input), vector.parts);
      const sealed = seal(vector.input, signer);
      assert.deepEqual(sealed, vector.sealed);
      assert.equal(manifestBytes(sealed).toString("utf8"), vector.manifest);
      const memory = sealed["memoryState"] as { workingSetEntries: unknown[]; contextSetHash: string };
      assert.deepEqual(workingSetLeaves(memory.workingSetEntries).map((leaf) => leaf.toString("utf8")), vector.leaves);
      assert.equal(memory.contextSetHash, vector.contextSetHash);
      assert.equal(sha256(pae(MANIFEST_PAYLOAD_TYPE, manifestBytes(sealed))), vector.paeSha256);
      assert.equal((sealed["signature"] as { signatureBytes: string }).signatureBytes, vector.signature);
      assert.equal(encodeCapture(sealed).toString("base64"), vector.avro);
      assert.notEqual(sealed, vector.input, "seal copies unless told to fill in place");
    });
  }

  test("a supplied hash that disagrees is named", () => {
    const capture = structuredClone(vectors.captures[0]!.input);
    (capture["input"] as Record<string, unknown>)["requestPayloadHash"] = `sha256:${"0".repeat(64)}`;
    assert.throws(() => seal(capture, signer), (error: unknown) => error instanceof ContractError && error.path === "input.requestPayloadHash");
  });

  test("a changed content byte changes its hash; a changed manifest field changes the signature", () => {
    const base = vectors.captures[0]!;
    const capture = structuredClone(base.input);
    (capture["agentConfiguration"] as Record<string, unknown>)["systemPromptText"] += " ";
    const sealed = seal(capture, signer);
    assert.notEqual((sealed["agentConfiguration"] as Record<string, unknown>)["systemPromptHash"], (base.sealed["agentConfiguration"] as Record<string, unknown>)["systemPromptHash"]);
    assert.notEqual((sealed["signature"] as { signatureBytes: string }).signatureBytes, base.signature);
  });
});

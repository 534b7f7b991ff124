/**
 * The shortcuts sealing takes for speed write the same bytes as the plain walk: a list or a
 * key-ordered object of atoms written by JSON.stringify, RFC 8785 text made late for a snapshot,
 * the manifest written without its view, and detectors skipped on text without their trigger.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ContractError, builtinDetectors, canonicalJson, canonicalText, copyJson, knownCanonical, manifestBytes, manifestView } from "../src/index.js";
import { findAll, type Detector } from "../src/privacy/detectors.js";

describe("RFC 8785 shortcuts", () => {
  test("containers of atoms give the same text as the member-by-member walk", () => {
    const cases: [unknown, string][] = [
      [["b", "a", 1.5, -0, true, null], '["b","a",1.5,0,true,null]'],
      [{ a: 1, b: "x", c: null }, '{"a":1,"b":"x","c":null}'],
      // index-like keys come first in JavaScript's key order: "9" before "10", which RFC 8785 reverses
      [{ "9": 1, "10": 2 }, '{"10":2,"9":1}'],
      [{ b: 1, a: 2 }, '{"a":2,"b":1}'],
      [{ a: 1e21, b: 1e-7, c: undefined }, '{"a":1e+21,"b":1e-7}'],
      [{ "\u00e9": "\u{1f600}", e: "\n\u0001" }, '{"e":"\\n\\u0001","\u00e9":"\u{1f600}"}'],
    ];
    for (const [value, expected] of cases) assert.equal(canonicalText(value), expected, JSON.stringify(value));
  });

  test("nulls are dropped from objects of atoms when asked, never from lists", () => {
    assert.equal(canonicalText({ a: null, b: 1 }, { omitNulls: true }), '{"b":1}');
    assert.equal(canonicalText({ a: [null, 1] }, { omitNulls: true }), '{"a":[null,1]}');
  });

  test("what has no canonical form is still refused, with its path", () => {
    assert.throws(() => canonicalText(["ok", "\ud800"], { path: "p" }), (error: unknown) => error instanceof ContractError && /\[1\]/.test(error.message));
    assert.throws(() => canonicalText({ a: Number.NaN }), ContractError);
    assert.throws(() => canonicalText([1, undefined]), ContractError);
    assert.throws(() => canonicalText({ ["\udc00"]: 1 }), ContractError);
  });

  test("a snapshot's text is the text of what was handed over, whatever happens to the original later", () => {
    const original = { z: [3, { y: "v", x: 1 }], a: "é" };
    const copied = copyJson(original);
    original.z.push(4);
    original.a = "changed";
    assert.equal(knownCanonical(copied), '{"a":"é","z":[3,{"x":1,"y":"v"}]}');
    assert.equal(canonicalJson(copied).toString("utf8"), knownCanonical(copied));
  });

  test("the manifest written from the capture equals the canonical form of its view", () => {
    const capture: Record<string, unknown> = {
      version: "replay/v1",
      fidelity: "sdk",
      input: { requestPayload: { q: 1 }, requestPayloadHash: "sha256:" + "a".repeat(64), originUserId: null },
      executionTrace: { modelCalls: [], toolCalls: [{ sequence: 1, input: { x: 1 }, inputHash: null, output: null, toolName: "t" }, "odd"] },
      memoryState: { workingSetEntries: [{ entryId: "m", renderedContent: "text", extra: { b: 2, a: [1, null] } }] },
      signature: { algorithm: "ed25519", signatureBytes: "base64:xx", publicKeyRef: "k" },
      extra: { "10": 1, "9": 2 },
    };
    assert.equal(manifestBytes(capture).toString("utf8"), canonicalJson(manifestView(capture), { omitNulls: true }).toString("utf8"));
  });
});

describe("detector triggers", () => {
  test("a detector without a trigger (or with a flagged one) still runs on every text", () => {
    const found = (name: string, trigger?: RegExp): Detector => ({
      name,
      ...(trigger === undefined ? {} : { trigger }),
      find: (text: string) => (text.includes("Secret") ? [{ start: text.indexOf("Secret"), end: text.indexOf("Secret") + 6, kind: "SECRET" }] : []),
    });
    const text = "no digits and no at sign: a Secret";
    assert.equal(findAll(text, [...builtinDetectors(), found("plain")]).length, 1);
    assert.equal(findAll(text, [...builtinDetectors(), found("flagged", /secret/i)]).length, 1);
    assert.equal(findAll(text, [...builtinDetectors(), found("missed", /never/)]).length, 0);
  });

  test("built-in findings are the same with and without the trigger shortcut", () => {
    const texts = ["mail me at ann@example.com", "call 415-555-0132 now", "card 4111 1111 1111 1111", "DE89 3704 0044 0532 0130 00", "host ::1 and fe80::1 and 10.0.0.1", "plain words only"];
    const untriggered = builtinDetectors().map((detector): Detector => ({ name: detector.name, find: (text) => detector.find(text) }));
    for (const text of texts) assert.deepEqual(findAll(text, builtinDetectors()), findAll(text, untriggered), text);
  });
});

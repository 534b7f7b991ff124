/**
 * The built-in redaction reproduces the Python vectors (tests/producers/typescript/generate_vectors.py):
 * texts redacted in turn with one set of placeholders, and a whole capture (its redactions, the
 * original hashes and every byte of the redacted capture).
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, test } from "node:test";
import { Placeholders, builtinDetectors, redactCapture, redactText } from "../src/index.js";
import { canonicalText, copyJson } from "../src/canonical.js";

const vectors = JSON.parse(readFileSync(new URL("../../test/vectors/sealing.json", import.meta.url), "utf8")) as {
  redaction: {
    texts: { input: string; redacted: string; placed: [number, number, string, string][] }[];
    capture: { input: Record<string, unknown>; redacted: Record<string, unknown>; redactions: unknown[]; originalHashes: Record<string, string> };
  };
};

describe("redaction vectors", () => {
  test("texts, one set of placeholders across them", () => {
    const detectors = builtinDetectors();
    const placeholders = new Placeholders();
    for (const vector of vectors.redaction.texts) {
      const done = redactText(vector.input, detectors, placeholders);
      assert.equal(done === undefined ? vector.input : done.text, vector.redacted, vector.input);
      assert.deepEqual(done === undefined ? [] : done.placed, vector.placed, vector.input);
    }
  });

  test("a whole capture: redacted content, cleared hashes, redactions and original hashes", () => {
    const capture = structuredClone(vectors.redaction.capture.input);
    const done = redactCapture(capture, builtinDetectors());
    assert.ok(done !== undefined);
    assert.equal(JSON.stringify(done.capture), JSON.stringify(vectors.redaction.capture.redacted));
    assert.deepEqual(done.redactions, vectors.redaction.capture.redactions);
    assert.deepEqual(Object.entries(done.originalHashes), Object.entries(vectors.redaction.capture.originalHashes));
    assert.deepEqual(Object.keys(done.originals), Object.keys(vectors.redaction.capture.originalHashes));
  });

  test("the configuration's parts are numbered first, then the others in contract order; pointers and paths as found", () => {
    const capture: Record<string, unknown> = {
      decisionId: "dec_1",
      input: { requestPayload: { "a/b": ["x", { "m~n": "write to b@example.com or a@example.com" }], n: 1 }, requestPayloadHash: null },
      agentConfiguration: { systemPromptText: "Escalate to a@example.com.", systemPromptHash: null, toolSchemaJson: { t: ["c@example.com"] }, toolSchemaHash: null },
      memoryState: { workingSetEntries: [{ entryId: "m", renderedContent: "no one" }, { entryId: "n", renderedContent: "call c@example.com" }], contextSetHash: "sha256:" + "0".repeat(64) },
      executionTrace: { toolCalls: [{ input: "a@example.com", output: null }], finalOutputText: "done" },
    };
    const done = redactCapture(capture, builtinDetectors());
    assert.ok(done !== undefined);
    assert.deepEqual(
      done.redactions.map((r) => [r.part, r.pointer, r.placeholder]),
      [
        ["agentConfiguration.systemPromptText", "", "[EMAIL_1]"],
        ["agentConfiguration.toolSchemaJson", "/t/0", "[EMAIL_2]"],
        ["input.requestPayload", "/a~1b/1/m~0n", "[EMAIL_3]"],
        ["input.requestPayload", "/a~1b/1/m~0n", "[EMAIL_1]"],
        ["memoryState.workingSetEntries[1].renderedContent", "", "[EMAIL_2]"],
        ["executionTrace.toolCalls[0].input", "", "[EMAIL_1]"],
      ],
    );
    assert.deepEqual(Object.keys(done.originals), ["agentConfiguration.systemPromptText", "agentConfiguration.toolSchemaJson", "input.requestPayload", "memoryState.workingSetEntries[1].renderedContent", "executionTrace.toolCalls[0].input"]);
    assert.equal((capture["memoryState"] as Record<string, unknown>)["contextSetHash"], null);
    assert.equal((capture["executionTrace"] as { finalOutputText: string }).finalOutputText, "done");
  });

  test("a member named __proto__ is content like any other: kept, sealed in canonical order and redacted", () => {
    // JSON.parse makes "__proto__" an own member; plain assignment would take it as the prototype
    const payload = JSON.parse('{"__proto__": {"note": "write to a@example.com"}, "b": "__proto__"}') as Record<string, unknown>;
    const copied = copyJson(payload) as Record<string, unknown>;
    assert.equal(Object.getPrototypeOf(copied), Object.prototype);
    assert.deepEqual(Object.keys(copied), ["__proto__", "b"]);
    assert.equal(canonicalText(copied), '{"__proto__":{"note":"write to a@example.com"},"b":"__proto__"}');
    const capture: Record<string, unknown> = {
      decisionId: "dec_1",
      input: { requestPayload: copied, requestPayloadHash: null },
      executionTrace: { toolCalls: [], finalOutputText: "done" },
    };
    const done = redactCapture(capture, builtinDetectors());
    assert.ok(done !== undefined);
    const redacted = (done.capture["input"] as Record<string, unknown>)["requestPayload"] as Record<string, unknown>;
    assert.equal(Object.getPrototypeOf(redacted), Object.prototype);
    assert.equal(canonicalText(redacted), '{"__proto__":{"note":"write to [EMAIL_1]"},"b":"__proto__"}');
    assert.deepEqual(done.redactions.map((r) => [r.part, r.pointer]), [["input.requestPayload", "/__proto__/note"]]);
  });

  test("nothing personal: nothing changes", () => {
    const capture = structuredClone(vectors.redaction.capture.input);
    const memory = capture["memoryState"] as { workingSetEntries: { renderedContent: string }[] };
    (capture["input"] as Record<string, unknown>)["requestPayload"] = { message: "order 12345, version 1.2.3.4.5" };
    memory.workingSetEntries[0]!.renderedContent = "no one here";
    (capture["executionTrace"] as Record<string, unknown>)["finalOutputText"] = "done";
    const before = JSON.stringify(capture);
    assert.equal(redactCapture(capture, builtinDetectors()), undefined);
    assert.equal(JSON.stringify(capture), before);
  });
});

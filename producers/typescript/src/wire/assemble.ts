/**
 * From the HTTP exchanges attached to a decision to a wire capture's fields, as
 * `producers/integrations/assemble.py` does on the Python worker: `fidelity = "wire"`, one
 * `modelCalls` record per logical call (retries are attempts), the rendered context (the first
 * request body, exactly) with the byte spans of the system prompt and of each memory entry, the
 * configuration parsed from the first request, tool calls paired with the results sent back,
 * the final output and stop reason from the last response. Nothing here throws; what cannot be
 * read is named in `problems`.
 */
import { timestamp } from "../ids.js";
import type { Exchange } from "./exchange.js";
import * as anthropic from "./anthropic-messages.js";
import * as chat from "./openai-chat.js";
import type { WireFormat, WireRequest, WireResponse } from "./openai-chat.js";

/** The formats captureFetch knows, by the path a request goes to. */
export const FORMATS: readonly { readonly suffix: string; readonly wire: WireFormat }[] = [
  { suffix: "/chat/completions", wire: chat },
  { suffix: "/v1/messages", wire: anthropic },
];

function wireOf(format: string): WireFormat {
  return FORMATS.find((f) => f.wire.FORMAT === format)?.wire ?? chat;
}

type Obj = Record<string, unknown>;
const MARKER = "blackbox.unrecordable";

function text(data: Buffer): [string, "utf-8" | "base64"] {
  try {
    return [new TextDecoder("utf-8", { fatal: true }).decode(data), "utf-8"];
  } catch {
    return [data.toString("base64"), "base64"];
  }
}

/** How `text` can appear in a JSON body: escaped as the SDKs write it (raw UTF-8, then ASCII-only), then raw. */
function escapedForms(value: string): [Buffer, string][] {
  const json = JSON.stringify(value).slice(1, -1);
  const ascii = json.replace(/[\u0080-\uffff]/g, (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
  const forms: [Buffer, string][] = [];
  for (const form of [json, ascii]) if (!forms.some(([seen]) => seen.toString() === form)) forms.push([Buffer.from(form, "utf8"), "json-string"]);
  const raw = Buffer.from(value, "utf8");
  if (!forms.some(([seen]) => seen.equals(raw))) forms.push([raw, "raw"]);
  return forms;
}

/** Spans (UTF-8 byte offsets) of each part's first occurrence in `body`. */
export function locateSpans(body: Buffer, parts: readonly [string, string | null][]): Obj[] {
  const spans: Obj[] = [];
  for (const [part, value] of parts) {
    if (!value) continue;
    for (const [form, encoding] of escapedForms(value)) {
      const start = body.indexOf(form);
      if (start >= 0) {
        spans.push({ part, start, end: start + form.length, encoding });
        break;
      }
    }
  }
  return spans;
}

function group(exchanges: readonly Exchange[]): Exchange[][] {
  const calls = new Map<number, Exchange[]>();
  for (const exchange of [...exchanges].sort((a, b) => a.startedAt - b.startedAt)) {
    const attempts = calls.get(exchange.callId) ?? [];
    attempts.push(exchange);
    calls.set(exchange.callId, attempts);
  }
  return [...calls.values()].map((attempts) => attempts.sort((a, b) => a.attempt - b.attempt));
}

function record(attempts: Exchange[], sequence: number): Obj {
  const first = attempts[0]!;
  const last = attempts[attempts.length - 1]!;
  const [request, requestEncoding] = text(last.requestBody);
  const [response, responseEncoding] = text(last.responseBody);
  const received = last.status !== null || last.responseBody.length > 0;
  const ms = attempts.reduce((total, a) => total + (a.endedAt - a.startedAt), 0);
  return {
    sequence,
    format: last.format,
    method: last.method,
    endpoint: last.origin,
    path: last.path,
    query: last.query,
    requestHeaders: last.requestHeaders.map((h) => ({ name: h.name, value: h.value })),
    requestBody: request,
    requestBodyEncoding: requestEncoding,
    requestBodyHash: null,
    status: last.status,
    responseBody: received ? response : null,
    responseBodyEncoding: responseEncoding,
    responseBodyHash: null,
    responseContentEncoding: last.contentEncoding,
    streamed: last.streamed,
    complete: last.eof,
    attempts: attempts.length,
    error: last.error,
    startedAt: timestamp(first.startedAt),
    latencyMs: Math.round(ms),
    spans: [],
  };
}

function readRequest(rec: Obj, problems: string[]): WireRequest | null {
  const wire = wireOf(rec["format"] as string);
  if (rec["requestBodyEncoding"] !== "utf-8") {
    problems.push(`model call ${String(rec["sequence"])}: the request body is not UTF-8 (kept as base64)`);
    return null;
  }
  try {
    const body: unknown = JSON.parse(rec["requestBody"] as string);
    if (typeof body !== "object" || body === null || Array.isArray(body)) throw new Error("not a JSON object");
    return wire.parseRequest(body as Obj);
  } catch (error) {
    problems.push(`model call ${String(rec["sequence"])}: request body not readable as ${wire.FORMAT} (${String(error)})`);
    return null;
  }
}

function readResponse(rec: Obj, problems: string[]): WireResponse | null {
  const wire = wireOf(rec["format"] as string);
  const status = rec["status"] as number | null;
  if (status === null || status < 200 || status >= 300) return { model: null, text: null, toolCalls: [], stopReason: "error", complete: false };
  if (rec["responseBodyEncoding"] !== "utf-8" || rec["responseBody"] === null) {
    problems.push(`model call ${String(rec["sequence"])}: the response body is not UTF-8 (kept as base64)`);
    return null;
  }
  try {
    const parsed = wire.parseResponse(rec["responseBody"] as string, rec["streamed"] as boolean);
    rec["complete"] = (rec["complete"] as boolean) || parsed.complete;
    return parsed;
  } catch (error) {
    problems.push(`model call ${String(rec["sequence"])}: response not readable as ${wire.FORMAT} (${String(error)})`);
    return null;
  }
}

/** Fill `capture` in place from the exchanges (see the module doc). */
export function assemble(capture: Obj, exchanges: readonly Exchange[], problems: string[]): void {
  const calls = group(exchanges);
  if (calls.length === 0) return;
  const records = calls.map((attempts, i) => record(attempts, i + 1));
  const requests = records.map((rec) => readRequest(rec, problems));
  const responses = records.map((rec) => readResponse(rec, problems));
  const trace = capture["executionTrace"] as Obj;
  capture["fidelity"] = "wire";
  trace["modelCalls"] = records;

  let config = capture["agentConfiguration"] as Obj;
  const first = requests[0];
  if (first) {
    const answered = responses.find((r) => r?.model);
    config = capture["agentConfiguration"] = {
      systemPromptVersion: config["systemPromptVersion"] ?? null,
      systemPromptHash: null,
      systemPromptText: first.systemPrompt,
      toolSchemaVersion: config["toolSchemaVersion"] ?? null,
      toolSchemaHash: null,
      toolSchemaJson: first.tools,
      modelIdentifier: first.model ?? config["modelIdentifier"] ?? MARKER,
      modelVersion: answered?.model ?? config["modelVersion"] ?? null,
      modelProviderEndpoint: `${String(records[0]!["endpoint"])}${String(records[0]!["path"])}`,
      samplingParameters: first.sampling,
    };
    if (first.model === null) problems.push("model call 1: the request names no model");
  }
  const parts: [string, string | null][] = [["system_prompt", (config["systemPromptText"] as string | null) ?? null]];
  const memory = capture["memoryState"] as Obj;
  for (const entry of (memory["workingSetEntries"] as Obj[]) ?? []) {
    if (typeof entry["renderedContent"] === "string") parts.push([`memory:${String(entry["entryId"])}`, entry["renderedContent"]]);
  }
  calls.forEach((attempts, i) => {
    records[i]!["spans"] = locateSpans(attempts[attempts.length - 1]!.requestBody, parts);
  });
  if (records[0]!["requestBodyEncoding"] === "utf-8") {
    capture["renderedContext"] = { format: records[0]!["format"], text: records[0]!["requestBody"], spans: [...(records[0]!["spans"] as Obj[])], hash: null };
  }

  const toolCalls: Obj[] = [];
  responses.forEach((response, index) => {
    for (const use of response?.toolCalls ?? []) {
      let result: { id: unknown; output: unknown; isError?: boolean } | undefined;
      if (use.id !== null) {
        for (const later of requests.slice(index + 1)) {
          result = later?.toolResults.find((sent) => sent.id === use.id);
          if (result) break;
        }
      }
      toolCalls.push({
        sequence: toolCalls.length + 1,
        toolName: use.name ?? MARKER,
        input: use.arguments,
        inputHash: null,
        output: result === undefined ? null : result.output,
        outputHash: null,
        latencyMs: null,
        errorRef: result?.isError === true ? "tool_result.is_error" : null,
      });
    }
  });
  if (toolCalls.length > 0) trace["toolCalls"] = toolCalls;
  const last = responses[responses.length - 1];
  if (last) {
    if (last.text !== null) trace["finalOutputText"] = last.text;
    if (trace["stopReason"] !== "error") trace["stopReason"] = last.stopReason;
  }
  const reasoning = responses.flatMap((r) => r?.reasoning ?? []);
  if (reasoning.length > 0 && (trace["reasoningTokens"] === null || trace["reasoningTokens"] === undefined)) trace["reasoningTokens"] = reasoning;
}

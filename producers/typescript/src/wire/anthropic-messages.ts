/**
 * Anthropic Messages on the wire (what `producers/wire/anthropic_messages.py` reads): the body's
 * `system` (a string or one text block), `tools`, the sampling keys it holds, `tool_result` blocks;
 * a response's `text`, `thinking` and `tool_use` blocks (the input object as the API returned it),
 * plain or streamed (`message_start` ... `message_stop`, a tool input from its `partial_json`).
 */
import { sseData, type WireRequest, type WireResponse } from "./openai-chat.js";

export const FORMAT = "anthropic.messages";
const SAMPLING_KEYS = new Set(["max_tokens", "temperature", "top_p", "top_k", "stop_sequences", "tool_choice", "thinking", "service_tier"]);
const STOP_REASONS: Record<string, string> = {
  end_turn: "end_turn",
  stop_sequence: "end_turn",
  max_tokens: "max_tokens",
  model_context_window_exceeded: "max_tokens",
  tool_use: "tool_call",
  refusal: "error",
};

type Obj = Record<string, unknown>;
const isObj = (value: unknown): value is Obj => typeof value === "object" && value !== null && !Array.isArray(value);

function system(value: unknown): string | null {
  if (typeof value === "string") return value;
  if (Array.isArray(value) && value.length === 1 && isObj(value[0]) && value[0]["type"] === "text" && typeof value[0]["text"] === "string") return value[0]["text"];
  return null;
}

export function parseRequest(body: Obj): WireRequest {
  const results: { id: unknown; output: unknown; isError: boolean }[] = [];
  for (const message of Array.isArray(body["messages"]) ? (body["messages"] as unknown[]) : []) {
    if (!isObj(message) || !Array.isArray(message["content"])) continue;
    for (const block of message["content"] as unknown[]) {
      if (isObj(block) && block["type"] === "tool_result") results.push({ id: block["tool_use_id"] ?? null, output: block["content"] ?? null, isError: block["is_error"] === true });
    }
  }
  const sampling: Obj = {};
  for (const [key, value] of Object.entries(body)) if (SAMPLING_KEYS.has(key)) sampling[key] = value;
  return {
    model: typeof body["model"] === "string" ? body["model"] : null,
    systemPrompt: system(body["system"]),
    tools: body["tools"] ?? null,
    sampling,
    toolResults: results,
  };
}

function fromBlocks(blocks: Obj[], model: unknown, stop: unknown, complete: boolean): WireResponse {
  const texts = blocks.filter((b) => b["type"] === "text").map((b) => String(b["text"] ?? ""));
  return {
    model: typeof model === "string" ? model : null,
    text: texts.length > 0 ? texts.join("") : null,
    toolCalls: blocks.filter((b) => b["type"] === "tool_use").map((b) => ({ id: (b["id"] as string | undefined) ?? null, name: (b["name"] as string | undefined) ?? null, arguments: b["input"] ?? null })),
    stopReason: typeof stop === "string" ? (STOP_REASONS[stop] ?? null) : null,
    complete,
    reasoning: blocks.filter((b) => b["type"] === "thinking").map((b) => String(b["thinking"] ?? "")),
  };
}

export function parseResponse(body: string, streamed: boolean): WireResponse {
  if (!streamed) {
    const message = JSON.parse(body) as unknown;
    if (!isObj(message)) throw new Error("a message is not a JSON object");
    const content = Array.isArray(message["content"]) ? (message["content"] as unknown[]).filter(isObj) : [];
    return fromBlocks(content, message["model"], message["stop_reason"], true);
  }
  let model: unknown = null;
  let stop: unknown = null;
  let complete = false;
  const blocks = new Map<number, Obj>();
  const partial = new Map<number, string[]>();
  for (const data of sseData(body)) {
    const event = JSON.parse(data) as unknown;
    if (!isObj(event)) throw new Error("a message event is not a JSON object");
    const kind = event["type"];
    const index = (event["index"] as number | undefined) ?? 0;
    if (kind === "message_start") model = isObj(event["message"]) ? event["message"]["model"] : null;
    else if (kind === "content_block_start") blocks.set(index, { ...(isObj(event["content_block"]) ? event["content_block"] : {}) });
    else if (kind === "content_block_delta") {
      const block = blocks.get(index) ?? {};
      blocks.set(index, block);
      const delta = isObj(event["delta"]) ? event["delta"] : {};
      if (delta["type"] === "text_delta") block["text"] = String(block["text"] ?? "") + String(delta["text"] ?? "");
      else if (delta["type"] === "thinking_delta") block["thinking"] = String(block["thinking"] ?? "") + String(delta["thinking"] ?? "");
      else if (delta["type"] === "input_json_delta") partial.set(index, [...(partial.get(index) ?? []), String(delta["partial_json"] ?? "")]);
    } else if (kind === "message_delta") stop = (isObj(event["delta"]) ? event["delta"]["stop_reason"] : null) || stop;
    else if (kind === "message_stop") complete = true;
  }
  for (const [index, pieces] of partial) {
    const text = pieces.join("");
    const block = blocks.get(index) ?? {};
    try {
      block["input"] = text.trim() ? (JSON.parse(text) as unknown) : {};
    } catch {
      block["input"] = text; // a stream cut mid-argument: keep what arrived
    }
    blocks.set(index, block);
  }
  return fromBlocks([...blocks.entries()].sort((a, b) => a[0] - b[0]).map(([, b]) => b), model, stop, complete);
}

/**
 * OpenAI Chat Completions on the wire (what `producers/wire/openai_chat.py` reads from a captured
 * call): the request's model, system prompt, tools, sampling keys and tool results; the response's
 * model, text, tool calls (arguments exactly as returned) and stop reason, plain or streamed.
 */

export const FORMAT = "openai.chat.completions";

export interface ToolUse {
  readonly id: string | null;
  readonly name: string | null;
  readonly arguments: unknown;
}

export interface WireRequest {
  readonly model: string | null;
  readonly systemPrompt: string | null;
  readonly tools: unknown;
  readonly sampling: Record<string, unknown>;
  readonly toolResults: readonly { id: unknown; output: unknown; isError?: boolean }[];
}

export interface WireResponse {
  readonly model: string | null;
  readonly text: string | null;
  readonly toolCalls: readonly ToolUse[];
  readonly stopReason: string | null;
  readonly complete: boolean;
  readonly reasoning?: readonly string[];
}

/** A provider format: its name and its two readers. */
export interface WireFormat {
  readonly FORMAT: string;
  parseRequest(body: Record<string, unknown>): WireRequest;
  parseResponse(body: string, streamed: boolean): WireResponse;
}

export const SAMPLING_KEYS = new Set([
  "temperature", "top_p", "max_tokens", "max_completion_tokens", "stop", "seed", "presence_penalty",
  "frequency_penalty", "n", "logit_bias", "logprobs", "top_logprobs", "response_format", "tool_choice",
  "parallel_tool_calls", "reasoning_effort", "verbosity", "service_tier", "prediction", "modalities",
]);
const FINISH_TO_STOP: Record<string, string> = {
  stop: "end_turn",
  length: "max_tokens",
  tool_calls: "tool_call",
  function_call: "tool_call",
  content_filter: "error",
};
const CAPTURE_STOPS = new Set(["end_turn", "max_tokens", "tool_call", "error"]);

type Obj = Record<string, unknown>;
const isObj = (value: unknown): value is Obj => typeof value === "object" && value !== null && !Array.isArray(value);

function textContent(content: unknown): string | null {
  if (typeof content === "string") return content;
  if (Array.isArray(content) && content.length === 1) {
    const part: unknown = content[0];
    if (isObj(part) && part["type"] === "text" && typeof part["text"] === "string") return part["text"];
  }
  return null;
}

export function parseRequest(body: Obj): WireRequest {
  const messages = Array.isArray(body["messages"]) ? (body["messages"] as unknown[]) : [];
  const first = isObj(messages[0]) ? messages[0] : {};
  const system = first["role"] === "system" || first["role"] === "developer" ? textContent(first["content"]) : null;
  const sampling: Obj = {};
  for (const [key, value] of Object.entries(body)) if (SAMPLING_KEYS.has(key)) sampling[key] = value;
  return {
    model: typeof body["model"] === "string" ? body["model"] : null,
    systemPrompt: system,
    tools: body["tools"] ?? null,
    sampling,
    toolResults: messages.filter((m): m is Obj => isObj(m) && m["role"] === "tool").map((m) => ({ id: m["tool_call_id"] ?? null, output: m["content"] ?? null })),
  };
}

function captureStop(finish: unknown): string | null {
  const reason = typeof finish === "string" && finish ? finish : "stop";
  const stop = FINISH_TO_STOP[reason] ?? reason;
  return CAPTURE_STOPS.has(stop) ? stop : null;
}

/** Server-sent events' `data` fields (lines joined), as `producers/wire/sse.py` reads them. */
export function sseData(body: string): string[] {
  const events: string[] = [];
  let data: string[] = [];
  for (const line of body.split(/\r\n|\r|\n/)) {
    if (line === "") {
      if (data.length > 0) events.push(data.join("\n"));
      data = [];
    } else if (line.startsWith("data:")) {
      data.push(line.slice(5).replace(/^ /, ""));
    }
  }
  if (data.length > 0) events.push(data.join("\n"));
  return events;
}

export function parseResponse(body: string, streamed: boolean): WireResponse {
  if (!streamed) {
    const value = JSON.parse(body) as Obj;
    const choice = (value["choices"] as Obj[] | undefined)?.[0];
    const message = choice?.["message"];
    if (!isObj(message)) throw new Error("not a chat completion");
    const calls = Array.isArray(message["tool_calls"]) ? (message["tool_calls"] as Obj[]) : [];
    return {
      model: typeof value["model"] === "string" ? value["model"] : null,
      text: typeof message["content"] === "string" ? message["content"] : null,
      toolCalls: calls.map((call) => {
        const fn = isObj(call["function"]) ? call["function"] : {};
        return { id: (call["id"] as string | undefined) ?? null, name: (fn["name"] as string | undefined) ?? null, arguments: fn["arguments"] ?? null };
      }),
      stopReason: captureStop(choice?.["finish_reason"]),
      complete: true,
    };
  }
  let model: string | null = null;
  const text: string[] = [];
  const calls = new Map<number, { id: string | null; name: string | null; arguments: string | null }>();
  let finish: string | null = null;
  let done = false;
  for (const data of sseData(body)) {
    if (data.trim() === "[DONE]") {
      done = true;
      continue;
    }
    const chunk = JSON.parse(data) as Obj;
    if (typeof chunk["model"] === "string" && chunk["model"]) model = chunk["model"];
    for (const choice of (chunk["choices"] as Obj[] | undefined) ?? []) {
      if (!isObj(choice) || (choice["index"] ?? 0) !== 0) continue;
      if (typeof choice["finish_reason"] === "string" && choice["finish_reason"]) finish = choice["finish_reason"];
      const delta = isObj(choice["delta"]) ? choice["delta"] : {};
      if (typeof delta["content"] === "string") text.push(delta["content"]);
      for (const piece of (delta["tool_calls"] as Obj[] | undefined) ?? []) {
        const index = (piece["index"] as number | undefined) ?? 0;
        const call = calls.get(index) ?? { id: null, name: null, arguments: null };
        call.id = (piece["id"] as string | undefined) || call.id;
        const fn = isObj(piece["function"]) ? piece["function"] : {};
        call.name = (fn["name"] as string | undefined) || call.name;
        if (typeof fn["arguments"] === "string") call.arguments = (call.arguments ?? "") + fn["arguments"];
        calls.set(index, call);
      }
    }
  }
  return {
    model,
    text: text.length > 0 ? text.join("") : null,
    toolCalls: [...calls.entries()].sort((a, b) => a[0] - b[0]).map(([, c]) => c),
    stopReason: finish === null ? null : captureStop(finish),
    complete: done || finish !== null,
  };
}

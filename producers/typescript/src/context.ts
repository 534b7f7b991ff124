/**
 * The rendered context as `producers/context.py` renders it: `[system prompt, working set, user]`
 * as an OpenAI chat messages array (the working set joined by a blank line in one system message),
 * with the UTF-8 byte spans of each part inside the JSON text.
 */
/** A part's UTF-8 byte span inside the rendered context (`contextSpans` of the capture). */
export interface ContextSpan {
  readonly part: string;
  readonly start: number;
  readonly end: number;
  readonly encoding: string;
}

export const CHAT_MESSAGES_FORMAT = "openai.chat.messages+json";
const HEAD = '[{"role": "system", "content": "';
const MIDDLE = '"}, {"role": "system", "content": "';
const USER = '"}, {"role": "user", "content": "';
const TAIL = '"}]';
const SEPARATOR = "\\n\\n";

/** The text inside a JSON string literal, as Python's `json.dumps(ensure_ascii=False)` escapes it. */
function escape(text: string): string {
  // most text has nothing to escape: then it is its own escaped form (no copy made)
  if (!NEEDS_ESCAPE.test(text) && text.isWellFormed()) return text;
  return JSON.stringify(text).slice(1, -1);
}

const NEEDS_ESCAPE = /["\\\u0000-\u001f]/;

/** The last system prompt escaped (it is the same in every decision of an agent). */
let lastPrompt: { readonly text: string; readonly escaped: string; readonly size: number } | undefined;

export function renderChatContext(systemPrompt: string, memory: readonly [string, string][], userMessage: string): { text: string; spans: ContextSpan[] } {
  const pieces = [HEAD];
  const spans: ContextSpan[] = [];
  let at = HEAD.length;
  const add = (part: string, text: string): void => {
    let escaped: string;
    let size: number;
    if (part === "system_prompt" && lastPrompt !== undefined && lastPrompt.text === text) ({ escaped, size } = lastPrompt);
    else {
      escaped = escape(text);
      size = Buffer.byteLength(escaped, "utf8");
      if (part === "system_prompt") lastPrompt = { text, escaped, size };
    }
    pieces.push(escaped);
    spans.push({ part, start: at, end: at + size, encoding: "json-string" });
    at += size;
  };
  add("system_prompt", systemPrompt);
  pieces.push(MIDDLE);
  at += MIDDLE.length;
  const block = at;
  memory.forEach(([entryId, content], i) => {
    if (i > 0) {
      pieces.push(SEPARATOR);
      at += SEPARATOR.length;
    }
    add(`memory:${entryId}`, content);
  });
  spans.push({ part: "memory", start: block, end: at, encoding: "json-string" });
  pieces.push(USER);
  at += USER.length;
  add("user", userMessage);
  pieces.push(TAIL);
  return { text: pieces.join(""), spans };
}

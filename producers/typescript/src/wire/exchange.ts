/**
 * One HTTP attempt of a model call as it crossed the wire, credentials removed (the TypeScript side
 * of `producers/integrations/http_capture.py`): the request body exactly as sent, the headers and
 * query parameters known to carry no secret, the response body as read (a stream teed, never read
 * ahead of the agent), status and timing, and which attempt of one logical call it was.
 */

export const SAFE_REQUEST_HEADERS = new Set([
  "accept",
  "content-type",
  "content-length",
  "user-agent",
  "anthropic-version",
  "anthropic-beta",
  "openai-beta",
  "openai-version",
]);
export const SAFE_QUERY_PARAMS = new Set(["api-version", "beta", "limit", "order", "after", "before", "include[]"]);
const RETRYABLE_STATUS = new Set([408, 409, 429]);

export interface Exchange {
  /** The provider format it speaks (`openai.chat.completions`, `anthropic.messages`). */
  readonly format: string;
  callId: number;
  attempt: number;
  readonly method: string;
  readonly origin: string;
  readonly path: string;
  readonly query: string | null;
  readonly requestHeaders: readonly { name: string; value: string }[];
  readonly requestBody: Buffer;
  readonly startedAt: number;
  status: number | null;
  contentEncoding: string | null;
  responseBody: Buffer;
  streamed: boolean;
  eof: boolean;
  error: string | null;
  endedAt: number;
}

/** Headers worth keeping: the safe set and the SDKs' `x-stainless-*` telemetry, names lowercased. */
export function keptHeaders(headers: Headers): { name: string; value: string }[] {
  const kept: { name: string; value: string }[] = [];
  headers.forEach((value, name) => {
    const lower = name.toLowerCase();
    if (SAFE_REQUEST_HEADERS.has(lower) || lower.startsWith("x-stainless-")) kept.push({ name: lower, value });
  });
  return kept;
}

/** The query string when every parameter is known to be safe, else nothing (never a key in a URL). */
export function keptQuery(url: URL): string | null {
  if (!url.search) return null;
  for (const name of url.searchParams.keys()) if (!SAFE_QUERY_PARAMS.has(name)) return null;
  return url.search.slice(1);
}

/** Whether the attempt failed the way clients retry (no response, 408, 409, 429, >= 500). */
export function retryable(exchange: Exchange): boolean {
  return exchange.status === null || RETRYABLE_STATUS.has(exchange.status) || exchange.status >= 500;
}

export function retryCount(exchange: Exchange): number | undefined {
  const header = exchange.requestHeaders.find((h) => h.name === "x-stainless-retry-count");
  if (header === undefined) return undefined;
  const count = Number(header.value);
  return Number.isInteger(count) ? count : undefined;
}

/**
 * Wire capture through the `fetch` option every major client accepts (`openai`,
 * `@anthropic-ai/sdk`, the Vercel AI SDK's providers): `captureFetch(recorder)` returns a `fetch`
 * that sends exactly what the client gave it and hands the client the response untouched, while
 * keeping the exact request bytes, a teed copy of the response body (read only as the agent reads
 * its own branch), status and timing — never a credential header or a secret query parameter.
 * Each attempt joins the current decision (`AsyncLocalStorage`, see `Recorder.decision`); outside
 * one, each call is a decision of its own, finished when its response has been read.
 * Retries are attempts of one call: same method, URL and body bytes, and either the SDK's
 * `x-stainless-retry-count` > 0 or, without that header, a previous attempt that failed the way
 * clients retry. Capture problems are reported to the recorder; they never reach the agent.
 */
import { currentDecision, type Decision } from "../decision.js";
import type { Recorder } from "../recorder.js";
import { FORMATS } from "./assemble.js";
import { keptHeaders, keptQuery, retryable, retryCount, type Exchange } from "./exchange.js";

type Fetch = typeof globalThis.fetch;

export interface CaptureFetchOptions {
  /** The fetch to send with (default: the global one). */
  readonly fetch?: Fetch;
  /** How long a call outside a decision that failed retryably waits for its retry before it is finished. */
  readonly retryWindowMs?: number;
}

async function requestBytes(request: Request): Promise<Buffer> {
  return Buffer.from(await request.clone().arrayBuffer());
}

export function captureFetch(recorder: Recorder, options: CaptureFetchOptions = {}): Fetch {
  const send: Fetch = options.fetch ?? globalThis.fetch;
  const retryWindowMs = options.retryWindowMs ?? 30_000;
  let nextCallId = 0;
  const standalone = new Map<string, { decision: Decision; timer: NodeJS.Timeout }>();

  const wrapped = async (input: Parameters<Fetch>[0], init?: Parameters<Fetch>[1]): Promise<Response> => {
    let exchange: Exchange | undefined;
    let decision: Decision | undefined;
    let own = false;
    let sent = false; // once the agent's request went out, its outcome is the agent's, never re-sent
    try {
      const request = new Request(input, init);
      const url = new URL(request.url);
      const format = FORMATS.find((f) => url.pathname.endsWith(f.suffix))?.wire.FORMAT;
      if (format === undefined) {
        // a call in a format this SDK cannot read yet: sent untouched, and said, never guessed at
        recorder.report(currentDecision()?.decisionId, `captureFetch: ${request.method} ${url.pathname} is not a model API blackbox reads (Chat Completions, Messages); not captured`);
        sent = true;
        return await send(input, init);
      }
      const body = await requestBytes(request);
      exchange = {
        format,
        callId: 0,
        attempt: 1,
        method: request.method,
        origin: url.origin,
        path: url.pathname,
        query: keptQuery(url),
        requestHeaders: keptHeaders(request.headers),
        requestBody: body,
        startedAt: Date.now(),
        status: null,
        contentEncoding: null,
        responseBody: Buffer.alloc(0),
        streamed: false,
        eof: false,
        error: null,
        endedAt: Date.now(),
      };
      const key = `${exchange.method} ${url.href}\n${body.toString("latin1")}`;
      decision = currentDecision();
      const count = retryCount(exchange);
      if (decision === undefined) {
        const waiting = standalone.get(key);
        if (waiting !== undefined && (count ?? 1) > 0) {
          clearTimeout(waiting.timer);
          standalone.delete(key);
          decision = waiting.decision;
        } else {
          decision = recorder.decision({ consequential: false });
        }
        own = true;
      }
      const previous = decision.exchanges[decision.exchanges.length - 1];
      const sameRequest = previous !== undefined && previous.method === exchange.method && previous.origin === exchange.origin && previous.path === exchange.path && previous.requestBody.equals(body);
      if (sameRequest && (count !== undefined ? count > 0 : retryable(previous))) {
        exchange.callId = previous.callId;
        exchange.attempt = previous.attempt + 1;
      } else {
        exchange.callId = ++nextCallId;
      }
      decision.exchanges.push(exchange);
      const settle = (ex: Exchange, d: Decision): void => {
        ex.endedAt = Date.now();
        if (!own) return;
        if (retryable(ex)) {
          const timer = setTimeout(() => {
            standalone.delete(key);
            d.finish({ output: null, stopReason: null });
          }, retryWindowMs);
          timer.unref();
          standalone.set(key, { decision: d, timer });
        } else {
          d.finish({ output: null, stopReason: null });
        }
      };

      let response: Response;
      try {
        sent = true;
        response = await send(input, init);
      } catch (error) {
        exchange.error = String(error);
        settle(exchange, decision);
        throw error;
      }
      exchange.status = response.status;
      exchange.contentEncoding = response.headers.get("content-encoding") || null;
      exchange.streamed = (response.headers.get("content-type") ?? "").toLowerCase().startsWith("text/event-stream");
      if (response.body === null) {
        exchange.eof = true;
        settle(exchange, decision);
        return response;
      }
      const [agent, kept] = response.body.tee();
      const ex = exchange;
      const d = decision;
      d.pending.push(
        (async () => {
          const chunks: Buffer[] = [];
          try {
            for await (const chunk of kept) chunks.push(Buffer.from(chunk));
            ex.eof = true;
          } catch (error) {
            ex.error = String(error);
          }
          ex.responseBody = Buffer.concat(chunks);
          settle(ex, d);
        })(),
      );
      return new Response(agent, { status: response.status, statusText: response.statusText, headers: response.headers });
    } catch (error) {
      if (!sent) {
        // the capture itself failed before sending: send untouched, never fail the agent's call for it
        recorder.report(decision?.decisionId, `captureFetch: not captured (${String(error)})`);
        return send(input, init);
      }
      throw error;
    }
  };
  return wrapped as Fetch;
}

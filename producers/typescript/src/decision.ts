/**
 * One decision being recorded: the same API as the Python `DecisionBuilder` (configure, memory
 * with provenance, rendered context, tool calls, external state, flag, finish). Every method
 * only stores a snapshot of what it was given and returns at once; nothing it is given can make it
 * throw into the agent. A value that cannot be recorded as given (not JSON, circular, NaN, a
 * bigint) is replaced by `{"blackbox.unrecordable": "<why> at <path>"}` and named in
 * `outcome.reason`, like the Python SDK.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { copyJson } from "./canonical.js";
import { CHAT_MESSAGES_FORMAT, renderChatContext, type ContextSpan } from "./context.js";
import { newDecisionId, timestamp } from "./ids.js";
import { assemble } from "./wire/assemble.js";
import type { Exchange } from "./wire/exchange.js";

export type { ContextSpan };

export interface AgentConfig {
  readonly model: string;
  readonly modelVersion?: string;
  readonly endpoint?: string;
  readonly systemPrompt?: string;
  readonly systemPromptVersion?: string;
  readonly toolSchema?: unknown;
  readonly toolSchemaVersion?: string;
  readonly sampling?: Record<string, unknown>;
}

export interface MemoryEntry {
  readonly entryId: string;
  readonly tier: string;
  readonly content: string | null;
  readonly provenance?: { writerId?: string; writtenAt?: string; sourceType?: string };
  readonly score?: number;
  readonly method?: string;
  readonly embeddingModel?: string;
  readonly embeddingVersion?: string;
  readonly position?: number;
}

export type OutcomeStatus = "success" | "failure" | "unknown";

export interface FinishOptions {
  readonly output: string | null;
  readonly stopReason?: string | null;
  readonly reasoning?: readonly string[];
  readonly reasoningTokenCount?: number;
  readonly outcome?: OutcomeStatus;
  readonly outcomeReason?: string;
  readonly totalLatencyMs?: number;
  readonly totalContextTokens?: number;
}

export interface DecisionOptions {
  readonly request?: unknown;
  readonly originUserId?: string;
  readonly originSessionId?: string;
  readonly consequential?: boolean;
  readonly reason?: string;
}

/** Where a finished decision goes (the Recorder). */
export interface DecisionSink {
  readonly agentId: string;
  readonly runtimeId: string | null;
  readonly defaultConfig: AgentConfig | undefined;
  readonly replayPolicy: { retentionDays: number | null; piiRedacted: boolean; replayAccessScope: string };
  submit(decision: Decision): void;
}

export const currentDecisionStorage = new AsyncLocalStorage<Decision>();

/** The decision whose `recorder.decision(...)` callback encloses the caller, if any. */
export function currentDecision(): Decision | undefined {
  return currentDecisionStorage.getStore();
}

const UNRECORDABLE = "blackbox.unrecordable";

export class Decision {
  readonly decisionId: string;
  readonly capturedAt: string;
  consequential: boolean;
  consequentialReason: string | null;
  fidelity: "sdk" | "wire" = "sdk";
  readonly #sink: DecisionSink;
  readonly #problems: string[] = [];
  #config: AgentConfig | undefined;
  #request: unknown = null;
  #origin: [string | null, string | null];
  readonly #memory: Record<string, unknown>[] = [];
  readonly #toolCalls: Record<string, unknown>[] = [];
  readonly #externals: Record<string, unknown>[] = [];
  /** HTTP attempts a wire capture attached (see `captureFetch`), assembled on the worker. */
  readonly exchanges: Exchange[] = [];
  /** Response bodies still being read (teed); the worker waits for them before building. */
  readonly pending: Promise<void>[] = [];
  #rendered: { format: string; text: string; spans: ContextSpan[] } | null = null;
  #finished = false;
  #finish: FinishOptions | undefined;

  constructor(sink: DecisionSink, options: DecisionOptions = {}) {
    const now = Date.now();
    this.#sink = sink;
    this.decisionId = newDecisionId(now);
    this.capturedAt = timestamp(now);
    this.consequential = options.consequential === true;
    this.consequentialReason = options.reason ?? null;
    this.#origin = [options.originUserId ?? null, options.originSessionId ?? null];
    if (options.request !== undefined) this.setRequest(options.request);
  }

  get finished(): boolean {
    return this.#finished;
  }

  get problems(): readonly string[] {
    return this.#problems;
  }

  /** A JSON snapshot of `value` (never the caller's object), or the unrecordable marker. */
  #snapshot(value: unknown, path: string): unknown {
    if (value === undefined || value === null) return null;
    try {
      return copyJson(value, path); // refuses, with the path, what has no canonical form
    } catch (error) {
      const why = error instanceof Error ? error.message : String(error);
      this.#problems.push(why);
      return { [UNRECORDABLE]: why };
    }
  }

  configure(config: AgentConfig): this {
    if (this.#finished) return this; // the capture is already queued
    this.#config = {
      ...config,
      toolSchema: this.#snapshot(config.toolSchema, "agentConfiguration.toolSchemaJson"),
      sampling: (this.#snapshot(config.sampling ?? {}, "agentConfiguration.samplingParameters") ?? {}) as Record<string, unknown>,
    };
    return this;
  }

  setRequest(payload: unknown): this {
    if (this.#finished) return this; // the capture is already queued
    this.#request = this.#snapshot(payload, "input.requestPayload");
    return this;
  }

  addMemory(entry: MemoryEntry): this {
    if (this.#finished) return this; // the capture is already queued
    const provenance = entry.provenance ?? {};
    this.#memory.push({
      entryId: String(entry.entryId),
      tier: String(entry.tier),
      provenance: {
        writerId: provenance.writerId ?? null,
        writtenAt: provenance.writtenAt ?? null,
        sourceType: provenance.sourceType ?? null,
      },
      renderedContent: typeof entry.content === "string" ? entry.content : null,
      contextPosition: entry.position ?? this.#memory.length,
      retrievalScore: entry.score ?? null,
      retrievalMethod: entry.method ?? null,
      embeddingModel: entry.embeddingModel ?? null,
      embeddingVersion: entry.embeddingVersion ?? null,
      renderedContentHash: null,
    });
    return this;
  }

  /** Render `[system prompt, working set, user message]` as chat messages (as the Python SDK does)
   * and record it; send the returned text (or `JSON.parse` of it) to the model. */
  renderContext(options: { userMessage: string }): { text: string; spans: readonly ContextSpan[] } {
    const prompt = (this.#config ?? this.#sink.defaultConfig)?.systemPrompt;
    if (this.#finished || typeof prompt !== "string") {
      if (!this.#finished) this.#problems.push("renderContext(): configure a systemPrompt first");
      return { text: "", spans: [] };
    }
    // in position order (a stable sort; most working sets are added in order: then none is made)
    let ordered = true;
    for (let i = 1; i < this.#memory.length && ordered; i++) ordered = (this.#memory[i - 1]!["contextPosition"] as number) <= (this.#memory[i]!["contextPosition"] as number);
    const memory = (ordered ? this.#memory : [...this.#memory].sort((a, b) => (a["contextPosition"] as number) - (b["contextPosition"] as number))).map((e): [string, string] => [String(e["entryId"]), (e["renderedContent"] as string | null) ?? ""]);
    const rendered = renderChatContext(prompt, memory, String(options.userMessage));
    this.#rendered = { format: CHAT_MESSAGES_FORMAT, text: rendered.text, spans: rendered.spans };
    return rendered;
  }

  /** The exact text the model received, with byte spans (UTF-8 offsets) naming its parts. */
  setRenderedContext(text: string, options: { spans?: readonly ContextSpan[]; format?: string } = {}): this {
    if (this.#finished) return this; // the capture is already queued
    this.#rendered = {
      format: options.format ?? "openai.chat.messages+json",
      text: String(text),
      spans: (options.spans ?? []).map((span) => ({ part: span.part, start: span.start, end: span.end, encoding: span.encoding })),
    };
    return this;
  }

  addToolCall(call: { name: string; input: unknown; output: unknown; latencyMs?: number; errorRef?: string }): this {
    if (this.#finished) return this; // the capture is already queued
    const index = this.#toolCalls.length;
    this.#toolCalls.push({
      sequence: index + 1,
      toolName: String(call.name),
      input: this.#snapshot(call.input, `executionTrace.toolCalls[${index}].input`),
      inputHash: null,
      output: this.#snapshot(call.output, `executionTrace.toolCalls[${index}].output`),
      outputHash: null,
      latencyMs: call.latencyMs ?? null,
      errorRef: call.errorRef ?? null,
    });
    return this;
  }

  observeExternal(external: { key: string; value: unknown; source?: string; capturedAt?: string }): this {
    if (this.#finished) return this; // the capture is already queued
    const index = this.#externals.length;
    this.#externals.push({
      key: String(external.key),
      capturedValue: this.#snapshot(external.value, `externalState.observableExternals[${index}].capturedValue`),
      capturedValueHash: null,
      capturedAt: external.capturedAt ?? timestamp(),
      sourceEndpoint: external.source ?? null,
    });
    return this;
  }

  flagConsequential(reason: string): this {
    this.consequential = true;
    this.consequentialReason = String(reason);
    return this;
  }

  /** Record the end and queue the capture; returns the decision id. Never throws. */
  finish(options: FinishOptions): string {
    if (this.#finished) return this.decisionId;
    this.#finished = true;
    this.#finish = options;
    this.#sink.submit(this);
    return this.decisionId;
  }

  /** The capture in JSON form, unsealed (called on the worker, after `pending` settled);
   * undefined when it could not be built. */
  toCapture(): Record<string, unknown> | undefined {
    if (this.#finish === undefined) return undefined;
    try {
      const capture = this.#build(this.#finish);
      if (this.exchanges.length > 0) {
        const problems: string[] = [];
        assemble(capture, this.exchanges, problems);
        if (problems.length > 0) {
          const outcome = capture["outcome"] as { reason: string | null };
          outcome.reason = [outcome.reason, ...problems].filter(Boolean).join("; ");
        }
      }
      return capture;
    } catch (error) {
      this.#problems.push(`finish: ${String(error)}`);
      return undefined;
    }
  }

  #build(options: FinishOptions): Record<string, unknown> {
    const config = this.#config ?? this.#sink.defaultConfig ?? { model: "blackbox.unrecordable" };
    const problems = this.#problems;
    let outcomeReason = options.outcomeReason ?? null;
    if (problems.length > 0) outcomeReason = [outcomeReason, `unrecordable: ${problems.join("; ")}`].filter(Boolean).join("; ");
    const capture: Record<string, unknown> = {
      version: "replay/v1",
      decisionId: this.decisionId,
      agentId: this.#sink.agentId,
      runtimeId: this.#sink.runtimeId,
      capturedAt: this.capturedAt,
      captureLevel: null,
      ...(this.fidelity !== "sdk" ? { fidelity: this.fidelity } : {}),
      consequential: { flagged: this.consequential, reason: this.consequentialReason },
      outcome: { status: options.outcome ?? "unknown", reason: outcomeReason },
      input: { originUserId: this.#origin[0], originSessionId: this.#origin[1], requestPayload: this.#request, requestPayloadHash: null },
      agentConfiguration: {
        systemPromptVersion: config.systemPromptVersion ?? null,
        systemPromptHash: null,
        systemPromptText: config.systemPrompt ?? null,
        toolSchemaVersion: config.toolSchemaVersion ?? null,
        toolSchemaHash: null,
        toolSchemaJson: config.toolSchema ?? null,
        modelIdentifier: config.model,
        modelVersion: config.modelVersion ?? null,
        modelProviderEndpoint: config.endpoint ?? null,
        samplingParameters: { ...(config.sampling ?? {}) },
      },
      renderedContext: this.#rendered === null ? null : { ...this.#rendered, hash: null },
      memoryState: {
        workingSetEntries: this.#memory,
        totalContextTokens: options.totalContextTokens ?? null,
        contextSetHash: null,
        contextSetAlgorithm: "rfc6962-sha256",
        contextSetLeafCount: null,
      },
      executionTrace: {
        reasoningTokens: options.reasoning ? [...options.reasoning] : null,
        reasoningTokensHash: null,
        reasoningTokenCount: options.reasoningTokenCount ?? null,
        toolCalls: this.#toolCalls,
        finalOutputText: options.output ?? null,
        finalOutputHash: null,
        stopReason: options.stopReason === undefined ? "end_turn" : options.stopReason,
        totalLatencyMs: options.totalLatencyMs ?? null,
      },
      externalState: { observableExternals: this.#externals },
      replayPolicy: { ...this.#sink.replayPolicy },
      signature: { algorithm: "ed25519", publicKeyRef: null, signatureBytes: null },
    };
    return capture;
  }
}

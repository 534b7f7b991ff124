/**
 * The Recorder: what a Node agent holds. Decisions are built on the agent's path (snapshots only);
 * sealing, the capture policy, Avro encoding and delivery run in a worker turn scheduled with
 * `setImmediate`, in batches, off the call that finished the decision. The queue is bounded: when
 * it is full a routine decision is dropped and counted; nothing here throws into the agent
 * (problems go to `onError` and `stats`).
 *
 * Flight recorder: the full sealed content of routine decisions sent structured-only is held for
 * `flightWindowMs` (bounded by `flightMaxBytes`, oldest evicted first); `flagConsequential(id)`
 * within the window sends a signed flag event and the full capture, as the Python Recorder does.
 */
import { canonicalJson, copyJson } from "./canonical.js";
import { checkIn, type BlobStore } from "./claimcheck.js";
import { Decision, currentDecisionStorage, type AgentConfig, type DecisionOptions, type DecisionSink } from "./decision.js";
import { pae } from "./dsse.js";
import { encodeCapture, encodeEvent } from "./avro.js";
import { timestamp } from "./ids.js";
import { ConfigurationError } from "./errors.js";
import type { Signer } from "./keys.js";
import { DEFAULT_SAMPLE_ONE_IN, captureLevel, stripContent } from "./policy.js";
import { seal } from "./seal.js";
import { randomBytes } from "node:crypto";
import { LocalKeyFile, Redactor, Vault, type RedactMode } from "./privacy/protect.js";
import { SealPool } from "./seal-pool.js";
import type { Message, Transport } from "./spool.js";

export const FLAG_PAYLOAD_TYPE = "application/vnd.blackbox.flag+json;version=v1";

export interface RecorderOptions {
  readonly agentId: string;
  readonly runtimeId?: string;
  readonly signer: Signer;
  readonly transport: Transport;
  readonly sampleOneIn?: number;
  readonly queueSize?: number;
  readonly batchSize?: number;
  /** Milliseconds of sealing after which the worker yields to the event loop (default 0.5). */
  readonly sliceMs?: number;
  readonly config?: AgentConfig;
  readonly retentionDays?: number | null;
  readonly replayAccessScope?: "operator" | "regulator" | "counterparty";
  readonly flightWindowMs?: number;
  readonly flightMaxBytes?: number;
  /** Where captures above `maxMessageBytes` go by claim check (without one they fail, reported). */
  readonly blobStore?: BlobStore;
  readonly maxMessageBytes?: number;
  /** Personal data out of every capture before it is sealed (default "builtin", as the Python
   * Recorder's BLACKBOX_REDACT): `replayPolicy.piiRedacted` then says whether anything was. */
  readonly redact?: RedactMode;
  /** Where the originals of redacted parts are kept sealed: a vault, or `kekFile` (the key file
   * Python's BLACKBOX_KEK_FILE names) with the key records in `blobStore`. Without one the
   * originals are redacted and not kept (a process warning says so once). */
  readonly vault?: Vault;
  readonly kekFile?: string;
  /** Worker threads that redact, seal and encode captures off the agent's event loop (default 0:
   * on the loop, in slices of `sliceMs`). */
  readonly sealThreads?: number;
  readonly onError?: (problem: { decisionId: string | undefined; message: string }) => void;
}

export interface RecorderStats {
  submitted: number;
  delivered: number;
  dropped: number;
  failed: number;
  unrecordable: number;
  flagsSent: number;
  flightHeld: number;
  flightEvicted: number;
}

interface Held {
  readonly sealed: Record<string, unknown>;
  readonly at: number;
  readonly size: number;
}

export class Recorder implements DecisionSink {
  readonly agentId: string;
  readonly runtimeId: string | null;
  readonly defaultConfig: AgentConfig | undefined;
  readonly replayPolicy: { retentionDays: number | null; piiRedacted: boolean; replayAccessScope: string };
  readonly stats: RecorderStats = { submitted: 0, delivered: 0, dropped: 0, failed: 0, unrecordable: 0, flagsSent: 0, flightHeld: 0, flightEvicted: 0 };
  readonly #signer: Signer;
  readonly #transport: Transport;
  readonly #sampleOneIn: number;
  readonly #queueSize: number;
  readonly #batchSize: number;
  readonly #sliceMs: number;
  #sliceStart = 0;
  readonly #flightWindowMs: number;
  readonly #flightMaxBytes: number;
  readonly #onError: RecorderOptions["onError"];
  readonly #key: Buffer;
  readonly #blobStore: BlobStore | undefined;
  readonly #maxMessageBytes: number;
  readonly #redactor: Redactor | undefined;
  readonly #vault: Vault | undefined;
  readonly #pool: SealPool | undefined;
  #queue: (Decision | Message | { readonly sealed: Record<string, unknown> })[] = [];
  #scheduled = false;
  #inFlight: Promise<void> = Promise.resolve();
  readonly #flight = new Map<string, Held>();
  #flightBytes = 0;

  constructor(options: RecorderOptions) {
    this.agentId = options.agentId;
    this.runtimeId = options.runtimeId ?? null;
    // the recorder's own copy of the configuration: its parts are hashed once, not per decision
    this.defaultConfig =
      options.config === undefined
        ? undefined
        : {
            ...options.config,
            toolSchema: copyJson(options.config.toolSchema ?? null, "agentConfiguration.toolSchemaJson"),
            sampling: copyJson(options.config.sampling ?? {}, "agentConfiguration.samplingParameters") as Record<string, unknown>,
          };
    this.replayPolicy = {
      retentionDays: options.retentionDays === undefined ? 365 : options.retentionDays,
      piiRedacted: false,
      replayAccessScope: options.replayAccessScope ?? "operator",
    };
    this.#signer = options.signer;
    this.#transport = options.transport;
    this.#sampleOneIn = options.sampleOneIn ?? DEFAULT_SAMPLE_ONE_IN;
    this.#queueSize = options.queueSize ?? 10_000;
    this.#batchSize = options.batchSize ?? 256;
    this.#sliceMs = options.sliceMs ?? 0.5;
    this.#flightWindowMs = options.flightWindowMs ?? 15 * 60_000;
    this.#flightMaxBytes = options.flightMaxBytes ?? 64 * 1024 * 1024;
    this.#onError = options.onError;
    this.#key = Buffer.from(this.agentId, "utf8");
    this.#blobStore = options.blobStore;
    this.#maxMessageBytes = options.maxMessageBytes ?? 900_000;
    this.#vault = vaultOf(options);
    this.#redactor = (options.redact ?? "builtin") === "off" ? undefined : new Redactor({ vault: this.#vault });
    const threads = options.sealThreads ?? 0;
    if (!Number.isInteger(threads) || threads < 0) throw new ConfigurationError(`sealThreads is a whole number >= 0, got ${threads}`);
    this.#pool = threads > 0 ? new SealPool(threads, this.#signer) : undefined;
    if (this.#redactor !== undefined && this.#redactor.vault === undefined) {
      process.emitWarning("redaction is on but no vault is configured: originals are redacted and not kept (pass vault, or kekFile with blobStore)", { code: "BLACKBOX_NO_VAULT" });
    }
  }

  /** A decision; with `fn`, it is the current decision (AsyncLocalStorage) while `fn` runs, and
   * is finished with no output if `fn` did not finish it (a throw is recorded as a failure and rethrown). */
  decision(options?: DecisionOptions): Decision;
  decision<T>(options: DecisionOptions, fn: (decision: Decision) => T): T;
  decision<T>(options: DecisionOptions = {}, fn?: (decision: Decision) => T): Decision | T {
    const decision = new Decision(this, options);
    if (fn === undefined) return decision;
    const close = (error?: unknown): void => {
      if (decision.finished) return;
      if (error === undefined) decision.finish({ output: null, stopReason: null });
      else decision.finish({ output: null, stopReason: "error", outcome: "failure", outcomeReason: String(error) });
    };
    return currentDecisionStorage.run(decision, () => {
      let result: T;
      try {
        result = fn(decision);
      } catch (error) {
        close(error);
        throw error;
      }
      if (result instanceof Promise) {
        return result.then(
          (value: unknown) => {
            close();
            return value;
          },
          (error: unknown) => {
            close(error);
            throw error;
          },
        ) as T;
      }
      close();
      return result;
    });
  }

  submit(decision: Decision): void {
    this.stats.submitted += 1;
    if (decision.problems.length > 0) this.stats.unrecordable += 1;
    if (this.#queue.length >= this.#queueSize) {
      this.stats.dropped += 1;
      this.#report(decision.decisionId, `queue full (${this.#queueSize}): decision dropped`);
      return;
    }
    this.#queue.push(decision);
    this.#schedule();
  }

  /** Upgrade a decision after the fact: a signed flag event, and its full capture while the flight recorder holds it. */
  flagConsequential(decisionId: string, reason: string, options: { failure?: boolean } = {}): boolean {
    try {
      const unsigned = { decisionId, agentId: this.agentId, reason, flaggedAt: timestamp(), failure: options.failure === true };
      const signature = this.#signer.sign(pae(FLAG_PAYLOAD_TYPE, canonicalJson(unsigned, { path: "flag" })));
      const event = { ...unsigned, signature: { algorithm: "ed25519", publicKeyRef: this.#signer.publicKeyRef, signatureBytes: "base64:" + signature.toString("base64") } };
      this.#queue.push({ key: this.#key, value: encodeEvent("flag", event) });
      this.stats.flagsSent += 1;
      const held = this.#take(decisionId);
      if (held === undefined) {
        this.#report(decisionId, "flagged, but the flight recorder no longer holds its content (only the flag is sent)");
      } else {
        const full = structuredClone(held.sealed);
        full["captureLevel"] = "full";
        full["consequential"] = { flagged: true, reason };
        (full["signature"] as Record<string, unknown>)["signatureBytes"] = null;
        this.#queue.push({ sealed: seal(full, this.#signer, { inPlace: true }) });
      }
      this.#schedule();
      return held !== undefined;
    } catch (error) {
      this.#report(decisionId, `flag_consequential: ${String(error)}`);
      return false;
    }
  }

  /** Resolves once everything queued so far is delivered (or reported). */
  async flush(): Promise<void> {
    while (this.#queue.length > 0 || this.#scheduled) {
      if (!this.#scheduled) this.#schedule();
      await new Promise<void>((resolve) => setImmediate(resolve));
      await this.#inFlight;
    }
    await this.#inFlight;
  }

  async close(): Promise<void> {
    await this.flush();
    await this.#pool?.close();
    await this.#transport.close();
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#inFlight = this.#inFlight.then(() => this.#turn());
    });
  }

  async #turn(): Promise<void> {
    const batch = this.#queue.splice(0, this.#batchSize);
    // teed response bodies still being read: the capture waits for them, the agent never does
    await Promise.all(batch.map((item) => (item instanceof Decision ? Promise.allSettled(item.pending) : undefined)));
    const messages: Message[] = [];
    this.#sliceStart = performance.now();
    if (this.#pool !== undefined) {
      // the threads seal the whole batch at once; messages keep the batch's order
      for (const message of await Promise.all(batch.map((item) => this.#prepare(item)))) if (message !== undefined) messages.push(message);
    } else {
      for (const item of batch) {
        const message = await this.#prepare(item);
        if (message !== undefined) messages.push(message);
        if (this.#sliceUsed()) await this.#yieldToLoop();
      }
    }
    try {
      await this.#transport.send(messages);
      this.stats.delivered += messages.length;
    } catch (error) {
      this.stats.failed += messages.length;
      this.#report(undefined, `delivery failed for ${messages.length} messages: ${String(error)}`);
    }
    this.#scheduled = false;
    if (this.#queue.length > 0) this.#schedule();
  }

  async #prepare(item: Decision | Message | { readonly sealed: Record<string, unknown> }): Promise<Message | undefined> {
    if (item instanceof Decision) return this.#seal(item);
    if (!("sealed" in item)) return item;
    try {
      return { key: this.#key, value: await this.#checked(encodeCapture(item.sealed), item.sealed) };
    } catch (error) {
      this.stats.failed += 1;
      this.#report(String(item.sealed["decisionId"]), `the flagged capture could not be sent: ${String(error)}`);
      return undefined;
    }
  }

  async #seal(decision: Decision): Promise<Message | undefined> {
    const capture = decision.toCapture();
    if (capture === undefined) {
      this.stats.failed += 1;
      this.#report(decision.decisionId, "the decision could not be built");
      return undefined;
    }
    try {
      const consequential = decision.consequential || this.#failure(capture) !== undefined;
      if (consequential && !decision.consequential) {
        capture["consequential"] = { flagged: true, reason: `failure indicator: ${this.#failure(capture)}` };
      }
      const level = captureLevel(decision.decisionId, consequential, this.#sampleOneIn);
      capture["captureLevel"] = level;
      if (this.#pool !== undefined) return await this.#sealInThread(decision.decisionId, capture, level === "structured-only");
      if (this.#sliceUsed()) await this.#yieldToLoop();
      if (this.#redactor !== undefined) {
        await this.#redactor.protect(capture); // personal data out before anything is signed or sent
        if (this.#sliceUsed()) await this.#yieldToLoop();
      }
      const sealed = seal(capture, this.#signer, { inPlace: true });
      if (this.#sliceUsed()) await this.#yieldToLoop();
      let sent = sealed;
      if (level === "structured-only") {
        this.#hold(decision.decisionId, sealed);
        sent = stripContent(sealed);
      }
      return { key: this.#key, value: await this.#checked(encodeCapture(sent), sent) };
    } catch (error) {
      this.stats.failed += 1;
      this.#report(decision.decisionId, `sealing failed: ${String(error)}`);
      return undefined;
    }
  }

  async #sealInThread(decisionId: string, capture: Record<string, unknown>, structuredOnly: boolean): Promise<Message> {
    const dataKey = this.#redactor !== undefined && this.#vault !== undefined ? randomBytes(32) : null;
    const done = await this.#pool!.run({ capture, redact: this.#redactor !== undefined, dataKey, structuredOnly });
    if ("error" in done) throw new Error(done.error);
    if (done.keyUsed && dataKey !== null) await this.#vault!.store(decisionId, dataKey); // before the capture leaves
    if (done.held !== null) this.#hold(decisionId, done.held);
    return { key: this.#key, value: await this.#checked(Buffer.from(done.encoded.buffer, done.encoded.byteOffset, done.encoded.byteLength), capture) };
  }

  /** Give the event loop back once a slice of sealing is used up: the agent's timers and I/O wait
   * at most one step of one capture (hashing and signing, or encoding), never a whole batch. */
  #sliceUsed(): boolean {
    return performance.now() - this.#sliceStart >= this.#sliceMs;
  }

  async #yieldToLoop(): Promise<void> {
    await new Promise<void>((resolve) => setImmediate(resolve));
    this.#sliceStart = performance.now();
  }

  /** The message value: the encoded capture, or a claim-check event when it is too large. */
  async #checked(encoded: Buffer, capture: Record<string, unknown>): Promise<Buffer> {
    if (encoded.length <= this.#maxMessageBytes) return encoded;
    if (this.#blobStore === undefined) {
      throw new Error(`the capture is ${encoded.length} bytes, above maxMessageBytes ${this.#maxMessageBytes}, and no blobStore is configured for a claim check`);
    }
    return encodeEvent("claim_check", await checkIn(this.#blobStore, encoded, capture));
  }

  #failure(capture: Record<string, unknown>): string | undefined {
    const trace = capture["executionTrace"] as { toolCalls: { errorRef: unknown; toolName: unknown }[]; stopReason: unknown };
    for (const call of trace.toolCalls) if (call.errorRef) return `tool error in ${String(call.toolName)}`;
    if (trace.stopReason === "error") return "stop_reason error";
    const outcome = capture["outcome"] as { status: unknown; reason: unknown };
    if (outcome.status === "failure") return typeof outcome.reason === "string" && outcome.reason ? `outcome failure (${outcome.reason})` : "outcome failure";
    return undefined;
  }

  #hold(decisionId: string, sealed: Record<string, unknown>): void {
    if (this.#flightWindowMs <= 0 || this.#flightMaxBytes <= 0) return;
    const now = Date.now();
    const size = JSON.stringify(sealed).length;
    this.#flight.set(decisionId, { sealed, at: now, size });
    this.#flightBytes += size;
    this.stats.flightHeld = this.#flight.size;
    for (const [id, held] of this.#flight) {
      if (this.#flightBytes <= this.#flightMaxBytes && now - held.at <= this.#flightWindowMs) break;
      this.#flight.delete(id);
      this.#flightBytes -= held.size;
      this.stats.flightEvicted += 1;
    }
    this.stats.flightHeld = this.#flight.size;
  }

  #take(decisionId: string): Held | undefined {
    const held = this.#flight.get(decisionId);
    if (held === undefined) return undefined;
    this.#flight.delete(decisionId);
    this.#flightBytes -= held.size;
    this.stats.flightHeld = this.#flight.size;
    return Date.now() - held.at <= this.#flightWindowMs ? held : undefined;
  }

  /** Report a problem to `onError` (never thrown); for the capture adapters. */
  report(decisionId: string | undefined, message: string): void {
    this.#report(decisionId, message);
  }

  #report(decisionId: string | undefined, message: string): void {
    try {
      this.#onError?.({ decisionId, message });
    } catch {
      // a failing error handler must not reach the agent either
    }
  }
}

function vaultOf(options: RecorderOptions): Vault | undefined {
  if (options.vault !== undefined) return options.vault;
  if (options.kekFile !== undefined && options.blobStore !== undefined) return new Vault(new LocalKeyFile(options.kekFile), options.blobStore);
  return undefined;
}

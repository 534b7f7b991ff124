/**
 * The Kafka transport: KafkaJS's idempotent producer (`acks = -1`, one request in flight, so
 * retries can neither duplicate nor reorder), key = agent id (per-agent order), value = the Avro
 * single-object bytes, on `blackbox.captures.v1` — the same records the Python `KafkaTransport`
 * sends, read by the same ingest. A batch resolves only when the broker acknowledged all of it.
 * KafkaJS is pure JavaScript: no native build or downloaded binary at install. It compresses with
 * gzip or not at all (zstd needs a codec plugin); ingest reads either.
 */
import { CompressionTypes, Kafka, logLevel, type Producer } from "kafkajs";
import { TransportError, type Message, type Transport } from "./spool.js";

export interface KafkaTransportOptions {
  readonly brokers: readonly string[];
  readonly topic?: string;
  readonly clientId?: string;
  readonly gzip?: boolean;
  /** Milliseconds a send may take before it fails (the recorder reports and counts it). */
  readonly timeoutMs?: number;
}

export class KafkaTransport implements Transport {
  readonly topic: string;
  readonly #producer: Producer;
  readonly #compression: CompressionTypes;
  readonly #timeoutMs: number;
  #connected: Promise<void> | undefined;

  constructor(options: KafkaTransportOptions) {
    this.topic = options.topic ?? "blackbox.captures.v1";
    const kafka = new Kafka({ clientId: options.clientId ?? "agent-blackbox-node", brokers: [...options.brokers], logLevel: logLevel.NOTHING });
    this.#producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, allowAutoTopicCreation: false });
    this.#compression = options.gzip === true ? CompressionTypes.GZIP : CompressionTypes.None;
    this.#timeoutMs = options.timeoutMs ?? 30_000;
  }

  async send(messages: readonly Message[]): Promise<void> {
    if (messages.length === 0) return;
    try {
      this.#connected ??= this.#producer.connect();
      await this.#connected;
      await this.#producer.send({
        topic: this.topic,
        acks: -1,
        timeout: this.#timeoutMs,
        compression: this.#compression,
        messages: messages.map((m) => ({ key: m.key, value: m.value })),
      });
    } catch (error) {
      this.#connected = undefined;
      throw new TransportError(`Kafka send to ${this.topic} failed: ${String(error)}`);
    }
  }

  async close(): Promise<void> {
    if (this.#connected !== undefined) await this.#producer.disconnect();
  }
}

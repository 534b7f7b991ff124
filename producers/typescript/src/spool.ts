/**
 * The spool transport: Avro object container files of `{key, value, timestamp}` records that
 * `blackbox consume` / `serve` ingest on embedded defaults, written exactly as
 * `producers/transports/spool/files.py` publishes them: a hidden temp file, fsync, rename to
 * `<ms:013d>-<writer id>-<seq:08d>.avro`, fsync of the directory. A reader never sees a partial file.
 */
import { closeSync, fsyncSync, mkdirSync, openSync, renameSync, unlinkSync, writeSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import avro from "avsc";
import { BlackboxError } from "./errors.js";

export class TransportError extends BlackboxError {
  override readonly name = "TransportError";
}

/** One message: the Kafka key and value bytes. */
export interface Message {
  readonly key: Buffer;
  readonly value: Buffer;
}

/** What the recorder's worker sends through (spool and Kafka). */
export interface Transport {
  /** Deliver a batch; resolves once durable (spool: published; Kafka: acknowledged). */
  send(messages: readonly Message[]): Promise<void>;
  close(): Promise<void>;
}

const RECORD = avro.Type.forSchema({
  type: "record",
  name: "SpoolRecord",
  namespace: "blackbox.spool.v1",
  fields: [
    { name: "key", type: "bytes" },
    { name: "value", type: "bytes" },
    { name: "timestamp", type: "long" },
  ],
});
/** An Avro object container file (codec null, one block) holding `records`, by avsc's encoder. */
export function containerFile(records: readonly { key: Buffer; value: Buffer; timestamp: number }[]): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const encoder = new avro.streams.BlockEncoder(RECORD.schema(), { codec: "null", blockSize: 1 << 30 });
    const chunks: Buffer[] = [];
    encoder.on("data", (chunk: Buffer) => chunks.push(chunk));
    encoder.on("error", reject);
    encoder.on("end", () => resolve(Buffer.concat(chunks)));
    for (const record of records) encoder.write(record);
    encoder.end();
  });
}

export class SpoolTransport implements Transport {
  readonly directory: string;
  readonly writerId: string;
  #seq = 0;
  #lastMs = 0;

  constructor(directory: string) {
    this.directory = directory;
    try {
      mkdirSync(directory, { recursive: true });
    } catch (error) {
      throw new TransportError(`cannot create spool directory ${directory}: ${String(error)}`);
    }
    const host = (hostname().split(".")[0] ?? "").replaceAll("-", "_").slice(0, 16) || "host";
    // Python's recover_partials reads the pid from the writer id's second-to-last field
    this.writerId = `${host}_${process.pid}_${randomBytes(3).toString("hex")}`;
  }

  async send(messages: readonly Message[]): Promise<void> {
    if (messages.length === 0) return;
    const now = Date.now();
    const data = await containerFile(messages.map((m) => ({ key: m.key, value: m.value, timestamp: now })));
    this.#seq += 1;
    const seq = String(this.#seq).padStart(8, "0");
    const part = join(this.directory, `.tmp-${this.writerId}-${seq}.avro.part`);
    const published = Math.max(now, this.#lastMs);
    this.#lastMs = published;
    const final = join(this.directory, `${String(published).padStart(13, "0")}-${this.writerId}-${seq}.avro`);
    try {
      const fd = openSync(part, "w");
      try {
        writeSync(fd, data);
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
      renameSync(part, final);
      const dir = openSync(this.directory, "r");
      try {
        fsyncSync(dir);
      } finally {
        closeSync(dir);
      }
    } catch (error) {
      try {
        unlinkSync(part);
      } catch {
        // nothing was published; the temp file may never have existed
      }
      throw new TransportError(`cannot publish spool file ${final}: ${String(error)}`);
    }
  }

  async close(): Promise<void> {}
}

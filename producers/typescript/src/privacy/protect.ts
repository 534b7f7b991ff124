/**
 * Personal data at capture, as `producers/privacy/protect.py` (with `envelope.py` and `keys.py`):
 * the capture is redacted before it is sealed; a fresh 256-bit data key seals the original parts
 * (AES-256-GCM, random 96-bit nonce, the decision id as associated data, `base64:` + nonce |
 * ciphertext and tag); the data key is wrapped by the key-encryption key and stored as the key
 * record `datakeys/<sha256(decision id)>.json` in the blob store, so `blackbox show --reveal` opens
 * it and `blackbox erase` shreds it. `privacy` records the detectors, each redaction and the keyed
 * hashes of the originals (`hmac-sha256:` + HMAC(salt, the part's `sha256:` hash)).
 */
import { createCipheriv, createHash, createHmac, randomBytes } from "node:crypto";
import { closeSync, mkdirSync, openSync, readFileSync, writeSync, fsyncSync } from "node:fs";
import { dirname } from "node:path";
import type { BlobStore } from "../claimcheck.js";
import { ConfigurationError } from "../errors.js";
import { builtinDetectors, type Detector } from "./detectors.js";
import { redactCapture } from "./redact.js";

export const CIPHER = "AES-256-GCM";
export const DATA_KEY_PREFIX = "datakeys/";
const NONCE = 12;

/** AES-256-GCM of `plaintext` under `key`: nonce | ciphertext | 16-byte tag (Python's `AESGCM` layout). */
function aesGcm(key: Buffer, plaintext: Buffer, associated: Buffer): Buffer {
  const nonce = randomBytes(NONCE);
  const cipher = createCipheriv("aes-256-gcm", key, nonce);
  cipher.setAAD(associated);
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([nonce, body, cipher.getAuthTag()]);
}

/** Wraps data keys; a KMS would implement the same two members. */
export interface KeyEncryptionKey {
  readonly keyId: string;
  wrap(dataKey: Buffer, context: Buffer): Buffer;
}

/** The local key file Python's `LocalKeyFile` reads (BLACKBOX_KEK_FILE): 32 bytes, created 0600 on first use. */
export class LocalKeyFile implements KeyEncryptionKey {
  #key: Buffer | undefined;
  constructor(readonly path: string) {}

  get keyId(): string {
    return "local:" + createHash("sha256").update(this.#load()).digest("hex").slice(0, 16);
  }

  wrap(dataKey: Buffer, context: Buffer): Buffer {
    return aesGcm(this.#load(), dataKey, context);
  }

  #load(): Buffer {
    if (this.#key !== undefined) return this.#key;
    let key: Buffer;
    try {
      key = readFileSync(this.path);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw new ConfigurationError(`cannot read the key-encryption key ${this.path}: ${String(error)}`);
      key = createKeyFile(this.path);
    }
    if (key.length !== 32) throw new ConfigurationError(`${this.path} is not a 256-bit key (${key.length} bytes)`);
    this.#key = key;
    return key;
  }
}

function createKeyFile(path: string): Buffer {
  mkdirSync(dirname(path), { recursive: true });
  const key = randomBytes(32);
  let fd: number;
  try {
    fd = openSync(path, "wx", 0o600); // exclusive: two processes creating it at once keep the first one's key
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") return readFileSync(path);
    throw error;
  }
  try {
    writeSync(fd, key);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  return key;
}

/** Hands out a decision's data key (a Vault stores its wrapped form first). */
export interface DataKeyIssuer {
  issue(decisionId: string): Promise<Buffer>;
}

/** The key-encryption key and the blob store the key records go to (the claim-check store). */
export class Vault implements DataKeyIssuer {
  constructor(
    readonly kek: KeyEncryptionKey,
    readonly blobs: BlobStore,
  ) {}

  static recordKey(decisionId: string): string {
    return `${DATA_KEY_PREFIX}${createHash("sha256").update(decisionId, "utf8").digest("hex")}.json`;
  }

  /** A new data key for `decisionId`, its wrapped form stored before it is used. */
  async issue(decisionId: string): Promise<Buffer> {
    const dataKey = randomBytes(32);
    await this.store(decisionId, dataKey);
    return dataKey;
  }

  /** Store the wrapped form of `dataKey` as the key record of `decisionId`. */
  async store(decisionId: string, dataKey: Buffer): Promise<void> {
    const wrapped = this.kek.wrap(dataKey, Buffer.from(decisionId, "utf8"));
    // Python's DataKeyRecord.to_bytes: json.dumps(sort_keys=True, ensure_ascii=False), default separators
    const record = `{"decisionId": ${JSON.stringify(decisionId)}, "kekId": ${JSON.stringify(this.kek.keyId)}, "wrapped": ${JSON.stringify(wrapped.toString("base64"))}}`;
    await this.blobs.put(Vault.recordKey(decisionId), Buffer.from(record, "utf8"));
  }
}

export function keyedHash(salt: Buffer, partHash: string): string {
  return "hmac-sha256:" + createHmac("sha256", salt).update(partHash, "ascii").digest("hex");
}

export function sealOriginal(parts: Record<string, unknown>, options: { spans: Record<string, unknown>; salt: Buffer; dataKey: Buffer; decisionId: string }): string {
  const plaintext = Buffer.from(JSON.stringify({ salt: options.salt.toString("base64"), parts, spans: options.spans }), "utf8");
  return "base64:" + aesGcm(options.dataKey, plaintext, Buffer.from(options.decisionId, "utf8")).toString("base64");
}

export type RedactMode = "builtin" | "off";

/** The detectors and (optionally) the vault that keeps the originals sealed. */
export class Redactor {
  readonly detectors: readonly Detector[];
  constructor(options: { detectors?: readonly Detector[]; vault?: DataKeyIssuer | undefined; label?: string } = {}) {
    this.detectors = options.detectors ?? builtinDetectors();
    this.vault = options.vault;
    this.label = options.label ?? "builtin";
  }
  readonly vault: DataKeyIssuer | undefined;
  readonly label: string;

  /** `capture` (the recorder's own) redacted in place and its original sealed; `piiRedacted` says whether anything was. */
  async protect(capture: Record<string, unknown>): Promise<Record<string, unknown>> {
    if (capture["privacy"] !== null && capture["privacy"] !== undefined) return capture;
    const result = redactCapture(capture, this.detectors);
    setFlag(capture, result !== undefined);
    if (result === undefined) return capture;
    const decisionId = String(capture["decisionId"]);
    const salt = randomBytes(32);
    const privacy: Record<string, unknown> = {
      detectors: this.label,
      redactions: result.redactions.map((r) => ({ part: r.part, pointer: r.pointer, start: r.start, end: r.end, kind: r.kind, placeholder: r.placeholder })),
      originalHashes: Object.entries(result.originalHashes).map(([part, digest]) => ({ part, hash: keyedHash(salt, digest) })),
      cipher: null,
      sealedOriginal: null,
      sealedOriginalHash: null,
    };
    if (this.vault !== undefined) {
      const dataKey = await this.vault.issue(decisionId);
      privacy["cipher"] = CIPHER;
      privacy["sealedOriginal"] = sealOriginal(result.originals, { spans: result.originalSpans, salt, dataKey, decisionId });
    }
    capture["privacy"] = privacy;
    return capture;
  }
}

function setFlag(capture: Record<string, unknown>, redacted: boolean): void {
  const policy = capture["replayPolicy"];
  if (policy !== null && typeof policy === "object" && !Array.isArray(policy)) capture["replayPolicy"] = { ...policy, piiRedacted: redacted };
}

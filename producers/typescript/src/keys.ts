/**
 * ed25519 signing keys through `node:crypto`, named as the Python SDK names them:
 * key id = `"sha256:" + hex(sha256(raw 32-byte public key))`, `publicKeyRef` = `name#keyid`.
 */
import { createHash, createPrivateKey, createPublicKey, sign, type KeyObject } from "node:crypto";
import { ConfigurationError } from "./errors.js";

// PKCS#8 DER of an ed25519 private key is this prefix followed by the 32-byte seed (RFC 8410).
const PKCS8_PREFIX = Buffer.from("302e020100300506032b657004220420", "hex");

export function keyId(publicRaw: Buffer): string {
  return "sha256:" + createHash("sha256").update(publicRaw).digest("hex");
}

/** The key id a `publicKeyRef` names (after the last `#`), or undefined. */
export function keyIdFromRef(ref: unknown): string | undefined {
  if (typeof ref !== "string") return undefined;
  const candidate = ref.slice(ref.lastIndexOf("#") + 1);
  return /^sha256:[0-9a-f]{64}$/.test(candidate) ? candidate : undefined;
}

export class Signer {
  readonly publicRaw: Buffer;
  readonly keyId: string;
  readonly publicKeyRef: string;
  readonly #key: KeyObject;
  readonly #name: string | undefined;

  private constructor(key: KeyObject, name: string | undefined) {
    this.#key = key;
    this.#name = name;
    const jwk = createPublicKey(key).export({ format: "jwk" });
    this.publicRaw = Buffer.from(jwk.x ?? "", "base64url");
    this.keyId = keyId(this.publicRaw);
    this.publicKeyRef = name ? `${name}#${this.keyId}` : this.keyId;
  }

  /** A signer from a raw 32-byte ed25519 seed (the Python SDK's key files hold the same seed). */
  static fromSeed(seed: Buffer, options: { name?: string } = {}): Signer {
    if (seed.length !== 32) throw new ConfigurationError(`an ed25519 seed is 32 bytes, got ${seed.length}`);
    const key = createPrivateKey({ key: Buffer.concat([PKCS8_PREFIX, seed]), format: "der", type: "pkcs8" });
    return new Signer(key, options.name);
  }

  /** A signer from the base64 seed text `blackbox keygen` writes (BLACKBOX_SIGNING_KEY_B64). */
  static fromBase64(text: string, options: { name?: string } = {}): Signer {
    return Signer.fromSeed(Buffer.from(text.trim(), "base64"), options);
  }

  /** @internal The key and name, for the recorder's sealing threads (a KeyObject crosses `postMessage`). */
  forThread(): { key: KeyObject; name: string | undefined } {
    return { key: this.#key, name: this.#name };
  }

  /** @internal The signer a sealing thread rebuilds from `forThread()`. */
  static fromThread(value: { key: KeyObject; name: string | undefined }): Signer {
    return new Signer(value.key, value.name);
  }

  sign(data: Buffer): Buffer {
    return sign(null, data, this.#key);
  }

  toString(): string {
    return `Signer(keyId=${this.keyId})`; // never the private key
  }
}

/**
 * Claim-checked bodies in one bucket of an S3-compatible server (MinIO, AWS S3), keys at the bucket's
 * root as the Python `S3BlobStore` writes them, so ingest resolves them unchanged. The AWS SDK
 * (`@aws-sdk/client-s3`) is an optional peer dependency, loaded on first use.
 */
import type { S3Client } from "@aws-sdk/client-s3";
import type { BlobStore } from "./claimcheck.js";
import { ConfigurationError } from "./errors.js";

export interface S3BlobStoreOptions {
  /** `http://127.0.0.1:9000` (MinIO) or an AWS endpoint. */
  readonly endpoint: string;
  readonly bucket: string;
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly region?: string;
}

export class S3BlobStore implements BlobStore {
  readonly bucket: string;
  readonly #options: S3BlobStoreOptions;
  #client: Promise<{ client: S3Client; put: typeof import("@aws-sdk/client-s3").PutObjectCommand }> | undefined;

  constructor(options: S3BlobStoreOptions) {
    this.bucket = options.bucket;
    this.#options = options;
  }

  async #connect(): Promise<{ client: S3Client; put: typeof import("@aws-sdk/client-s3").PutObjectCommand }> {
    let sdk: typeof import("@aws-sdk/client-s3");
    try {
      sdk = await import("@aws-sdk/client-s3");
    } catch {
      throw new ConfigurationError("the S3 blob store needs the AWS SDK: npm install @aws-sdk/client-s3");
    }
    const { endpoint, accessKeyId, secretAccessKey, region } = this.#options;
    const client = new sdk.S3Client({ endpoint, region: region ?? "us-east-1", forcePathStyle: true, credentials: { accessKeyId, secretAccessKey } });
    return { client, put: sdk.PutObjectCommand };
  }

  async put(key: string, data: Buffer): Promise<void> {
    this.#client ??= this.#connect();
    const { client, put } = await this.#client;
    await client.send(new put({ Bucket: this.bucket, Key: key, Body: data, ContentLength: data.length }));
  }

  toString(): string {
    return `S3BlobStore(${this.#options.endpoint}, ${this.bucket})`; // never the credentials
  }
}

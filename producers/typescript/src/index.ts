/** agent-blackbox: forensic capture for AI agents on Node, sealed byte-identical to the Python SDK. */
export { BlackboxError, ConfigurationError, ContractError, SerializationError } from "./errors.js";
export { canonicalJson, canonicalText, contentHash, isHash, jsonHash, textHash, HASH_PREFIX, type Json } from "./canonical.js";
export { PART_FIELDS, contentParts, iterParts, type PartField, type PartKind } from "./parts.js";
export { MANIFEST_PAYLOAD_TYPE, manifestBytes, manifestView } from "./manifest.js";
export { CONTEXT_SET_ALGORITHM, WORKING_SET_LEAF_KEYS, merkleRoot, positionOrder, workingSetLeaves } from "./merkle.js";
export { pae } from "./dsse.js";
export { Signer, keyId, keyIdFromRef } from "./keys.js";
export { SIGNATURE_ALGORITHM, seal, type SealOptions } from "./seal.js";
export { MAGIC, encodeCapture, encodeEvent, fingerprint, header, type Kind } from "./avro.js";
export { pythonFloat, pythonJsonText, pythonNumber } from "./pyjson.js";
export { Decision, currentDecision, type AgentConfig, type ContextSpan, type DecisionOptions, type FinishOptions, type MemoryEntry } from "./decision.js";
export { Recorder, FLAG_PAYLOAD_TYPE, type RecorderOptions, type RecorderStats } from "./recorder.js";
export { SpoolTransport, TransportError, containerFile, type Message, type Transport } from "./spool.js";
export { captureLevel, isSampled, stripContent, DEFAULT_SAMPLE_ONE_IN, type CaptureLevel } from "./policy.js";
export { newDecisionId, timestamp } from "./ids.js";
export { captureFetch, type CaptureFetchOptions } from "./wire/capture-fetch.js";
export { locateSpans } from "./wire/assemble.js";

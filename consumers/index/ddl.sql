-- blackbox index schema: one DDL for both engines (chdb embedded and a ClickHouse server).
--
-- Rules the Python side relies on (consumers/index/engine.py):
--   * statements are separated by a semicolon at the end of a line; no semicolons inside statements;
--   * every statement is idempotent (IF NOT EXISTS), so ensure_schema() may run on every start; a column
--     added later must come with an `ALTER TABLE ... ADD COLUMN IF NOT EXISTS` statement appended here
--     (CREATE ... IF NOT EXISTS leaves an existing table as it is);
--   * table names are unqualified: they resolve in the index's database (USE / client database);
--   * tables that hold a "current state" are ReplacingMergeTree; every reader of `decisions` uses FINAL
--     (or the decisions_current view) so it sees the latest row version even before a merge.
--
-- Versioning of `decisions`: the ingest row has version 0; every later state change (compaction,
-- legal hold, consequential upgrade, trust change) writes a full replacement row with a strictly
-- greater version (see engine.state_version()). A redelivered capture (version 0 again) therefore can
-- never roll a compacted or held decision back. The sorting key (agent_id, captured_at, decision_id)
-- holds only values that never change for a decision, so every version of one decision shares it.
--
-- non_replicated_deduplication_window: non-replicated MergeTree deduplicates identical insert blocks
-- only when this is > 0. With it, a retried insert of the same batch (or one carrying the same
-- insert_deduplication_token) is dropped at insert time; ReplacingMergeTree + FINAL covers the rest.

CREATE TABLE IF NOT EXISTS decisions
(
    decision_id            String,
    agent_id               LowCardinality(String),
    runtime_id             LowCardinality(String),
    captured_at            DateTime64(3, 'UTC'),
    origin_user_id         String,
    origin_session_id      String,
    capture_level          LowCardinality(String),   -- full | structured-only | sampled
    fidelity               LowCardinality(String) DEFAULT 'sdk',   -- wire | sdk | semantic (capture/v2)
    content_state          LowCardinality(String),   -- full | structured-only | metadata-only
    trust                  LowCardinality(String),   -- verified | quarantined
    quarantine_reason      String,
    consequential          Bool,
    consequential_reason   String,
    failed                 Bool,                     -- the capture's own outcome says failure (flags: see trends)
    outcome_status         LowCardinality(String),   -- success | failure | unknown
    outcome_reason         String,
    stop_reason            LowCardinality(String),
    prompt_version         LowCardinality(String),
    prompt_hash            String,
    tool_schema_version    LowCardinality(String),
    tool_schema_hash       String,
    model_id               LowCardinality(String),
    model_version          LowCardinality(String),
    model_endpoint         LowCardinality(String),
    temperature            Nullable(Float64),
    top_p                  Nullable(Float64),
    max_tokens             Nullable(Int64),
    seed                   Nullable(Int64),
    total_context_tokens   Nullable(UInt64),
    working_set_entries    UInt32,
    working_set_bytes      Nullable(UInt64),         -- NULL when any entry's content is absent
    context_set_hash       String,
    rendered_context_hash  String,
    reasoning_token_count  Nullable(UInt64),
    tool_call_count        UInt32,
    tool_error_count       UInt32,
    total_latency_ms       Nullable(UInt64),
    final_output_hash      String,
    request_payload_hash   String,
    retention_class        LowCardinality(String),   -- consequential | routine | structured
    retention_days         UInt32,
    expires_at             DateTime64(3, 'UTC'),
    legal_hold             Bool,
    hold_reason            String,
    access_scope           LowCardinality(String),
    pii_redacted           Bool,
    segment_key            String,
    segment_offset         UInt64,
    segment_length         UInt64,
    capture_bytes          UInt64,                   -- length of the encoded (Avro) capture
    content_sha256         String,                   -- sha256 of the encoded capture: same id + other bytes = conflict
    manifest_json          String CODEC(ZSTD(3)),    -- JSON form without content parts, signature kept
    key_id                 LowCardinality(String),
    source                 String,                   -- topic/partition/offset, or spool file/index
    ingested_at            DateTime64(3, 'UTC'),
    version                UInt64,
    INDEX idx_decision_id decision_id TYPE bloom_filter GRANULARITY 4
)
ENGINE = ReplacingMergeTree(version)
PARTITION BY toYYYYMM(captured_at)
ORDER BY (agent_id, captured_at, decision_id)
-- Garbage collection, not the retention policy: the retention job expires decisions explicitly (segment
-- delete + `deletions` log) and clears segment_key when the bytes are gone. The TTL only drops rows that
-- no longer point at stored bytes (segment_key = ''), are not on hold, and passed expires_at a week ago,
-- so it can never orphan a segment or lose a decision the job has not logged.
TTL toDateTime(expires_at) + INTERVAL 7 DAY DELETE WHERE NOT legal_hold AND segment_key = ''
SETTINGS non_replicated_deduplication_window = 1000;

CREATE TABLE IF NOT EXISTS tool_calls
(
    decision_id    String,
    agent_id       LowCardinality(String),
    captured_at    DateTime64(3, 'UTC'),
    sequence       UInt32,
    tool_name      LowCardinality(String),
    input_hash     String,
    output_hash    String,
    latency_ms     Nullable(UInt64),
    error_ref      String,
    is_error       Bool
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(captured_at)
ORDER BY (agent_id, captured_at, decision_id, sequence)
SETTINGS non_replicated_deduplication_window = 1000;

CREATE TABLE IF NOT EXISTS memory_entries
(
    decision_id        String,
    agent_id           LowCardinality(String),
    captured_at        DateTime64(3, 'UTC'),
    context_position   UInt32,
    entry_id           String,
    tier               LowCardinality(String),
    writer_id          LowCardinality(String),
    written_at         Nullable(DateTime64(3, 'UTC')),
    source_type        LowCardinality(String),
    retrieval_score    Nullable(Float64),
    retrieval_method   LowCardinality(String),
    embedding_model    LowCardinality(String),
    embedding_version  LowCardinality(String),
    content_hash       String,
    content_bytes      Nullable(UInt64)
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(captured_at)
ORDER BY (agent_id, captured_at, decision_id, context_position, entry_id)
SETTINGS non_replicated_deduplication_window = 1000;

-- Flag events (flag_consequential / failure signals). They may arrive before or after their capture,
-- so they are never folded into `decisions` at write time; readers join them (see decisions_current).
CREATE TABLE IF NOT EXISTS flags
(
    decision_id   String,
    agent_id      LowCardinality(String),
    reason        String,
    failure       Bool,
    flagged_at    DateTime64(3, 'UTC'),
    received_at   DateTime64(3, 'UTC') DEFAULT now64(3, 'UTC')
)
ENGINE = ReplacingMergeTree
ORDER BY (decision_id, flagged_at, reason, failure)
SETTINGS non_replicated_deduplication_window = 1000;

-- Audit log of every read of capture content. Append-only: event_id makes two identical accesses two rows.
CREATE TABLE IF NOT EXISTS access_log
(
    event_id     String DEFAULT toString(generateUUIDv4()),
    at           DateTime64(3, 'UTC'),
    caller       LowCardinality(String),
    scope        LowCardinality(String),
    decision_id  String,
    agent_id     LowCardinality(String),
    action       LowCardinality(String),
    reason       String,
    outcome      LowCardinality(String),   -- allowed | denied
    detail       String
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(at)
ORDER BY (at, caller, event_id);

CREATE TABLE IF NOT EXISTS replay_runs
(
    run_id                String,
    at                    DateTime64(3, 'UTC'),
    decision_id           String,
    agent_id              LowCardinality(String),
    kind                  LowCardinality(String),   -- replay | variation | bisect | regress
    variable              LowCardinality(String),
    variation_value       String,
    attempt               UInt32 DEFAULT 0,
    model_used            LowCardinality(String),
    substitute_model      LowCardinality(String),
    final_output_equal    Bool,
    tool_sequence_equal   Bool,
    first_divergent_step  Nullable(Int32),
    stop_reason           LowCardinality(String),
    verdict               LowCardinality(String),
    outcome_changed       Bool,
    detail                String
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(at)
ORDER BY (run_id, decision_id, kind, variable, variation_value, attempt)
SETTINGS non_replicated_deduplication_window = 1000;

-- Captures that failed verification or conflict with an already indexed decision (same id, other bytes).
CREATE TABLE IF NOT EXISTS quarantine
(
    decision_id     String,
    agent_id        LowCardinality(String),
    reason          String,
    part            String,
    source          String,
    segment_key     String,
    segment_offset  UInt64,
    segment_length  UInt64,
    received_at     DateTime64(3, 'UTC'),
    content_sha256  String
)
ENGINE = ReplacingMergeTree
ORDER BY (decision_id, content_sha256, reason)
SETTINGS non_replicated_deduplication_window = 1000;

-- Retention log: every compaction, expiry and segment delete, with the policy that caused it.
CREATE TABLE IF NOT EXISTS deletions
(
    at           DateTime64(3, 'UTC'),
    decision_id  String,
    segment_key  String,
    action       LowCardinality(String),   -- compact | expire | delete-segment | promote
    reason       String,
    policy       String
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(at)
ORDER BY (segment_key, decision_id, action)
SETTINGS non_replicated_deduplication_window = 1000;

-- Pacts (consumers/pacts): one row per decision and rule that did not hold at ingest, a violation or an
-- evaluation error. A violation also writes a failure flag (reason 'pact violated: RULE') into `flags`,
-- so failed_any and retention see it; this table says which rule, for the pact_violations trend.
CREATE TABLE IF NOT EXISTS pact_violations
(
    decision_id   String,
    agent_id      LowCardinality(String),
    captured_at   DateTime64(3, 'UTC'),
    rule          LowCardinality(String),
    kind          LowCardinality(String),   -- violation | error
    detail        String,
    evaluated_at  DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMM(captured_at)
ORDER BY (rule, captured_at, decision_id, kind)
SETTINGS non_replicated_deduplication_window = 1000;

-- Findings (consumers/findings): what an investigation concluded, as a CEL rule, and the decisions
-- pinned as its suite (regress --suite replays them). A finding is added once; re-adding a name is refused.
CREATE TABLE IF NOT EXISTS findings
(
    name         String,
    rule         String,
    description  String,
    created_at   DateTime64(3, 'UTC'),
    created_by   String,
    from_replay  String
)
ENGINE = ReplacingMergeTree
ORDER BY name
SETTINGS non_replicated_deduplication_window = 1000;

CREATE TABLE IF NOT EXISTS finding_decisions
(
    name         String,
    decision_id  String,
    agent_id     LowCardinality(String),
    captured_at  DateTime64(3, 'UTC'),
    source       LowCardinality(String)    -- decision | replay
)
ENGINE = ReplacingMergeTree
ORDER BY (name, decision_id)
SETTINGS non_replicated_deduplication_window = 1000;

-- Transparency log (consumers/tlog): which leaf of the log holds which decision, and the leaf's bytes.
-- Written by ingest after the log's tiles (so a row implies its leaf is in the tiles), before the commit;
-- a decision already here is never appended again (redelivery). Never compacted or expired.
CREATE TABLE IF NOT EXISTS tlog_leaves
(
    leaf_index    UInt64,
    decision_id   String,
    captured_at   DateTime64(3, 'UTC'),
    leaf          String,                   -- the leaf bytes (producers/evidence/tlog.py)
    appended_at   DateTime64(3, 'UTC'),
    INDEX idx_tlog_decision decision_id TYPE bloom_filter GRANULARITY 4
)
ENGINE = ReplacingMergeTree
ORDER BY leaf_index
SETTINGS non_replicated_deduplication_window = 1000;

-- Columns added after the first release (an index created before them gains them here, same position).
ALTER TABLE decisions ADD COLUMN IF NOT EXISTS fidelity LowCardinality(String) DEFAULT 'sdk' AFTER capture_level;

-- The latest version of every decision, with failure = own outcome OR any failure flag (whenever it came).
CREATE VIEW IF NOT EXISTS decisions_current AS
SELECT
    *,
    failed OR decision_id IN (SELECT decision_id FROM flags WHERE failure) AS failed_any
FROM decisions FINAL;

-- Every stored version of every decision (no FINAL), with the same columns: the decision list reads it
-- first to find how far back its page reaches, then merges only that window (consumers/index/listing.py).
CREATE VIEW IF NOT EXISTS decisions_versions AS
SELECT
    *,
    failed OR decision_id IN (SELECT decision_id FROM flags WHERE failure) AS failed_any
FROM decisions;

-- Replay runs: the finding whose suite a regress run replayed, and a probe row's point in its sweep (JSON).
ALTER TABLE replay_runs ADD COLUMN IF NOT EXISTS suite LowCardinality(String) DEFAULT '' AFTER detail;
ALTER TABLE replay_runs ADD COLUMN IF NOT EXISTS probe_point String DEFAULT '' AFTER suite;

-- The access log's hash chain and the grant behind each read (consumers/access/chain.py, DESIGN decision 14).
ALTER TABLE access_log ADD COLUMN IF NOT EXISTS grant_id String DEFAULT '' AFTER detail;
ALTER TABLE access_log ADD COLUMN IF NOT EXISTS authority String DEFAULT '' AFTER grant_id;
ALTER TABLE access_log ADD COLUMN IF NOT EXISTS purpose String DEFAULT '' AFTER authority;
ALTER TABLE access_log ADD COLUMN IF NOT EXISTS seq UInt64 DEFAULT 0 AFTER purpose;
ALTER TABLE access_log ADD COLUMN IF NOT EXISTS prev_hash String DEFAULT '' AFTER seq;
ALTER TABLE access_log ADD COLUMN IF NOT EXISTS row_hash String DEFAULT '' AFTER prev_hash;

-- The version id of every segment ingest and compaction wrote on a versioned store (S3 Object Lock):
-- reads ask for exactly that version and name whatever lies over it (a delete marker, a newer version)
-- as tampering (consumers/storage/versions.py). A key written again (a redelivered batch) keeps its latest.
CREATE TABLE IF NOT EXISTS blob_versions
(
    blob_key     String,
    version_id   String,
    written_at   DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree(written_at)
ORDER BY blob_key;

-- Pact versions (consumers/pacts/versions.py, DESIGN decision 26): mirrors of the signed versions and
-- of every apply, which live in the blob store (pacts/); the record and the trends read these.
CREATE TABLE IF NOT EXISTS pact_versions
(
    version       String,
    content_hash  String,
    parent        String,
    author        String,
    reason        String,
    agents        String,                   -- comma-separated agent id globs
    key_id        String,
    created_at    DateTime64(3, 'UTC')
)
ENGINE = ReplacingMergeTree
ORDER BY version;

CREATE TABLE IF NOT EXISTS pact_applications
(
    version       String,
    applied_at    DateTime64(3, 'UTC'),
    applied_by    String,
    reason        String,
    forced        Bool,
    gate          String
)
ENGINE = ReplacingMergeTree
ORDER BY (applied_at, version);

-- The pact version that judged each pact_violations row ('' : the local pacts file, before versions).
ALTER TABLE pact_violations ADD COLUMN IF NOT EXISTS pact_version String DEFAULT '' AFTER detail;

"""The services' settings: the runtime's (:class:`producers.settings.BlackboxSettings`) plus what only
the services read — the index, the trust store, retention, access, replay's model endpoints and the
crash-test hook.

Same ``BLACKBOX_<NAME>`` environment variables (or ``.env``), same embedded defaults (chdb at
``<data_dir>/index`` instead of a ClickHouse server). Read when :func:`load_service_settings` is
called, never at import time; no module reads a ``BLACKBOX_*`` variable past this model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationInfo, field_validator

from producers.settings import BlackboxSettings, read_settings


class TlogWitness(BaseModel):
    """A witness the log submits its checkpoints to (C2SP tlog-witness; DESIGN 24)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(description="The witness's name: the key name in its cosignature lines.")
    url: str = Field(pattern=r"^https?://", description="Base URL; checkpoints go to <url>/add-checkpoint.")
    vkey: str = Field(description="The witness's cosignature verifier key (name+key id+base64).")

    @field_validator("vkey")
    @classmethod
    def _a_witness_key_named_like_the_witness(cls, value: str, info: ValidationInfo) -> str:
        from producers.evidence.cosignature import witness_key
        from schemas.errors import ProofInvalid

        try:
            key = witness_key(value)
        except ProofInvalid as exc:
            raise ValueError(str(exc).removeprefix("witness: ")) from exc
        if key.name != info.data.get("name"):
            raise ValueError(f"the vkey is for {key.name!r}, the witness is named {info.data.get('name')!r}")
        return value


class ServiceSettings(BlackboxSettings):
    """Every knob of the services in one frozen model; secrets are masked when dumped."""

    # index
    clickhouse_url: str | None = Field(
        None, description="ClickHouse server (http://user:pass@host:8123/db); unset means embedded chdb."
    )
    query_clickhouse_url: str | None = Field(
        None, description="The read-only user `blackbox query` runs as on a ClickHouse server (README)."
    )
    chdb_path: Path | None = Field(None, description="chdb data directory; default <data_dir>/index.")

    # evidence
    trust_store: Path | None = Field(None, description="Trust store TOML; default <data_dir>/trust.toml.")

    # retention
    retention_policy: Path | None = Field(
        None, description="Retention policy TOML; default: the packaged policy (article defaults)."
    )

    # immutability where the store offers it: S3 Object Lock on consequential segments and log tiles
    s3_object_lock: Literal["off", "governance", "compliance"] = Field(
        "off",
        description="S3 Object Lock mode for consequential segments and log tiles (bucket created with locking).",
    )
    s3_object_lock_log_days: int = Field(
        3650, ge=1, description="Days each log tile and checkpoint is retained under the lock."
    )

    # pacts: behavioural commitments evaluated on every decision at ingest (consumers.pacts)
    pacts: Path | None = Field(
        None, description="Pact file (TOML, CEL rules); default <data_dir>/pacts.toml."
    )

    # transparency log (consumers.tlog): one leaf per accepted capture, signed checkpoints, trusted time
    tlog: bool = Field(True, description="Append every accepted capture to the transparency log at ingest.")
    tlog_origin: str = Field(
        "blackbox.local/log",
        description="The log's checkpoint origin line and note key name (no spaces, no '+').",
    )
    tlog_key: Path | None = Field(
        None,
        description="The log's ed25519 private key file; default <data_dir>/tlog.key, created on first use.",
    )
    tlog_prefix: str | None = Field(
        None, description="Blob-store prefix of the log's tiles and checkpoints; default tlog/<topic>."
    )
    tlog_checkpoint_interval: float = Field(
        10.0,
        gt=0,
        description="Seconds between signed checkpoints while ingest appends (and one at the end).",
    )
    retention_lease: float = Field(
        60.0,
        gt=0,
        description=(
            "Seconds a compaction, hold, release or erasure holds the retention lease in the blob store "
            "(one retention writer at a time across hosts; renewed at each step)."
        ),
    )
    retention_lease_wait: float = Field(
        0.0,
        ge=0,
        description="Seconds a retention command waits for another's lease before exiting with a message.",
    )
    tlog_lease: float = Field(
        30.0,
        gt=0,
        description=(
            "Seconds an ingest process holds the log's writer lease (DESIGN 23): how long the others wait "
            "before taking over from a holder that died or stopped."
        ),
    )
    tlog_tsa_url: str | None = Field(
        None, description="RFC 3161 time-stamping authority each checkpoint is stamped by; unset: none."
    )
    tlog_tsa_roots: Path | None = Field(
        None, description="PEM certificates `blackbox log verify` checks the TSA's timestamps against."
    )
    tlog_witnesses: list[TlogWitness] = Field(
        default_factory=list,
        description='Witnesses cosigning each checkpoint, JSON: [{"name", "url", "vkey"}, ...]; unset: none.',
    )
    tlog_public_url: str | None = Field(
        None, description="Where outsiders read the log's tiles and checkpoints (for `log witness-config`)."
    )
    tlog_time_skew: float = Field(
        300.0,
        ge=0,
        description="Seconds a capturedAt may be later than the first checkpoint that includes it.",
    )

    # access
    caller: str = Field("local-operator", description="Who is reading, recorded in the access log.")
    scope: Literal["operator", "regulator", "counterparty"] = "operator"

    # the audit endpoint (`blackbox serve`, consumers.audit); identity comes from tokens or OIDC only
    audit_max_body_bytes: int = Field(65_536, ge=1024, description="Largest request body the endpoint reads.")
    audit_rate: float = Field(10.0, gt=0, description="Requests per second per token (token bucket refill).")
    audit_burst: int = Field(20, ge=1, description="Requests a token may make at once (token bucket size).")
    oidc_issuer: str | None = Field(
        None, description="OIDC issuer whose JWTs the endpoint accepts; unset: tokens only."
    )
    oidc_audience: str | None = Field(None, description="The audience those JWTs must carry.")
    oidc_jwks_url: str | None = Field(
        None, description="The issuer's JWKS URL (https://; http:// only on loopback, for tests)."
    )
    oidc_scope_claim: str = Field(
        "blackbox_scope", description="The JWT claim holding the scope (operator, regulator or counterparty)."
    )
    # the console's sign-in at that issuer: authorization code with PKCE (consumers.console.oidc)
    oidc_client_id: str | None = Field(
        None,
        description="The console's client id at BLACKBOX_OIDC_ISSUER: its sign-in page offers the issuer; "
        "ID tokens must carry it in aud.",
    )
    oidc_client_secret: SecretStr | None = Field(
        None,
        description="The console's client secret (HTTP Basic at the token endpoint); unset: a public client.",
    )
    oidc_redirect_url: str | None = Field(
        None,
        description="The console's callback as registered at the issuer (https://HOST/console/signin/oidc/callback); "
        "unset: built from the request.",
    )
    oidc_scopes: str = Field(
        "openid", description="OAuth scopes the console asks for (openid is always asked)."
    )

    # `blackbox serve`: which surfaces of the one HTTP application run, and where (flags override)
    serve_listen: str = Field("127.0.0.1:8700", description="Where `blackbox serve` listens (HOST:PORT).")
    serve_audit: bool = Field(True, description="Serve the audit API (/v1/decisions, /v1/access-requests).")
    serve_otlp: Literal["auto", "on", "off"] = Field(
        "auto", description="Serve POST /v1/traces; auto: when a signing key is configured."
    )
    serve_otlp_listen: str | None = Field(
        None, description="A separate HOST:PORT for POST /v1/traces; unset: on serve_listen."
    )
    serve_ingest: Literal["auto", "on", "off"] = Field(
        "auto",
        description="Run ingest in the serve process; auto: on embedded defaults (spool transport and chdb).",
    )

    # replay's model endpoints: only these are dialled, never the endpoint a capture names on its own
    model_endpoint: str | None = Field(None, description="OpenAI-compatible base URL replay sends to.")
    model_api_key: SecretStr | None = Field(None, description="Bearer key, sent only to model_endpoint.")
    model_endpoints: Path | None = Field(
        None, description="Allow-list of endpoints and their keys; default <data_dir>/model_endpoints.toml."
    )
    model_allow_insecure_http: bool = Field(
        False, description="Allow sending a key over plain http:// to a host that is not loopback."
    )

    # personal data in the index (consumers.privacy.ids): identifiers stored as keyed hashes
    index_id_key_file: Path | None = Field(
        None,
        description="HMAC key for origin ids in index rows; default <data_dir>/index_id.key (created 0600).",
    )
    index_raw_ids: bool = Field(
        False, description="Store origin_user_id / origin_session_id raw in the index instead of hashed."
    )

    # crash tests only: the ingest loop kills its own process at this named point (consumers.ingest.loop)
    fault: str | None = Field(None, description="Test-only crash point for the ingest loop; never set it.")

    @property
    def resolved_chdb_path(self) -> Path:
        return self.chdb_path or self.data_dir / "index"

    @property
    def resolved_trust_store(self) -> Path:
        return self.trust_store or self.data_dir / "trust.toml"

    @property
    def resolved_index_id_key_file(self) -> Path:
        return self.index_id_key_file or self.data_dir / "index_id.key"

    @property
    def resolved_pacts(self) -> Path:
        return self.pacts or self.data_dir / "pacts.toml"

    @property
    def resolved_model_endpoints(self) -> Path:
        return self.model_endpoints or self.data_dir / "model_endpoints.toml"

    @field_validator("tlog_prefix")
    @classmethod
    def _log_outside_swept_prefixes(cls, value: str | None) -> str | None:
        if value is not None and value.strip("/").split("/")[0] in ("segments", "claims", ""):
            raise ValueError(
                "the log's prefix may not be empty or under segments/ or claims/ (retention sweeps them)"
            )
        return value

    @property
    def resolved_tlog_key(self) -> Path:
        return self.tlog_key or self.data_dir / "tlog.key"

    @property
    def resolved_tlog_prefix(self) -> str:
        return (self.tlog_prefix or f"tlog/{self.topic}").strip("/")

    @property
    def index_engine(self) -> Literal["chdb", "clickhouse"]:
        return "clickhouse" if self.clickhouse_url else "chdb"


def load_service_settings(**overrides: object) -> ServiceSettings:
    """The services' settings, read from the environment now; keyword overrides win (CLI flags, tests).

    A bad value raises :class:`~schemas.errors.SettingsInvalid` naming the setting, never a traceback.
    """
    return read_settings(ServiceSettings, **overrides)

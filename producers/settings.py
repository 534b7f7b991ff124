"""Configuration shared by the SDK, the services and the CLI.

Every setting comes from an environment variable ``BLACKBOX_<NAME>`` (or a ``.env`` file) and
has an embedded default, so a newcomer runs everything with no services: the local spool
instead of Kafka, a local directory instead of S3, chdb instead of a ClickHouse server.
Settings are read when :func:`load_settings` is called, never at import time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, get_args, get_origin

from pydantic import Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from schemas.errors import SettingsInvalid


class BlackboxSettings(BaseSettings):
    """All knobs in one frozen model; secrets are masked when dumped."""

    model_config = SettingsConfigDict(env_prefix="BLACKBOX_", env_file=".env", extra="ignore", frozen=True)

    data_dir: Path = Field(Path(".blackbox"), description="Root of all embedded state.")

    # transport
    transport: Literal["spool", "kafka"] = "spool"
    spool_dir: Path | None = Field(None, description="Local spool directory; default <data_dir>/spool.")
    kafka_bootstrap: str = "127.0.0.1:9092"
    topic: str = "blackbox.captures.v1"
    dlq_topic: str = "blackbox.captures.v1.dlq"
    consumer_group: str = "blackbox-ingest"
    max_message_bytes: int = Field(
        900_000, description="Encoded captures above this go by claim check (below the broker's limit)."
    )

    capture_sample_one_in: int = Field(
        100,
        ge=0,
        description="Routine decisions captured in full: one in N, chosen from the decision id (0: none).",
    )

    # blob store
    blob: Literal["local", "s3"] = "local"
    blob_dir: Path | None = Field(None, description="Local blob directory; default <data_dir>/blobs.")
    s3_endpoint: str = "127.0.0.1:9000"
    s3_access_key: str = "blackbox"
    s3_secret_key: SecretStr = SecretStr("blackbox-secret")
    s3_bucket: str = "blackbox"
    s3_secure: bool = False

    # index
    clickhouse_url: str | None = Field(
        None, description="ClickHouse server (http://user:pass@host:8123/db); unset means embedded chdb."
    )
    query_clickhouse_url: str | None = Field(
        None, description="The read-only user `blackbox query` runs as on a ClickHouse server (README)."
    )
    chdb_path: Path | None = Field(None, description="chdb data directory; default <data_dir>/index.")

    # evidence
    signing_key: Path | None = Field(None, description="ed25519 private key file (PEM) used to sign.")
    signing_key_b64: SecretStr | None = Field(
        None, description="The raw 32-byte ed25519 seed, base64, instead of a file."
    )
    trust_store: Path | None = Field(None, description="Trust store TOML; default <data_dir>/trust.toml.")

    # retention
    retention_policy: Path | None = Field(
        None, description="Retention policy TOML; default: the packaged policy (article defaults)."
    )

    # access
    caller: str = Field("local-operator", description="Who is reading, recorded in the access log.")
    scope: Literal["operator", "regulator", "counterparty"] = "operator"

    # replay's model endpoints: only these are dialled, never the endpoint a capture names on its own
    model_endpoint: str | None = Field(None, description="OpenAI-compatible base URL replay sends to.")
    model_api_key: SecretStr | None = Field(None, description="Bearer key, sent only to model_endpoint.")
    model_endpoints: Path | None = Field(
        None, description="Allow-list of endpoints and their keys; default <data_dir>/model_endpoints.toml."
    )
    model_allow_insecure_http: bool = Field(
        False, description="Allow sending a key over plain http:// to a host that is not loopback."
    )

    @property
    def resolved_spool_dir(self) -> Path:
        return self.spool_dir or self.data_dir / "spool"

    @property
    def resolved_blob_dir(self) -> Path:
        return self.blob_dir or self.data_dir / "blobs"

    @property
    def resolved_chdb_path(self) -> Path:
        return self.chdb_path or self.data_dir / "index"

    @property
    def resolved_trust_store(self) -> Path:
        return self.trust_store or self.data_dir / "trust.toml"

    @property
    def resolved_model_endpoints(self) -> Path:
        return self.model_endpoints or self.data_dir / "model_endpoints.toml"

    @property
    def index_engine(self) -> Literal["chdb", "clickhouse"]:
        return "clickhouse" if self.clickhouse_url else "chdb"


def load_settings(**overrides: object) -> BlackboxSettings:
    """Read settings from the environment now; keyword overrides win (used by CLI flags and tests).

    A bad value raises :class:`SettingsInvalid` naming each setting as the user wrote it
    (``BLACKBOX_SCOPE``), the value given and what is allowed, never a pydantic traceback.
    """
    try:
        return BlackboxSettings(**{k: v for k, v in overrides.items() if v is not None})  # type: ignore[arg-type]
    except ValidationError as exc:
        raise SettingsInvalid(describe_invalid_settings(exc)) from exc


def describe_invalid_settings(exc: ValidationError) -> str:
    """One line per bad setting: ``BLACKBOX_SCOPE='admin' is not allowed: expected 'operator', ...``."""
    lines = []
    for error in exc.errors(include_url=False):
        field = ".".join(str(part) for part in error["loc"]) or "?"
        name = f"BLACKBOX_{field.upper()}"
        given = error.get("input")
        allowed = _ALLOWED.get(field) or error["msg"]
        lines.append(f"{name}={given!r} is not allowed: {allowed}")
    return "invalid settings: " + "; ".join(lines)


def _allowed_values(field: str) -> str | None:
    """``one of 'a', 'b'`` for a Literal-typed setting, else None (pydantic's message is used)."""
    annotation = BlackboxSettings.model_fields[field].annotation
    values = get_args(annotation) if get_origin(annotation) is Literal else ()
    return "one of " + ", ".join(repr(v) for v in values) if values else None


_ALLOWED: dict[str, str] = {
    name: allowed for name in BlackboxSettings.model_fields if (allowed := _allowed_values(name))
}

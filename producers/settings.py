"""What an agent runtime needs to produce and seal a capture: the transport, the claim-check blob
store, the capture policy's sampling and the signing key.

Every setting comes from an environment variable ``BLACKBOX_<NAME>`` (or a ``.env`` file) and
has an embedded default, so a newcomer runs everything with no services: the local spool
instead of Kafka, a local directory instead of S3. The services add their own settings (index,
trust store, retention, access, replay) in :mod:`consumers.app.settings`, over this model.
Settings are read when :func:`load_settings` is called, never at import time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, TypeVar, get_args, get_origin

from pydantic import Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from schemas.errors import SettingsInvalid


class NativeSettings(BaseSettings):
    """Whether the native evidence core is used (:mod:`producers.native`): read on its own, at first
    use, so an unrelated bad setting never decides how captures are hashed."""

    model_config = SettingsConfigDict(env_prefix="BLACKBOX_", env_file=".env", extra="ignore", frozen=True)

    native: Literal["auto", "off", "require"] = Field(
        "auto",
        description="Native evidence core: auto (used when it loads, else a warning and the Python "
        "reference), off, or require (refuse to run without it).",
    )


class BlackboxSettings(NativeSettings):
    """The runtime's knobs in one frozen model; secrets are masked when dumped."""

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
    # the flight recorder (producers/flight.py): recent routine content, held for a late flag
    flight_window_seconds: float = Field(
        900.0, ge=0, description="How long a routine decision's content is held for a late flag (0: off)."
    )
    flight_max_bytes: int = Field(
        64 * 1024 * 1024, ge=0, description="Byte cap of the held content, oldest evicted first (0: off)."
    )
    flight_spill_dir: Path | None = Field(
        None, description="Hold the content in files here instead of memory (unencrypted, at rest)."
    )
    # the agent's pact (producers/pacts/source.py): its consequential_when rules choose full capture
    pact: str | None = Field(
        None, description="File path or http(s) URL of the signed pact version this agent is judged by."
    )
    pact_trust: Path | None = Field(
        None, description="The operator's pact key(s): a trust store file (.toml) or a public key file."
    )
    pact_refresh: float = Field(60.0, gt=0, description="Seconds between two reads of the pact version.")

    # blob store
    blob: Literal["local", "s3"] = "local"
    blob_dir: Path | None = Field(None, description="Local blob directory; default <data_dir>/blobs.")
    s3_endpoint: str = "127.0.0.1:9000"
    s3_access_key: str = "blackbox"
    s3_secret_key: SecretStr = SecretStr("blackbox-secret")
    s3_bucket: str = "blackbox"
    s3_secure: bool = False

    # evidence
    signing_key: Path | None = Field(None, description="ed25519 private key file (PEM) used to sign.")
    signing_key_b64: SecretStr | None = Field(
        None, description="The raw 32-byte ed25519 seed, base64, instead of a file."
    )

    # personal data (producers/privacy): redacted at capture, the original sealed under a data key
    redact: Literal["builtin", "off", "presidio"] = Field(
        "builtin", description="Redact personal data at capture: built-in detectors, off, or also Presidio."
    )
    kek_file: Path | None = Field(
        None,
        description="Key-encryption key wrapping the data keys; default <data_dir>/kek.key (created 0600).",
    )

    @property
    def resolved_kek_file(self) -> Path:
        return self.kek_file or self.data_dir / "kek.key"

    @property
    def resolved_spool_dir(self) -> Path:
        return self.spool_dir or self.data_dir / "spool"

    @property
    def resolved_blob_dir(self) -> Path:
        return self.blob_dir or self.data_dir / "blobs"


SettingsT = TypeVar("SettingsT", bound=BaseSettings)


def load_settings(**overrides: object) -> BlackboxSettings:
    """The runtime's settings, read from the environment now; keyword overrides win (CLI flags, tests)."""
    return read_settings(BlackboxSettings, **overrides)


def read_settings(model: type[SettingsT], /, **overrides: object) -> SettingsT:
    """``model`` read from the environment now; keyword overrides win, ``None`` meaning "not given".

    A bad value raises :class:`SettingsInvalid` naming each setting as the user wrote it
    (``BLACKBOX_SCOPE``), the value given and what is allowed, never a pydantic traceback. An
    override that names no field of ``model`` is a programming error (``TypeError``), never dropped.
    """
    unknown = sorted(set(overrides) - set(model.model_fields))
    if unknown:
        raise TypeError(f"{model.__name__} has no setting {', '.join(unknown)}")
    given: dict[str, Any] = {k: v for k, v in overrides.items() if v is not None}
    try:
        return model(**given)
    except ValidationError as exc:
        raise SettingsInvalid(describe_invalid_settings(exc, model)) from exc


def describe_invalid_settings(exc: ValidationError, model: type[BaseSettings] = BlackboxSettings) -> str:
    """One line per bad setting: ``BLACKBOX_SCOPE='admin' is not allowed: expected 'operator', ...``."""
    lines = []
    for error in exc.errors(include_url=False):
        field = ".".join(str(part) for part in error["loc"]) or "?"
        name = f"BLACKBOX_{field.upper()}"
        given = error.get("input")
        allowed = _allowed_values(model, field) or error["msg"]
        lines.append(f"{name}={given!r} is not allowed: {allowed}")
    return "invalid settings: " + "; ".join(lines)


def _allowed_values(model: type[BaseSettings], field: str) -> str | None:
    """``one of 'a', 'b'`` for a Literal-typed setting, else None (pydantic's message is used)."""
    info = model.model_fields.get(field)
    annotation = info.annotation if info is not None else None
    values = get_args(annotation) if get_origin(annotation) is Literal else ()
    return "one of " + ", ".join(repr(v) for v in values) if values else None

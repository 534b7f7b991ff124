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

from pydantic import Field, SecretStr

from producers.settings import BlackboxSettings, read_settings


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

    # crash tests only: the ingest loop kills its own process at this named point (consumers.ingest.loop)
    fault: str | None = Field(None, description="Test-only crash point for the ingest loop; never set it.")

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


def load_service_settings(**overrides: object) -> ServiceSettings:
    """The services' settings, read from the environment now; keyword overrides win (CLI flags, tests).

    A bad value raises :class:`~schemas.errors.SettingsInvalid` naming the setting, never a traceback.
    """
    return read_settings(ServiceSettings, **overrides)

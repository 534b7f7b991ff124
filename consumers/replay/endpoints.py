"""Which model endpoint replay may dial, and with which key: only what the operator configured.

A capture's ``modelProviderEndpoint`` is written by the producer, so it is data, never a
destination on its own: a capture must not be able to make replay send the operator's key and the
rendered context to a listener of its choosing. For each request, replay dials:

1. the operator endpoint, ``--model-endpoint`` or else the setting ``BLACKBOX_MODEL_ENDPOINT``; the
   captured endpoint is then only shown;
2. else the allow-list entry whose URL equals the captured endpoint (exact match after
   :func:`normalize_url`), with that entry's own key;
3. else nothing: :class:`EndpointNotAllowed` shows the captured endpoint and how to allow it.

A key is bound to the endpoint it was configured for. ``--model-api-key`` goes to the operator
endpoint; an allow-list entry's key (read from the environment variable it names) goes to that
entry's URL; ``BLACKBOX_MODEL_API_KEY`` goes to ``BLACKBOX_MODEL_ENDPOINT``, or, when that is
unset, to the ``--model-endpoint`` given. A key is never sent over plain ``http://`` to a host that
is not loopback unless the operator allows it (``--allow-insecure-http``,
``BLACKBOX_MODEL_ALLOW_INSECURE_HTTP=true``, or ``allow_insecure_http = true`` on the entry).

The allow-list, ``BLACKBOX_MODEL_ENDPOINTS`` (default ``<data_dir>/model_endpoints.toml``)::

    [[endpoint]]
    name = "vllm-eu"
    url = "https://vllm.eu.internal/v1"
    api_key_env = "VLLM_EU_KEY"     # optional: the environment variable holding its key
    allow_insecure_http = false     # optional
"""

from __future__ import annotations

import ipaddress
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import httpx
from pydantic import BaseModel, ConfigDict, SecretStr, ValidationError

from schemas.errors import ContractError, ModelClientError

_DEFAULT_PORTS = {"http": 80, "https": 443}


class EndpointNotAllowed(ModelClientError):
    """No operator-configured endpoint applies to this request, so nothing is dialled."""


class InsecureEndpoint(EndpointNotAllowed):
    """A key would travel over plain http:// to a host that is not loopback."""


@dataclass(frozen=True, slots=True)
class ModelEndpoint:
    """An endpoint the operator configured, with the key configured for it (if any).

    ``missing_key_env`` names the environment variable an allow-list entry takes its key from
    when that variable is unset: the entry is then refused rather than dialled without its key.
    """

    url: str
    source: str
    api_key: SecretStr | None = None
    key_source: str | None = None
    allow_insecure_http: bool = False
    missing_key_env: str | None = None

    def describe(self) -> str:
        key = f"key from {self.key_source}" if self.api_key is not None else "no key"
        return f"{self.url} ({self.source}; {key})"


def normalize_url(url: str) -> str:
    """``scheme://host[:port]/path`` with scheme and host lowercased, the default port and trailing
    slashes dropped; anything else (credentials, query, fragment, another scheme) is refused, so
    two spellings of one endpoint compare equal and nothing else does."""
    try:
        parsed = httpx.URL(url.strip())
    except (httpx.InvalidURL, TypeError) as exc:
        raise ContractError(f"not a URL: {url!r} ({exc})", path="model endpoint") from exc
    scheme = parsed.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise ContractError(f"{url!r} is not an http:// or https:// URL", path="model endpoint")
    host = parsed.raw_host.decode("ascii").lower()
    if not host:
        raise ContractError(f"{url!r} names no host", path="model endpoint")
    if parsed.userinfo:
        raise ContractError(f"{url!r} carries credentials; configure a key instead", path="model endpoint")
    if parsed.query or parsed.fragment:
        raise ContractError(f"{url!r} has a query or fragment", path="model endpoint")
    port = "" if parsed.port in (None, _DEFAULT_PORTS[scheme]) else f":{parsed.port}"
    netloc = f"[{host}]" if ":" in host else host
    path = parsed.raw_path.decode("ascii").split("?", 1)[0].rstrip("/")
    return f"{scheme}://{netloc}{port}{path}"


def is_loopback(url: str) -> bool:
    host = httpx.URL(url).host.lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def require_safe_transport(url: str, *, sends_key: bool, allow_insecure_http: bool) -> None:
    """Refuse a key over plain http:// to a host that is not loopback, unless explicitly allowed."""
    if not sends_key or allow_insecure_http or httpx.URL(url).scheme != "http" or is_loopback(url):
        return
    raise InsecureEndpoint(
        f"refusing to send the API key to {url} over plain http (not loopback): use https://, or allow "
        "it with --allow-insecure-http, BLACKBOX_MODEL_ALLOW_INSECURE_HTTP=true, or "
        "allow_insecure_http = true on its model_endpoints.toml entry"
    )


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    url: str
    api_key_env: str | None = None
    allow_insecure_http: bool = False


def load_allow_list(path: Path, *, environ: Mapping[str, str] | None = None) -> tuple[ModelEndpoint, ...]:
    """The ``[[endpoint]]`` entries of ``path`` (none if the file does not exist), keys read now."""
    if not path.exists():
        return ()
    env = os.environ if environ is None else environ
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ContractError(f"cannot read model endpoints {path}: {exc}", path=str(path)) from exc
    raw = data.get("endpoint") or []
    if not isinstance(raw, list):
        raise ContractError("expected [[endpoint]] tables", path=str(path))
    endpoints = []
    for i, value in enumerate(raw):
        try:
            entry = _Entry.model_validate(value)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise ContractError(problems, path=f"{path} endpoint[{i}]") from exc
        key = env.get(entry.api_key_env) if entry.api_key_env else None
        endpoints.append(
            ModelEndpoint(
                url=normalize_url(entry.url),
                source=f"allow-list entry {entry.name!r} in {path}",
                api_key=SecretStr(key) if key else None,
                key_source=f"${entry.api_key_env}" if key else None,
                allow_insecure_http=entry.allow_insecure_http,
                missing_key_env=entry.api_key_env if entry.api_key_env and not key else None,
            )
        )
    return tuple(endpoints)


class EndpointSettings(Protocol):
    """The settings replay's endpoint policy reads (the services' settings, :mod:`consumers.app.settings`)."""

    @property
    def model_endpoint(self) -> str | None: ...
    @property
    def model_api_key(self) -> SecretStr | None: ...
    @property
    def resolved_model_endpoints(self) -> Path: ...
    @property
    def model_allow_insecure_http(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class EndpointPolicy:
    """Where replay may send a request: the operator endpoint, else an allow-listed captured one."""

    operator: ModelEndpoint | None = None
    allowed: tuple[ModelEndpoint, ...] = ()
    allow_list_path: Path | None = None
    allow_insecure_http: bool = False
    unbound_key_source: str | None = None

    @classmethod
    def build(
        cls,
        *,
        endpoint: str | None = None,
        endpoint_source: str = "--model-endpoint",
        api_key: str | None = None,
        configured_endpoint: str | None = None,
        configured_key: SecretStr | None = None,
        allowed: tuple[ModelEndpoint, ...] = (),
        allow_list_path: Path | None = None,
        allow_insecure_http: bool = False,
    ) -> EndpointPolicy:
        """Bind each key to its endpoint. ``endpoint``/``api_key`` are the flags;
        ``configured_endpoint``/``configured_key`` the settings ``BLACKBOX_MODEL_ENDPOINT``/``_API_KEY``."""
        chosen, source = (
            (endpoint, endpoint_source) if endpoint else (configured_endpoint, "BLACKBOX_MODEL_ENDPOINT")
        )
        if not chosen:
            if api_key:
                raise EndpointNotAllowed(
                    "--model-api-key is sent only to --model-endpoint (or BLACKBOX_MODEL_ENDPOINT); give one"
                )
            return cls(
                allowed=allowed,
                allow_list_path=allow_list_path,
                allow_insecure_http=allow_insecure_http,
                unbound_key_source="BLACKBOX_MODEL_API_KEY" if configured_key is not None else None,
            )
        url = normalize_url(chosen)
        listed = _match(allowed, url)
        key: SecretStr | None = None
        key_source: str | None = None
        if api_key:
            key, key_source = SecretStr(api_key), "--model-api-key"
        elif listed is not None:
            key, key_source = listed.api_key, listed.key_source
        elif configured_key is not None and (
            not configured_endpoint or normalize_url(configured_endpoint) == url
        ):
            key, key_source = configured_key, "BLACKBOX_MODEL_API_KEY"
        operator = ModelEndpoint(
            url=url,
            source=source,
            api_key=key,
            key_source=key_source,
            allow_insecure_http=listed is not None and listed.allow_insecure_http,
            missing_key_env=listed.missing_key_env if listed is not None and not api_key else None,
        )
        return cls(
            operator=operator,
            allowed=allowed,
            allow_list_path=allow_list_path,
            allow_insecure_http=allow_insecure_http,
        )

    @classmethod
    def from_settings(
        cls,
        settings: EndpointSettings,
        *,
        endpoint: str | None = None,
        api_key: str | None = None,
        allow_insecure_http: bool = False,
        environ: Mapping[str, str] | None = None,
    ) -> EndpointPolicy:
        """Flags first (``endpoint``, ``api_key``, ``allow_insecure_http``), then the settings."""
        path = settings.resolved_model_endpoints
        return cls.build(
            endpoint=endpoint,
            api_key=api_key,
            configured_endpoint=settings.model_endpoint,
            configured_key=settings.model_api_key,
            allowed=load_allow_list(path, environ=environ),
            allow_list_path=path,
            allow_insecure_http=allow_insecure_http or settings.model_allow_insecure_http,
        )

    def resolve(self, captured: str | None) -> ModelEndpoint:
        """The endpoint to send a request to whose capture names ``captured``; never ``captured``
        itself unless the operator allow-listed it. Raises :class:`EndpointNotAllowed`."""
        target = self.operator
        if target is None:
            target = _match(self.allowed, _normalized_or_none(captured))
        if target is None:
            raise EndpointNotAllowed(self._refusal(captured))
        if target.missing_key_env:
            raise EndpointNotAllowed(
                f"{target.url} ({target.source}) takes its key from ${target.missing_key_env}, which is not set"
            )
        require_safe_transport(
            target.url,
            sends_key=target.api_key is not None,
            allow_insecure_http=self.allow_insecure_http or target.allow_insecure_http,
        )
        return target

    def _refusal(self, captured: str | None) -> str:
        where = self.allow_list_path or "<data_dir>/model_endpoints.toml"
        if not captured:
            head = "the capture names no model endpoint and none is configured"
            allow = "give --model-endpoint URL or set BLACKBOX_MODEL_ENDPOINT"
        else:
            head = (
                f"the capture names the model endpoint {captured!r}; replay never dials an endpoint "
                "because a capture names it"
            )
            allow = (
                "give --model-endpoint URL, set BLACKBOX_MODEL_ENDPOINT, or allow it in "
                f'{where} ([[endpoint]] name = "...", url = "{captured}", api_key_env = "...")'
            )
        note = (
            f" ({self.unbound_key_source} is sent only to BLACKBOX_MODEL_ENDPOINT or --model-endpoint)"
            if self.unbound_key_source
            else ""
        )
        return f"{head}: {allow}{note}"


def _normalized_or_none(url: str | None) -> str | None:
    if not url:
        return None
    try:
        return normalize_url(url)
    except ContractError:
        return None


def _match(allowed: tuple[ModelEndpoint, ...], url: str | None) -> ModelEndpoint | None:
    return next((e for e in allowed if url is not None and e.url == url), None)


__all__ = [
    "EndpointNotAllowed",
    "EndpointPolicy",
    "InsecureEndpoint",
    "ModelEndpoint",
    "is_loopback",
    "load_allow_list",
    "normalize_url",
    "require_safe_transport",
]

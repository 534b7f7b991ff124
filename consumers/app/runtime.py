"""One runtime context per command: the services' settings, and every resource opened from them once.

Each command, the demo and the ingest process open one :class:`Runtime` and take what they need
from it; nothing else opens an index, a blob store, a sender or a gate from settings::

    with open_runtime() as rt:
        replayer = rt.replayer(client=client, reason="incident 42")
        ...

A resource is opened on first use and then reused (one chdb handle per process, one gate that logs
to that index); :meth:`Runtime.close` (the ``with`` block's end) closes what was opened, in reverse
order, each step even if an earlier one failed. The runtime builds the Replayer and the ingest
service too, so the replay commands, the demo and ``blackbox consume`` wire them the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import ExitStack
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from consumers.app.settings import ServiceSettings, load_service_settings
from schemas.errors import BlackboxError

if TYPE_CHECKING:
    from consumers.access import AccessDesk, AccessGate, Caller, TokenStore
    from consumers.index import Index
    from consumers.ingest.service import IngestService
    from consumers.pacts import PactBook
    from consumers.replay import CaptureSource, IndexedCaptureSource, ModelClient, Replayer, ToolBackend
    from consumers.retention.clock import Clock
    from consumers.retention.compaction import Compactor
    from consumers.retention.hold import LegalHolds
    from consumers.retention.policy import RetentionPolicy
    from consumers.tlog.log import TransparencyLog
    from consumers.verify.bundle import Prover
    from producers.blobstore import BlobStore
    from producers.evidence import Signer, TrustStore
    from producers.transports import Transport

__all__ = ["Runtime", "open_runtime"]


def open_runtime(
    settings: ServiceSettings | None = None,
    *,
    database: str | None = None,
    grants: Path | None = None,
    existing_index: bool = False,
    clock: Callable[[], datetime] | None = None,
) -> Runtime:
    """A :class:`Runtime` over ``settings`` (default: read from the environment now); use it in ``with``."""
    return Runtime(
        settings or load_service_settings(),
        database=database,
        grants=grants,
        existing_index=existing_index,
        clock=clock,
    )


class Runtime:
    """The frozen settings, the resources opened lazily from them, and one :meth:`close`.

    ``database`` names the index database (default ``blackbox``; the crash tests use their own);
    ``grants`` a grants file other than ``<data_dir>/grants.toml`` (``--grants``). ``existing_index``:
    a command that only reads refuses an embedded index that was never created (a mistyped
    ``BLACKBOX_DATA_DIR``) instead of creating an empty one and answering "no such decision".
    ``clock``: the time the gate decides at (grant expiry); tests move it.
    """

    def __init__(
        self,
        settings: ServiceSettings,
        *,
        database: str | None = None,
        grants: Path | None = None,
        existing_index: bool = False,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.settings = settings
        self._database = database
        self._grants = grants
        self._existing_index = existing_index
        self._clock = clock
        self._closing = ExitStack()

    def bundle_prover(self) -> Prover | None:
        """The transparency log's inclusion proofs for evidence bundles (None with ``BLACKBOX_TLOG=false``)."""
        if not self.settings.tlog:
            return None
        from consumers.tlog import log_vkey, prove
        from consumers.verify.bundle import transparency_section

        try:
            key: str | None = log_vkey(self)
        except BlackboxError:  # no log key yet: nothing was ever appended, prove() says so per decision
            key = None
        return transparency_section(lambda decision_id: prove(self, decision_id), key)

    # -- resources, each opened once on first use ---------------------------------------------------
    @cached_property
    def index(self) -> Index:
        from consumers.app.serving import held_by_serve
        from consumers.index import open_index, require_existing_index
        from schemas.errors import IndexError_

        if self._existing_index:
            require_existing_index(self.settings)
        try:
            index = open_index(self.settings, database=self._database)
        except IndexError_ as exc:  # locked by `blackbox serve`? then say so, and where it answers
            held = held_by_serve(self.settings.data_dir, exc)
            if held is exc:
                raise
            raise held from exc
        self._closing.callback(index.close)
        return index

    @cached_property
    def blob_store(self) -> BlobStore:
        from producers.blobstore import open_blob_store

        return open_blob_store(self.settings)

    @cached_property
    def sender(self) -> Transport:
        """The configured transport's sender (flags go out through it)."""
        from producers.transports import open_sender

        sender = open_sender(self.settings)
        self._closing.callback(sender.close)
        return sender

    @cached_property
    def signer(self) -> Signer:
        """The service's own signing key (``BLACKBOX_SIGNING_KEY`` or ``BLACKBOX_SIGNING_KEY_B64``)."""
        from producers.evidence import load_signer

        return load_signer(self.settings.signing_key, self.settings.signing_key_b64)

    @cached_property
    def trust_store(self) -> TrustStore:
        """The trust store as it is now (empty if the file does not exist yet)."""
        from producers.evidence import TrustStore

        return TrustStore.load(self.settings.resolved_trust_store, missing_ok=True)

    @cached_property
    def gate(self) -> AccessGate:
        """The one access gate: the grants file, and the access log in :attr:`index`."""
        from consumers.access import gate_for
        from consumers.privacy.identifiers import IdentifierResolver
        from producers.privacy.identifiers import is_commitment
        from producers.privacy.protect import vault_from_settings

        def origin_of(capture: Mapping[str, Any]) -> str | None:
            value = (capture.get("input") or {}).get("originUserId")
            if not is_commitment(value):
                return value if isinstance(value, str) else None
            # the vault (and the blob store) only for a counterparty's read of a committed id
            resolver = IdentifierResolver(vault_from_settings(self.settings, self.blob_store))
            return resolver.origin_user_id(capture)

        if self._clock is None:
            return gate_for(self.settings, self.index, grants=self._grants, origin_of=origin_of)
        return gate_for(
            self.settings, self.index, grants=self._grants, clock=self._clock, origin_of=origin_of
        )

    @cached_property
    def access_desk(self) -> AccessDesk:
        """Access requests, decided through :attr:`gate` (approvals append to the grants file)."""
        from consumers.access import desk_for

        return desk_for(self.settings, self.gate, grants=self._grants)

    @cached_property
    def tokens(self) -> TokenStore:
        """The audit endpoint's bearer tokens (hashes only), ``<data_dir>/access/tokens.json``."""
        from consumers.access import tokens_for

        return tokens_for(self.settings)

    @cached_property
    def capture_source(self) -> IndexedCaptureSource:
        """The stored captures: index rows pointing into blob segments."""
        from consumers.privacy.ids import index_ids
        from consumers.replay import IndexedCaptureSource

        return IndexedCaptureSource(self.index, self.blob_store, index_ids(self.settings))

    @cached_property
    def pacts(self) -> PactBook:
        """The pact file, every rule checked (``BLACKBOX_PACTS``; none at the default path means no pacts)."""
        from consumers.pacts import load_pacts

        return load_pacts(self.settings.resolved_pacts, missing_ok=self.settings.pacts is None)

    @cached_property
    def transparency_log(self) -> TransparencyLog:
        """The transparency log ingest appends to (:mod:`consumers.tlog`), its key loaded or created."""
        from consumers.tlog.log import TransparencyLog

        return TransparencyLog.from_settings(self.settings, store=self.blob_store, index=self.index)

    @cached_property
    def retention_policy(self) -> RetentionPolicy:
        from consumers.retention.policy import policy_for_settings

        return policy_for_settings(self.settings)

    def caller(self, reason: str) -> Caller:
        """The configured caller (``BLACKBOX_CALLER`` / ``BLACKBOX_SCOPE``), reading for ``reason``."""
        from consumers.access import caller_for

        return caller_for(self.settings, reason=reason)

    # -- what the commands build from them ------------------------------------------------------------
    def replayer(
        self,
        *,
        client: ModelClient,
        caller: Caller | None = None,
        reason: str = "",
        source: CaptureSource | None = None,
        allow_unverified: bool = False,
        substitute_model: str | None = None,
        live_tools: ToolBackend | None = None,
        live_reason: str | None = None,
        reveal: bool = False,
    ) -> Replayer:
        """The Replayer over the stored captures (or ``source``), through :attr:`gate` as ``caller``
        (default: the configured one, for ``reason``), verifying against :attr:`trust_store`; the
        other arguments are :class:`~consumers.replay.Replayer`'s (``reveal`` opens the key vault)."""
        from consumers.replay import EvidenceVerifier, Replayer
        from producers.privacy.protect import vault_from_settings

        return Replayer(
            source=source if source is not None else self.capture_source,
            client=client,
            gate=self.gate,
            caller=caller or self.caller(reason),
            verifier=EvidenceVerifier(self.trust_store),
            allow_unverified=allow_unverified,
            substitute_model=substitute_model,
            live_tools=live_tools,
            live_reason=live_reason,
            reveal=reveal,
            vault=vault_from_settings(self.settings, self.blob_store) if reveal else None,
        )

    def ingest(self, **options: Any) -> IngestService:
        """The ingest service into :attr:`index` and :attr:`blob_store`, verifying against the trust
        store file as it changes, under the configured retention policy, pacts and fault hook. ``options`` go
        to :func:`~consumers.ingest.service.build_service` (``batch_size``, ``workers`` …)."""
        from consumers.ingest.service import ReloadingTrust, build_service
        from consumers.pacts.applied import AppliedPactSource
        from consumers.pacts.logged import in_force
        from consumers.privacy.identifiers import IdentifierResolver
        from consumers.privacy.ids import index_ids
        from producers.privacy.protect import vault_from_settings

        trust = ReloadingTrust(self.settings.resolved_trust_store)

        return build_service(
            self.settings,
            index=self.index,
            store=self.blob_store,
            trust=trust,
            policy=self.retention_policy,
            pacts=AppliedPactSource(
                self.blob_store,
                trust=trust,
                fallback=self.pacts,
                # with the log on, the shared pointer is obeyed only as the log's latest apply
                in_force=(lambda pointer: in_force(self.index, self.blob_store, pointer))
                if self.settings.tlog
                else None,
            ),
            fault=self.settings.fault or None,
            tlog=self.transparency_log if self.settings.tlog else None,
            index_id_key=index_ids(self.settings).key,
            identifiers=IdentifierResolver(vault_from_settings(self.settings, self.blob_store)),
            **options,
        )

    def compactor(self, *, clock: Clock | None = None) -> Compactor:
        from consumers.retention.compaction import Compactor

        return Compactor.in_data_dir(
            self.settings.data_dir,
            index=self.index,
            store=self.blob_store,
            policy=self.retention_policy,
            clock=clock,
            spool_dir=self.settings.resolved_spool_dir if self.settings.transport == "spool" else None,
        )

    def legal_holds(self, *, clock: Clock | None = None) -> LegalHolds:
        from consumers.retention.hold import LegalHolds

        return LegalHolds.in_data_dir(
            self.settings.data_dir,
            index=self.index,
            caller=self.settings.caller,
            scope=self.settings.scope,
            clock=clock,
            store=self.blob_store,
        )

    # -- lifecycle ------------------------------------------------------------------------------------
    def close(self) -> None:
        """Close what was opened, last first; every step runs even if an earlier one failed."""
        self._closing.close()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

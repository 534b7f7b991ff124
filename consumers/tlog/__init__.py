"""The transparency log (DESIGN decision 15): completeness and time, not just integrity.

Ingest appends one leaf per accepted capture (:mod:`producers.evidence.tlog` defines the leaf) to an
append-only RFC 6962 Merkle log stored as C2SP tlog-tiles in the blob store (:mod:`.tiles`,
:mod:`.frontier`), keeps which leaf holds which decision in ``tlog_leaves`` (:mod:`.store`), and
publishes C2SP signed-note checkpoints by the log's own key, optionally with an RFC 3161 timestamp
(:mod:`.checkpoints`, :mod:`.timestamp`). :func:`prove` gives a decision's inclusion proof;
:mod:`.audit` is ``blackbox log verify``. Compaction and expiry never touch the log's prefix.

Modules: ``tiles`` (layout and proofs read from tiles), ``frontier`` (the right edge, appends),
``store`` (SQL), ``checkpoints`` (key, signing, history), ``timestamp`` (RFC 3161), ``log`` (the
appender ingest calls), ``audit`` (verification of the whole log).
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any, Protocol

from producers.evidence.merkle import leaf_hash
from producers.evidence.tlog import Checkpoint, root_from_inclusion
from schemas.errors import BlobNotFound, ProofInvalid, TransparencyLogError

from .checkpoints import latest, load_log_signer
from .log import LogSettings
from .store import leaf_of
from .tiles import TreeReader

if TYPE_CHECKING:
    from consumers.index import Index
    from producers.blobstore import BlobStore

__all__ = ["log_vkey", "prove"]


class LogRuntime(Protocol):
    """What :func:`prove` and :func:`log_vkey` use of the app's runtime (declared here, so the log does
    not import the app room that wires it)."""

    @property
    def settings(self) -> LogSettings: ...
    @property
    def blob_store(self) -> BlobStore: ...
    @property
    def index(self) -> Index: ...


def log_vkey(runtime: LogRuntime) -> str:
    """The log's C2SP verifier key (``<origin>+<key id>+<base64 key>``): what verifiers of its
    checkpoints and proofs trust."""
    settings = runtime.settings
    return load_log_signer(settings.resolved_tlog_key, settings.tlog_origin, create=False).vkey


def prove(
    store_or_runtime: LogRuntime | BlobStore,
    decision_id: str,
    *,
    index: Index | None = None,
    prefix: str | None = None,
) -> dict[str, Any]:
    """The inclusion proof of ``decision_id``'s leaf under the latest checkpoint, as JSON (under the
    latest *cosigned* checkpoint instead when one covers the leaf, so bundles carry the witnesses'
    cosignatures; DESIGN 24)::

        {"leafIndex": int, "treeSize": int, "hashes": [base64, ...],
         "checkpoint": "<signed note>", "leaf": base64 of the leaf bytes}

    ``store_or_runtime``: a :class:`~consumers.app.runtime.Runtime` (its blob store, index and log
    prefix), or a blob store with ``index`` and ``prefix``. Raises :class:`TransparencyLogError`
    when the decision has no leaf, or no checkpoint covers its leaf yet.
    """
    if hasattr(store_or_runtime, "settings"):
        runtime: Any = store_or_runtime
        store: BlobStore = runtime.blob_store
        index = index or runtime.index
        prefix = prefix or runtime.settings.resolved_tlog_prefix
    else:
        store = store_or_runtime  # type: ignore[assignment]
    if index is None or prefix is None:
        raise TransparencyLogError("prove() with a blob store needs the index and the log prefix")
    row = leaf_of(index, decision_id)
    if row is None:
        raise TransparencyLogError(f"decision {decision_id} is not in the transparency log")
    current = latest(store, prefix)
    if current is None or current[1].size <= row.leaf_index:
        raise TransparencyLogError(
            f"decision {decision_id} is leaf {row.leaf_index} of the log, but no checkpoint covers it yet "
            "(ingest signs one every BLACKBOX_TLOG_CHECKPOINT_INTERVAL seconds and when it stops)"
        )
    note, checkpoint = current
    witnessed = _latest_cosigned(store, prefix)  # DESIGN 24: bundles carry the witnesses' cosignatures
    if witnessed is not None and row.leaf_index < witnessed[1].size <= checkpoint.size:
        note, checkpoint = witnessed
    reader = TreeReader(store, prefix, checkpoint.size)
    stored_leaf = reader.leaf(row.leaf_index)
    if stored_leaf != row.leaf:
        raise TransparencyLogError(
            f"leaf {row.leaf_index} in the tiles is not decision {decision_id}'s leaf in the index: "
            "run `blackbox log verify`"
        )
    hashes = reader.inclusion(row.leaf_index)
    try:
        computed = root_from_inclusion(row.leaf_index, checkpoint.size, leaf_hash(row.leaf), hashes)
    except ProofInvalid as exc:
        raise TransparencyLogError(f"the log's tiles give no valid proof: {exc}") from exc
    if computed != checkpoint.root:
        raise TransparencyLogError(
            "the log's tiles do not match its latest checkpoint: run `blackbox log verify`"
        )
    return {
        "leafIndex": row.leaf_index,
        "treeSize": checkpoint.size,
        "hashes": [base64.b64encode(h).decode("ascii") for h in hashes],
        "checkpoint": note,
        "leaf": base64.b64encode(row.leaf).decode("ascii"),
    }


def _latest_cosigned(store: BlobStore, prefix: str) -> tuple[str, Checkpoint] | None:
    from .witness import latest_cosigned_key

    try:
        note = store.get(latest_cosigned_key(prefix)).decode("utf-8")
        return note, Checkpoint.parse(note[: note.rfind("\n\n") + 1])
    except (BlobNotFound, UnicodeDecodeError, ProofInvalid):
        return None

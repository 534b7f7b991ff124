"""The per-message CPU work of ingest, as one pure function that can run in worker processes.

:func:`prepare` takes one message's bytes and returns a small, picklable :class:`Prepared`: decode,
full evidence verification, sha256, the compressed segment frame, and the index rows. Everything
that needs the rest of the batch or a service (dedup, flags, claim-check blobs, writes) stays in
:mod:`consumers.ingest.batch`.

Verification dominates ingest CPU (every content part is re-hashed, JSON parts canonicalized, the
Merkle root and the signature recomputed), and the GIL serializes it, so :class:`PreparePool` spreads
it over worker processes (``spawn``ed: the parent holds librdkafka and chdb threads). With
``workers=0`` everything runs inline, which is what tests and small deployments use.

Inline, a batch's segment frames are compressed behind it: one zstd call for the whole batch in a
helper thread, which releases the GIL for all of it, while this thread decodes and verifies (a
second core does the compression; with workers every core is busy already, so they compress as
they go). The frames are the ones ``frame_compressor(level).compress`` makes, byte for byte.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import multiprocessing
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

import zstandard

from consumers.index import CaptureRows, decision_rows
from consumers.pacts.evaluate import Evaluation, evaluate_capture
from consumers.privacy.ids import IndexIds
from consumers.privacy.manifest import index_manifest_json
from consumers.retention.policy import RetentionPolicy
from consumers.storage.segments import DEFAULT_LEVEL
from producers.avro import decode  # the native reader when it loads, else the codec
from producers.evidence import TrustedKey, TrustStore, verify_capture
from producers.evidence.manifest import manifest_view
from producers.evidence.tlog import leaf_bytes
from producers.pacts.expression import Rule
from schemas.errors import (
    ContractError,
    DecodeError,
    KeyNotAuthorizedForAgent,
    UnknownFingerprint,
    VerificationError,
)

from .admission import CLOCK_SKEW, IntegerRanges, captured_at_problem, unexpected_reason, value_problem
from .classify import classify
from .lifeline import Lifeline, watch_parent

logger = logging.getLogger(__name__)

Kind = Literal["capture", "flag", "claim_check", "dead"]


@dataclass(frozen=True, slots=True)
class Prepared:
    """One message after the per-message work.

    - ``dead``: ``reason`` (a DLQ reason code) and ``detail``.
    - ``flag`` / ``claim_check``: ``value`` (the small event, verified or resolved by the batch).
    - ``capture``: ``frame`` (zstd of the capture bytes), ``sha`` and ``size`` of those bytes, and
      either ``rows`` + ``key_id`` (verified) or ``reason`` + ``part`` (to be quarantined).
    """

    kind: Kind
    decision_id: str = ""
    agent_id: str = ""
    sha: str = ""
    size: int = 0
    frame: bytes = b""
    rows: CaptureRows | None = None
    key_id: str = ""
    reason: str = ""
    part: str = ""
    detail: str = ""
    value: dict[str, Any] | None = None
    pacts: Evaluation | None = None  # verified captures, when pacts are loaded
    tlog_leaf: bytes = b""  # verified captures: their transparency-log leaf (producers.evidence.tlog)

    @property
    def verified(self) -> bool:
        return self.kind == "capture" and self.rows is not None


@dataclass(frozen=True, slots=True)
class PrepareContext:
    """What :func:`prepare` needs besides the bytes; picklable (trust keys, not key objects)."""

    trust_keys: tuple[TrustedKey, ...]
    trust_version: str  # unique per trust snapshot: worker processes cache the rebuilt store by it
    now: datetime
    policy: RetentionPolicy
    level: int = DEFAULT_LEVEL
    integer_ranges: IntegerRanges | None = None  # what the index's integer columns hold (admission)
    clock_skew: timedelta = CLOCK_SKEW
    pacts: tuple[Rule, ...] = ()  # rules, not programs: CEL programs do not pickle (consumers.pacts)
    index_id_key: bytes | None = None  # origin ids hashed under it in index rows (consumers.privacy.ids)


_trust_cache: dict[str, TrustStore] = {}
_local = threading.local()


def _trust(ctx: PrepareContext) -> TrustStore:
    store = _trust_cache.get(ctx.trust_version)
    if store is None:
        if len(_trust_cache) >= 8:  # old snapshots (reloaded trust stores) are not needed again
            _trust_cache.clear()
        store = _trust_cache[ctx.trust_version] = TrustStore(list(ctx.trust_keys))
    return store


def frame_compressor(level: int) -> zstandard.ZstdCompressor:
    """This thread's compressor for segment frames (a ZstdCompressor must not be shared across threads)."""
    cache: dict[int, zstandard.ZstdCompressor] | None = getattr(_local, "compressors", None)
    if cache is None:
        cache = _local.compressors = {}
    comp = cache.get(level)
    if comp is None:
        comp = cache[level] = zstandard.ZstdCompressor(
            level=level, write_checksum=True, write_content_size=True
        )
    return comp


def prepare(data: bytes, ctx: PrepareContext, *, source: str = "", compress: bool = True) -> Prepared:
    """Decode, verify and pre-compute one message (see :class:`Prepared` for the outcomes).

    Never raises for the message's sake: an error no rule anticipated dead-letters the message
    (``unexpected_error``) instead of failing the batch it arrived in. ``compress=False``: a
    capture comes back with an empty ``frame``, for a caller that compressed ``data`` already.
    """
    try:
        return _prepare(data, ctx, source=source, compress=compress)
    except Exception as exc:
        logger.exception("unexpected error preparing %s", source or "a message")
        return Prepared("dead", reason="unexpected_error", detail=unexpected_reason(exc))


def _prepare(data: bytes, ctx: PrepareContext, *, source: str, compress: bool) -> Prepared:
    try:
        decoded = decode(data)
    except UnknownFingerprint as exc:
        return Prepared("dead", reason="unknown_fingerprint", detail=f"{type(exc).__name__}: {exc}")
    except DecodeError as exc:
        return Prepared("dead", reason="decode_error", detail=f"{type(exc).__name__}: {exc}")
    value = decoded.value
    if decoded.kind == "flag":
        return Prepared("flag", decision_id=str(value.get("decisionId") or ""), value=value)
    if decoded.kind == "claim_check":
        return Prepared("claim_check", decision_id=str(value.get("decisionId") or ""), value=value)
    return prepare_capture(data, value, ctx, source=source, compress=compress)


def prepare_capture(
    data: bytes, capture: dict[str, Any], ctx: PrepareContext, *, source: str = "", compress: bool = True
) -> Prepared:
    """The capture half of :func:`prepare`, for bytes already decoded (also used for claim-check bodies).

    A capture that fails a check is quarantined with the reason (:mod:`consumers.ingest.admission`
    for the checks after verification); one that raises an error no rule anticipated is quarantined
    as ``unexpected error: <type>: <message>``, so it never stops the batch.
    """
    try:
        return _prepare_capture(data, capture, ctx, source=source, compress=compress)
    except Exception as exc:
        logger.exception("unexpected error preparing capture %s (%s)", capture.get("decisionId"), source)
        reason = unexpected_reason(exc)
        return Prepared(
            "capture",
            decision_id=str(capture.get("decisionId") or ""),
            agent_id=str(capture.get("agentId") or ""),
            sha="sha256:" + hashlib.sha256(data).hexdigest(),
            size=len(data),
            frame=frame_compressor(ctx.level).compress(data) if compress else b"",
            reason=reason,
            detail=reason,
        )


def _prepare_capture(
    data: bytes, capture: dict[str, Any], ctx: PrepareContext, *, source: str, compress: bool
) -> Prepared:
    decision_id = str(capture.get("decisionId") or "")
    agent_id = str(capture.get("agentId") or "")
    sha = "sha256:" + hashlib.sha256(data).hexdigest()
    frame = frame_compressor(ctx.level).compress(data) if compress else b""
    common: dict[str, Any] = {
        "decision_id": decision_id,
        "agent_id": agent_id,
        "sha": sha,
        "size": len(data),
        "frame": frame,
    }
    try:
        report = verify_capture(capture, _trust(ctx), at=ctx.now)
    except VerificationError as exc:
        return Prepared("capture", reason=quarantine_reason(exc), part=exc.part, detail=str(exc), **common)
    except ContractError as exc:  # not even shaped like evidence
        return Prepared("capture", reason="ContractError", part=exc.path, detail=str(exc), **common)
    ids = IndexIds(ctx.index_id_key)
    hash_id = _remembering(ids.of) if ctx.index_id_key is not None else None
    try:
        retention = classify(capture, policy=ctx.policy)
        rows = decision_rows(
            capture,
            capture_bytes=len(data),
            content_sha256=sha,
            manifest_json=index_manifest_json(capture, ids, hash_id=hash_id),
            key_id=report.key_id,
            source=source,
            ingested_at=ctx.now,
            retention_class=retention.retention_class,
            retention_days=retention.retention_days,
            expires_at=retention.expires_at,
            hash_id=hash_id,
        )
    except ContractError as exc:  # verified, yet not indexable (e.g. a malformed capturedAt)
        return Prepared("capture", reason="ContractError", part=exc.path, detail=str(exc), **common)
    problem = _admission_problem(rows, ctx)
    if problem is not None:
        reason, part = problem
        return Prepared("capture", reason=reason, part=part, detail=reason, **common)
    # Pacts run on the verified capture here, where its content is decoded (in the worker, if any).
    pacts = evaluate_capture(ctx.pacts, capture) if ctx.pacts else None
    leaf = leaf_bytes(
        decision_id=decision_id,
        captured_at=str(capture.get("capturedAt") or ""),
        envelope_hash=report.envelope_hash,
    )
    return Prepared("capture", rows=rows, key_id=report.key_id, pacts=pacts, tlog_leaf=leaf, **common)


def _remembering(of: Callable[[str], str]) -> Callable[[str], str]:
    """``of`` for one capture, each id hashed once: the manifest view and the row hash the same ids."""
    seen: dict[str, str] = {}

    def hash_id(value: str) -> str:
        hashed = seen.get(value)
        if hashed is None:
            hashed = seen[value] = of(value)
        return hashed

    return hash_id


def _admission_problem(rows: CaptureRows, ctx: PrepareContext) -> tuple[str, str] | None:
    """``(reason, part)`` when a verified capture may not be indexed (see :mod:`.admission`)."""
    captured_at = rows.decision["captured_at"]
    reason = captured_at_problem(captured_at, ctx.now, skew=ctx.clock_skew)
    if reason is not None:
        return reason, "capturedAt"
    if ctx.integer_ranges is not None:
        return value_problem(rows, ctx.integer_ranges)
    return None


def quarantine_reason(exc: VerificationError) -> str:
    """The ``quarantine.reason`` of a verification failure: the error's class name, and for a key
    signing outside its agents also the key and the agent (the table has no other place for them)."""
    if isinstance(exc, KeyNotAuthorizedForAgent):
        return f"{type(exc).__name__}: key {exc.key_id} may not sign for agent {exc.agent_id}"
    return type(exc).__name__


def manifest_json(capture: Any) -> str:
    """The capture without its content parts, signature kept: enough to verify a compacted decision."""
    view = manifest_view(capture)
    view["signature"] = capture.get("signature")
    return json.dumps(view, ensure_ascii=False, separators=(",", ":"))


def _warm() -> None:
    """A worker's first task: by then it has started and imported this module."""


_BEHIND_MIN = 4  # smaller chunks compress inline: a thread hand-off costs more than it frees
_MULTI = zstandard.backend == "cext"  # the cffi backend's multi_compress_to_buffer is not implemented
_frames_thread: ThreadPoolExecutor | None = None
_frames_lock = threading.Lock()


def _compress_all(datas: list[bytes], level: int) -> list[bytes]:
    """One frame per item, as ``frame_compressor(level).compress`` makes it, in one call that
    releases the GIL for the whole list (``multi_compress_to_buffer``, python-zstandard's C backend)."""
    sources: list[bytes | bytearray | memoryview] = list(datas)
    frames = frame_compressor(level).multi_compress_to_buffer(sources)
    return [frames[i].tobytes() for i in range(len(frames))]


def _frames_behind(items: Sequence[tuple[bytes, str]], level: int) -> Future[list[bytes]] | None:
    """The frames of ``items``, compressing in this process's helper thread; None: compress inline."""
    global _frames_thread
    if len(items) < _BEHIND_MIN or not _MULTI:
        return None
    with _frames_lock:
        if _frames_thread is None:
            _frames_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="blackbox-frames")
        return _frames_thread.submit(_compress_all, [data for data, _ in items], level)


def _prepare_chunk(
    items: Sequence[tuple[bytes, str]], ctx: PrepareContext, *, behind_thread: bool = False
) -> list[Prepared]:
    behind = _frames_behind(items, ctx.level) if behind_thread else None
    if behind is None:
        return [prepare(data, ctx, source=source) for data, source in items]
    prepared = [prepare(data, ctx, source=source, compress=False) for data, source in items]
    try:
        frames = behind.result()
    except Exception:  # e.g. out of memory in the helper: the frames are made here instead
        logger.exception("compressing a chunk's frames in the helper thread failed; compressing inline")
        compressor = frame_compressor(ctx.level)
        frames = [compressor.compress(data) for data, _ in items]
    return [
        dataclasses.replace(p, frame=frame) if p.kind == "capture" else p
        for p, frame in zip(prepared, frames, strict=True)
    ]


class PreparePool:
    """Runs :func:`prepare` over a batch, inline (``workers=0``) or in ``workers`` spawned processes."""

    def __init__(self, workers: int = 0) -> None:
        if workers < 0:
            raise ValueError("workers must be >= 0")
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None
        self._lifeline: Lifeline | None = None
        if workers:
            ctx = multiprocessing.get_context("spawn")
            self._lifeline = Lifeline(ctx)  # workers exit when this process dies, even by SIGKILL
            self._pool = ProcessPoolExecutor(
                max_workers=workers,
                mp_context=ctx,
                initializer=watch_parent,
                initargs=(self._lifeline.child_end,),
            )
            # Spawn and import now, in the background (~1 s per worker here), not in the first batch.
            for _ in range(workers):
                self._pool.submit(_warm)

    def run(self, items: Sequence[tuple[bytes, str]], ctx: PrepareContext) -> list[Prepared]:
        """``prepare`` for every ``(bytes, source)`` in order.

        With workers, the calling process prepares the last share of the batch itself while the
        workers prepare the rest: it would otherwise sit idle until they finish (``prepare`` is a
        pure function of the bytes and ``ctx``, so where it runs changes nothing but the time).
        """
        if self._pool is None:
            return _prepare_chunk(items, ctx, behind_thread=True)
        if len(items) < 2 * self.workers:
            return _prepare_chunk(items, ctx)
        own = len(items) // (self.workers + 1)
        shared = items[: len(items) - own]
        chunks = self.workers * 2
        size = -(-len(shared) // chunks)
        futures = [
            self._pool.submit(_prepare_chunk, shared[i : i + size], ctx) for i in range(0, len(shared), size)
        ]
        mine = _prepare_chunk(items[len(shared) :], ctx)
        out: list[Prepared] = []
        for future in futures:
            out.extend(future.result())
        out.extend(mine)
        return out

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        if self._lifeline is not None:
            self._lifeline.close()
            self._lifeline = None

"""Submitting checkpoints to witnesses (C2SP tlog-witness) and publishing the cosigned notes (DESIGN 24).

After the log publishes a checkpoint, :meth:`WitnessSubmitter.submit` hands it to one background thread
per configured witness, so a witness that is slow or down delays nothing else (not ingest, not the
other witnesses). Each thread sends the witness ``POST <url>/add-checkpoint``::

    old <the size the witness last cosigned for this log, 0 at first>
    <consistency proof from that size, one base64 hash a line>
    <blank line>
    <the checkpoint's signed note>

and on ``200`` receives its cosignature lines (tlog-cosignature v1). The witness is not trusted for
what it returns: each line is verified against the witness's configured vkey before it is kept. A
``409`` with ``Content-Type: text/x.tlog.size`` gives the size the witness has: the proof is
recomputed from there and the request sent again. Anything else (down, 5xx, a 409 without a size,
which is a witness refusing a checkpoint that does not extend what it saw) is logged and retried with
a growing pause, always with the newest checkpoint handed in.

Under the log's prefix ``P``:

- ``P/checkpoints/<size>.cosigned`` — the checkpoint of that size with every cosignature collected;
- ``P/checkpoint.cosigned`` — the latest cosigned note (what ``log prove`` puts in bundles);
- ``P/witnesses/<name>.json`` — ``{"size", "cosignedAt"}``: the size the witness last cosigned.

The cosigned notes are derived, rewritable evidence: each adds lines to the log-signed note, whose
text never changes; the plain ``P/checkpoints/<size>`` stays as it was written.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol
from urllib.parse import quote

import httpx

from producers.blobstore import BlobStore
from producers.evidence.cosignature import (
    WitnessKey,
    WitnessReport,
    add_signature_lines,
    verify_witnesses,
    witness_key,
)
from producers.evidence.tlog import Checkpoint, LogKey, open_checkpoint
from schemas.errors import BlobNotFound, ProofInvalid, TransparencyLogError

from .checkpoints import history_key
from .tiles import TreeReader

logger = logging.getLogger(__name__)

__all__ = [
    "WitnessSetting",
    "WitnessState",
    "WitnessSubmitter",
    "check_cosigned",
    "cosigned_key",
    "latest_cosigned_key",
    "read_states",
    "state_key",
    "witness_config_yaml",
]

_SIZE_TYPE = "text/x.tlog.size"
_MAX_CONFLICTS = 3  # 409s with a size followed in one attempt (a witness moving on meanwhile)


class WitnessSetting(Protocol):
    """One configured witness (``BLACKBOX_TLOG_WITNESSES``): a name, its base URL and its vkey."""

    @property
    def name(self) -> str: ...
    @property
    def url(self) -> str: ...
    @property
    def vkey(self) -> str: ...


def cosigned_key(prefix: str, size: int) -> str:
    return history_key(prefix, size) + ".cosigned"


def latest_cosigned_key(prefix: str) -> str:
    return f"{prefix}/checkpoint.cosigned"


def state_key(prefix: str, name: str) -> str:
    return f"{prefix}/witnesses/{quote(name, safe='')}.json"  # witness names are often URL-like


@dataclass(frozen=True, slots=True)
class WitnessState:
    """What the log knows of one witness: the size it last cosigned and when."""

    name: str
    size: int
    cosigned_at: str


def read_states(store: BlobStore, prefix: str, names: Sequence[str]) -> list[WitnessState | None]:
    """Each named witness's last cosigned size (``None`` when it never cosigned)."""
    out: list[WitnessState | None] = []
    for name in names:
        try:
            value = json.loads(store.get(state_key(prefix, name)))
            out.append(WitnessState(name, int(value["size"]), str(value["cosignedAt"])))
        except (BlobNotFound, ValueError, KeyError, TypeError):
            out.append(None)
    return out


def witness_config_yaml(*, origin: str, vkey: str, url: str) -> str:
    """This log as transparency-dev/witness's ``omniwitness --additional_logs`` YAML expects it."""
    # the three values are checked note names / keys / URLs; json quoting is valid YAML flow scalars
    return (
        "Logs:\n"
        f"  - Origin: {json.dumps(origin)}\n"
        f"    PublicKey: {json.dumps(vkey)}\n"
        f"    URL: {json.dumps(url)}\n"
    )


class _Rejected(TransparencyLogError):
    """The witness refused the checkpoint for a reason a retry with the same data will not change."""


@dataclass(frozen=True, slots=True)
class _Witness:
    name: str
    url: str
    key: WitnessKey


class WitnessSubmitter:
    """Background submission of checkpoints to witnesses (module docstring). Thread-safe."""

    def __init__(
        self,
        *,
        store: BlobStore,
        prefix: str,
        witnesses: Sequence[WitnessSetting],
        timeout: float = 10.0,
        max_pause: float = 60.0,
    ) -> None:
        self.store = store
        self.prefix = prefix.strip("/")
        self.timeout = timeout
        self.max_pause = max_pause
        self._witnesses = [_Witness(w.name, w.url.rstrip("/"), witness_key(w.vkey)) for w in witnesses]
        for w in self._witnesses:
            if w.key.name != w.name:
                raise TransparencyLogError(f"witness {w.name}: its vkey is for {w.key.name!r}")
        self._lock = threading.Lock()  # one merge of cosigned notes at a time
        self._cond = threading.Condition()
        self._pending: dict[str, str] = {}
        self._tried: set[str] = set()  # witnesses that tried the pending note at least once
        self._closed = False
        self._sizes: dict[str, int] = {}
        for w, state in zip(
            self._witnesses,
            read_states(self.store, self.prefix, [w.name for w in self._witnesses]),
            strict=True,
        ):
            self._sizes[w.name] = state.size if state else 0
        self._threads = [
            threading.Thread(target=self._run, args=(w,), name=f"witness-{w.name}", daemon=True)
            for w in self._witnesses
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, note: str) -> None:
        """Hand the newest checkpoint to every witness's thread; returns at once and never raises."""
        with self._cond:
            for w in self._witnesses:
                self._pending[w.name] = note
            self._tried.clear()
            self._cond.notify_all()

    def close(self, *, wait: float = 0.0) -> None:
        """Stop the threads, after each witness tried the pending checkpoint once (``wait`` seconds at
        most): a witness that is down does not hold the others, nor the shutdown, longer than that."""
        deadline = time.monotonic() + wait
        with self._cond:
            while set(self._pending) - self._tried and time.monotonic() < deadline:
                self._cond.wait(timeout=max(0.0, min(0.05, deadline - time.monotonic())))
            self._closed = True
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout=self.timeout + 1)

    def cosigned_sizes(self) -> dict[str, int]:
        with self._cond:
            return dict(self._sizes)

    # --- one witness's thread ---------------------------------------------------------------------------
    def _run(self, witness: _Witness) -> None:
        pause = 0.5
        with httpx.Client(timeout=self.timeout, follow_redirects=False) as client:
            while True:
                with self._cond:
                    while witness.name not in self._pending and not self._closed:
                        self._cond.wait()
                    if self._closed:
                        return
                    note = self._pending[witness.name]
                try:
                    self._submit(client, witness, note)
                except Exception as exc:  # down, refused, garbled: logged, retried, never raised
                    if isinstance(exc, _Rejected):
                        logger.error("witness %s refused a checkpoint: %s", witness.name, exc)
                    else:
                        logger.warning("witness %s: %s (retrying in %.1fs)", witness.name, exc, pause)
                    with self._cond:
                        self._tried.add(witness.name)
                        self._cond.notify_all()
                        self._cond.wait(timeout=pause)  # woken early by close() or a newer checkpoint
                    pause = min(pause * 2, self.max_pause)
                    continue
                pause = 0.5
                with self._cond:
                    if self._pending.get(witness.name) is note:
                        del self._pending[witness.name]
                    self._tried.add(witness.name)
                    self._cond.notify_all()

    def _submit(self, client: httpx.Client, witness: _Witness, note: str) -> None:
        text = note[: note.rfind("\n\n") + 1]
        checkpoint = Checkpoint.parse(text)
        old = self._sizes.get(witness.name, 0)
        for _ in range(_MAX_CONFLICTS + 1):
            if old > checkpoint.size:
                return  # the witness has cosigned a later checkpoint already: nothing to add
            proof = TreeReader(self.store, self.prefix, checkpoint.size).consistency(old) if old else []
            body = f"old {old}\n" + "".join(_b64(h) + "\n" for h in proof) + "\n" + note
            response = client.post(f"{witness.url}/add-checkpoint", content=body.encode("utf-8"))
            if response.status_code == 409 and response.headers.get("content-type", "").startswith(
                _SIZE_TYPE
            ):
                told = response.text.strip()
                if not told.isdigit():
                    raise TransparencyLogError(f"409 with a size that is not a number: {told[:40]!r}")
                old = int(told)
                continue
            if response.status_code in (403, 404, 409, 422):
                raise _Rejected(f"HTTP {response.status_code} for the checkpoint of {checkpoint.size} leaves")
            if response.status_code != 200:
                raise TransparencyLogError(f"HTTP {response.status_code} from {witness.url}")
            self._keep(witness, note, checkpoint.size, response.text)
            return
        raise TransparencyLogError(f"the witness answered 409 {_MAX_CONFLICTS + 1} times in a row")

    def _keep(self, witness: _Witness, note: str, size: int, answer: str) -> None:
        lines = [line for line in answer.splitlines() if line.split(" ")[1:2] == [witness.name]]
        cosigned = add_signature_lines(note, lines)
        try:
            verify_witnesses(cosigned, [witness.key], quorum=1)
        except ProofInvalid as exc:
            raise TransparencyLogError(f"its answer is not a valid cosignature: {exc}") from exc
        with self._lock:
            key = cosigned_key(self.prefix, size)
            try:
                merged = add_signature_lines(self.store.get(key).decode("utf-8"), cosigned.splitlines())
            except BlobNotFound:
                merged = cosigned
            self.store.put(key, merged.encode("utf-8"))
            self._replace_latest(size, merged)
            now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
            state = {"size": size, "cosignedAt": now}
            self.store.put(state_key(self.prefix, witness.name), json.dumps(state).encode("utf-8"))
        with self._cond:
            self._sizes[witness.name] = size
        _record_metric(witness.name, size)
        logger.info("witness %s cosigned the checkpoint of %d leaves", witness.name, size)

    def _replace_latest(self, size: int, note: str) -> None:
        key = latest_cosigned_key(self.prefix)
        try:
            current = self.store.get(key).decode("utf-8")
            current_size = Checkpoint.parse(current[: current.rfind("\n\n") + 1]).size
        except (BlobNotFound, ProofInvalid, UnicodeDecodeError):
            current_size = -1
        if size >= current_size:
            self.store.put(key, note.encode("utf-8"))


def _b64(value: bytes) -> str:
    import base64

    return base64.b64encode(value).decode("ascii")


def _record_metric(name: str, size: int) -> None:
    try:
        from consumers.observability.metrics import WITNESS_COSIGNED_SIZE
    except ImportError:  # prometheus-client is a server dependency; the log works without it
        return
    WITNESS_COSIGNED_SIZE.labels(witness=name).set(size)


def check_cosigned(
    store: BlobStore, prefix: str, *, log_key: LogKey, witnesses: Sequence[str], quorum: int
) -> tuple[Checkpoint, WitnessReport]:
    """The latest cosigned checkpoint, once its log signature, its sameness with the log's own
    checkpoint of that size and ``quorum`` of ``witnesses``' cosignatures verify; :class:`ProofInvalid`
    (or :class:`TransparencyLogError` when there is none) otherwise."""
    try:
        note = store.get(latest_cosigned_key(prefix)).decode("utf-8", "replace")
    except BlobNotFound as exc:
        raise TransparencyLogError(
            f"no cosigned checkpoint at {latest_cosigned_key(prefix)}: no witness has cosigned yet"
        ) from exc
    checkpoint = open_checkpoint(note, log_key)
    try:
        plain = store.get(history_key(prefix, checkpoint.size)).decode("utf-8", "replace")
    except BlobNotFound as exc:
        raise ProofInvalid(
            f"the cosigned checkpoint of {checkpoint.size} leaves is not in the log's history",
            part="checkpoint",
        ) from exc
    if open_checkpoint(plain, log_key) != checkpoint:
        raise ProofInvalid(
            f"the cosigned checkpoint of {checkpoint.size} leaves differs from the log's own",
            part="checkpoint",
        )
    return checkpoint, verify_witnesses(note, witnesses, quorum=quorum)

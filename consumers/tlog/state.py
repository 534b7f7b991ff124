"""The log's state object: the one thing its writers swap, and only by compare-and-swap (DESIGN 23).

``P/state`` (JSON) holds the tree's size and root, who writes it (``writer``, ``lease_until``) under
which fencing ``token``, the staged bundle of the last integration (the tiles that swap made part of
the log, applied by whoever reads the state next if their writer died before uploading them), and
``source``: how far the writer's input has been integrated (the leaves topic's next offset), so the
input position moves in the same swap as the tree. ``seq`` grows by one at every swap, so no two
states have the same bytes and an ETag never comes back (no ABA).

:class:`StateStore` reads it with its ETag and replaces it with ``If-Match`` (``If-None-Match: *`` for
the first one); a failed swap is :class:`~schemas.errors.WriterFenced`: someone else wrote since.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from schemas.errors import BlobConflict, BlobNotFound, TransparencyLogError, WriterFenced

if TYPE_CHECKING:
    from producers.blobstore import BlobStore

__all__ = ["EMPTY_ROOT", "LogState", "StateStore", "state_key"]

EMPTY_ROOT = hashlib.sha256(b"").digest()


def state_key(prefix: str) -> str:
    return f"{prefix}/state"


@dataclass(frozen=True, slots=True)
class LogState:
    """One version of the log's state (module docstring)."""

    size: int = 0
    root: bytes = EMPTY_ROOT
    seq: int = 0
    token: int = 0
    writer: str = ""
    lease_until: float = 0.0  # unix seconds: the writer's lease, renewed by every swap it makes
    staged: str | None = None
    source: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "size": self.size,
                "root": base64.b64encode(self.root).decode("ascii"),
                "seq": self.seq,
                "token": self.token,
                "writer": self.writer,
                "leaseUntil": self.lease_until,
                "staged": self.staged,
                "source": self.source,
            },
            sort_keys=True,
        ).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes, *, key: str) -> LogState:
        try:
            raw: dict[str, Any] = json.loads(data)
            return cls(
                size=int(raw["size"]),
                root=base64.b64decode(raw["root"], validate=True),
                seq=int(raw["seq"]),
                token=int(raw["token"]),
                writer=str(raw["writer"]),
                lease_until=float(raw["leaseUntil"]),
                staged=str(raw["staged"]) if raw.get("staged") else None,
                source={str(k): int(v) for k, v in dict(raw.get("source") or {}).items()},
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise TransparencyLogError(f"the log's state {key} is unreadable: {exc}") from exc

    def stamp(self) -> dict[str, str]:
        """Who writes under this state, as object metadata (every object a writer stores carries it)."""
        return {"blackbox-writer": self.writer, "blackbox-token": str(self.token)}

    def next(self, **changes: Any) -> LogState:
        """This state with ``changes`` and the next ``seq``."""
        return replace(self, seq=self.seq + 1, **changes)


class StateStore:
    """Read and compare-and-swap ``P/state``."""

    def __init__(self, store: BlobStore, prefix: str) -> None:
        self.store = store
        self.key = state_key(prefix)

    def read(self) -> tuple[LogState, str | None]:
        """The current state and its ETag; ``(LogState(), None)`` when the log has none yet."""
        try:
            tagged = self.store.get_tagged(self.key)
        except BlobNotFound:
            return LogState(), None
        return LogState.from_json(tagged.data, key=self.key), tagged.etag

    def swap(self, new: LogState, etag: str | None) -> str:
        """Replace the state read with ``etag`` (None: create the first); the new ETag."""
        try:
            return self.store.put_if(self.key, new.to_json(), etag=etag, metadata=new.stamp()).etag
        except BlobConflict as exc:
            raise WriterFenced(
                f"the log's state {self.key} changed since this writer read it (seq {new.seq - 1}): "
                "another writer holds the log"
            ) from exc

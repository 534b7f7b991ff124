"""Where replay reads captures from: a small seam with a directory-of-JSON implementation.

A :class:`CaptureSource` hands back one capture in the JSON form (the article's camelCase dict)
by decision id, and draws samples of past full captures for regression runs. The index + segment
source (one range GET + one zstd frame per capture) plugs in behind the same Protocol.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from consumers.privacy.ids import IndexIds
from consumers.privacy.manifest import signed_manifest
from consumers.replay.store import capture_row, sample_full
from schemas.errors import CaptureNotFound, ContractError

REPLAYABLE_LEVELS = frozenset({"full", "sampled"})


@runtime_checkable
class CaptureSource(Protocol):
    """Read captures in the JSON form."""

    def load(self, decision_id: str) -> dict[str, Any]:
        """The capture of ``decision_id``; :class:`CaptureNotFound` when there is none."""
        ...

    def sample(self, *, since: datetime | None, agent: str | None, n: int) -> list[str]:
        """Up to ``n`` decision ids of full captures (``full`` or ``sampled``), chosen reproducibly."""
        ...


class FileCaptureSource:
    """A directory of ``*.json`` captures (or explicit files), for tests, goldens and ``--file``.

    Files named ``<decisionId>.json`` are found directly; any other name is found by reading
    the ``decisionId`` inside it (the directory is scanned once, lazily).
    """

    def __init__(self, *paths: Path | str) -> None:
        self._paths = tuple(Path(p) for p in paths)
        self._by_id: dict[str, Path] | None = None

    def load(self, decision_id: str) -> dict[str, Any]:
        for root in self._paths:
            direct = root / f"{decision_id}.json"
            if _plain_name(decision_id) and root.is_dir() and direct.is_file():
                capture = _read(direct)
                if capture.get("decisionId") == decision_id:
                    return capture
        path = self._index().get(decision_id)
        if path is None:
            raise CaptureNotFound(f"no capture for decision {decision_id!r} in {self._describe()}")
        return _read(path)

    def sample(self, *, since: datetime | None, agent: str | None, n: int) -> list[str]:
        if since is not None and since.tzinfo is None:
            since = since.replace(tzinfo=UTC)
        eligible: list[str] = []
        for path in self._files():
            capture = _read(path)
            if capture.get("captureLevel", "full") not in REPLAYABLE_LEVELS:
                continue
            if agent is not None and capture.get("agentId") != agent:
                continue
            if since is not None and _parse_time(capture.get("capturedAt")) < since:
                continue
            eligible.append(str(capture["decisionId"]))
        # Deterministic sample: ordered by a hash of the id, so reruns replay the same decisions.
        eligible.sort(key=lambda d: hashlib.sha256(d.encode("utf-8")).digest())
        return eligible[:n]

    def _index(self) -> dict[str, Path]:
        if self._by_id is None:
            self._by_id = {}
            for path in self._files():
                decision_id = _read(path).get("decisionId")
                if isinstance(decision_id, str):
                    self._by_id.setdefault(decision_id, path)
        return self._by_id

    def _files(self) -> Iterator[Path]:
        for root in self._paths:
            if root.is_dir():
                yield from sorted(root.glob("*.json"))
            elif root.is_file():
                yield root

    def _describe(self) -> str:
        return ", ".join(str(p) for p in self._paths) or "no paths"


def _plain_name(decision_id: str) -> bool:
    """A decision id usable as a file name (no separators, no leading dot): never a path outside the root."""
    return (
        bool(decision_id)
        and "/" not in decision_id
        and "\\" not in decision_id
        and not decision_id.startswith(".")
    )


def _read(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ContractError(f"cannot read capture file {path}: {exc}") from exc
    if not isinstance(value, dict):
        raise ContractError(f"capture file {path} does not hold a JSON object")
    return value


def _parse_time(value: object) -> datetime:
    if not isinstance(value, str):
        raise ContractError("capturedAt is missing", path="capturedAt")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ContractError(f"not an ISO-8601 time: {value!r}", path="capturedAt") from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


class IndexedCaptureSource:
    """Captures where ingest put them: the index row names (segment key, offset, length); one range
    GET, a check against the row's content hash (``consumers.storage.reader.read_stored``), one zstd
    frame, decoded to the JSON form.

    A decision compacted to metadata-only has no frame left: its signed manifest (kept in the index
    row) comes back instead, so replay can say precisely what is gone and what remains. Quarantined
    captures are not served (they are not trusted evidence; ``blackbox show`` displays them). The
    source does not gate: the :class:`~consumers.replay.replayer.Replayer` passes every read through
    the access gate itself.
    """

    def __init__(self, index: Any, blobs: Any, ids: IndexIds | None = None) -> None:
        self._index = index
        self._blobs = blobs
        self._ids = ids  # unseals the origin ids of the index's manifest (consumers.privacy.manifest)

    def load(self, decision_id: str) -> dict[str, Any]:
        from consumers.storage.reader import read_stored
        from schemas.codec import decode
        from schemas.errors import DecodeError

        row = capture_row(self._index, decision_id)
        if row is None:
            raise CaptureNotFound(f"decision {decision_id!r} is not in the index")
        if row.get("content_state") == "metadata-only" or not row.get("segment_key"):
            manifest = signed_manifest(str(row.get("manifest_json") or ""), self._ids)
            if not manifest:
                raise CaptureNotFound(f"decision {decision_id!r} has neither content nor a manifest")
            return manifest
        data = read_stored(self._blobs, row)
        try:
            return decode(data).value
        except DecodeError as exc:
            raise ContractError(f"stored capture of {decision_id} does not decode: {exc}") from exc

    def sample(self, *, since: datetime | None, agent: str | None, n: int) -> list[str]:
        return sample_full(self._index, since=since, agent=agent, n=n)

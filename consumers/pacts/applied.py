"""The pact set ingest judges by: the applied version in the shared blob store, re-read when it changes.

Every ingest host calls the same :class:`AppliedPactSource` once per batch. The check is one GET of the
small pointer object (``pacts/applied.json``); only when its bytes change is the version loaded and its
signature verified again, so a version applied while ingest runs judges the next batch, on every host,
without a restart. Before any version is applied, the local pacts file (``BLACKBOX_PACTS``) is used and
its rows name no version (``pact_version = ''``).

A pointer that names a version which does not verify (tampered, untrusted key) is logged as an error
and ingest keeps judging by the version it had: ingest never stops, and never silently drops to no
rules because an object was altered.

With the transparency log on, the pointer is also checked against the log (``in_force``,
:func:`consumers.pacts.logged.in_force`): one that is not the log's latest apply byte for byte (rolled
back to an older signed version, or never logged) is reported and the log's latest apply judges
instead. A check that could not run (the index unreachable) is tried again at the next batch.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from consumers.pacts.versions import APPLIED_KEY, PactVersionError, load_version, parse_pointer
from consumers.terminal import clean  # the pointer is bucket content: its text is escaped in logs
from producers.blobstore import BlobNotFound, BlobStore
from producers.evidence import TrustStore
from producers.pacts.book import PactBook
from schemas.errors import BlackboxError

if TYPE_CHECKING:
    from consumers.pacts.logged import InForce

__all__ = ["AppliedPactSource", "AppliedPacts"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AppliedPacts:
    """The rules in force and the version that holds them (``''``: the local file, no version)."""

    book: PactBook
    version: str = ""


class AppliedPactSource:
    """Callable once per batch: the applied pact version, reloaded only when the pointer changed."""

    def __init__(
        self,
        store: BlobStore,
        *,
        trust: TrustStore | Callable[[], TrustStore],
        fallback: PactBook | None = None,
        in_force: Callable[[Mapping[str, Any]], InForce] | None = None,
    ) -> None:
        self._store = store
        self._trust = trust
        self._in_force = in_force
        self._current = AppliedPacts(book=fallback or PactBook())
        self._seen: bytes | None = None
        self.loads = 0  # versions loaded and verified (the cheap path does not count)

    def __call__(self) -> AppliedPacts:
        try:
            raw = self._store.get(APPLIED_KEY)
        except BlobNotFound:
            return self._current
        except BlackboxError as exc:  # the store is down: the batch will fail on its own writes
            logger.warning("pact pointer %s unreadable, keeping %s: %s", APPLIED_KEY, self._label(), exc)
            return self._current
        if raw == self._seen:
            return self._current
        self._seen = raw
        try:
            pointer = parse_pointer(raw)
            named = pointer.version
            if self._in_force is not None:
                verdict = self._in_force(json.loads(raw))
                if verdict.refused is not None:
                    logger.error("applied pact pointer not obeyed: %s", clean(verdict.refused))
                    if verdict.version is None or verdict.version == self._current.version:
                        return self._current
                    named = verdict.version
            trust = self._trust() if callable(self._trust) else self._trust
            version = load_version(self._store, named, trust)
        except PactVersionError as exc:
            logger.error("applied pact version refused, still judging by %s: %s", self._label(), clean(exc))
            return self._current
        except BlackboxError as exc:  # the store or the index: try again at the next batch
            self._seen = None
            logger.warning(
                "applied pact version not checked, still judging by %s: %s", self._label(), clean(exc)
            )
            return self._current
        self.loads += 1
        self._current = AppliedPacts(book=version.book, version=version.version)
        logger.info("judging by pact version %s (%d rule(s))", version.version, len(version.book))
        return self._current

    def _label(self) -> str:
        return self._current.version or "the local pacts file"

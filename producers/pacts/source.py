"""The pact version an agent's runtime judges by: read from a file or a URL the operator gives,
verified against the operator's pact trust, loaded and refreshed off the agent's thread.

The location holds one signed pact version document (:mod:`producers.pacts.signed`; the object
``blackbox pact propose`` stores under ``pacts/versions/``), typically the one the operator applied.
A thread of its own (``blackbox-pact-<agent>``) reads it when the recorder starts and again every
``refresh`` seconds; a URL (``http://`` or ``https://``) is fetched with a ``timeout``. Only when the
bytes change is the document verified again, so the operator applies a new version by putting it at
the same place. Nothing here ever runs on, or waits in, the agent's thread: until the first version
is loaded, decisions are judged by none.

Trust comes only from the operator (``trust``): a :class:`~producers.evidence.TrustStore`, a trust
store file (TOML, as ``blackbox keys`` writes it) or one public key file (PEM, or base64 of the raw
key); never from the document itself. A document that cannot be read, does not verify under that
trust, was altered, holds a rule that does not compile, or needs the CEL engine that is not installed
(``agent-blackbox[pacts]``), is refused through ``on_refused``, once per distinct reason; the runtime
keeps the version it had.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from producers.evidence.keys import public_key_from, public_raw
from producers.evidence.trust import TrustStore
from producers.pacts.judge import AppliedVersion
from producers.pacts.signed import PactVersionError, open_version
from schemas.errors import BlackboxError, PactRefused

__all__ = ["MAX_DOCUMENT_BYTES", "PactSource", "load_pact_trust"]

log = logging.getLogger(__name__)

MAX_DOCUMENT_BYTES = 4 * 1024 * 1024
"""A larger answer is refused unread: a pact document is a few kilobytes."""


def load_pact_trust(trust: TrustStore | str | Path) -> TrustStore:
    """The operator's pact trust: a store as given, a trust store file (``.toml``) or one public key
    file (PEM or base64), trusted for any signing time (:class:`PactRefused` when unreadable)."""
    if isinstance(trust, TrustStore):
        return trust
    path = Path(trust)
    try:
        if path.suffix == ".toml":
            return TrustStore.load(path)
        store = TrustStore()
        store.add(
            public_raw(public_key_from(path)), not_before=datetime(1970, 1, 1, tzinfo=UTC), note=str(path)
        )
        return store
    except (BlackboxError, OSError, ValueError) as exc:
        raise PactRefused(f"the pact trust {path} cannot be used: {exc}") from exc


class PactSource:
    """The applied pact version for one agent, kept current by a background thread.

    ``current`` is read by the recorder's worker for each decision: an immutable value swapped whole.
    """

    def __init__(
        self,
        location: str | Path,
        *,
        trust: TrustStore | str | Path,
        agent_id: str,
        on_refused: Callable[[PactRefused], None],
        refresh: float = 60.0,
        timeout: float = 5.0,
    ) -> None:
        self.location = str(location)
        self._is_url = self.location.startswith(("http://", "https://"))
        self._trust_given = trust
        self._agent_id = agent_id
        self._on_refused = on_refused
        self._refresh = refresh
        self._timeout = timeout
        self._current: AppliedVersion | None = None
        self._seen: bytes | None = None
        self._last_refusal = ""
        self._stop = threading.Event()
        self._first = threading.Event()
        self._thread: threading.Thread | None = None
        self.loads = 0  # versions verified and taken (an unchanged document does not count)

    @property
    def current(self) -> AppliedVersion | None:
        """The version in force, or None before one was loaded."""
        return self._current

    def start(self) -> None:
        """Read the document now and every ``refresh`` seconds, on a daemon thread of its own."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name=f"blackbox-pact-{self._agent_id}", daemon=True
            )
            self._thread.start()

    def wait_loaded(self, timeout: float) -> bool:
        """Wait until the first read finished (loaded or refused); True if it did in time. For an
        operator's start-up check or a test, never for the agent's thread."""
        return self._first.wait(timeout)

    def close(self, timeout: float = 1.0) -> None:
        """Stop refreshing (an in-flight fetch ends within its own timeout)."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def refresh_now(self) -> AppliedVersion | None:
        """Read the document once, on the caller's thread (the background thread does this itself)."""
        try:
            raw = self._read()
            if raw != self._seen:
                self._take(raw)
                self._seen = raw
            self._last_refusal = ""
        except PactRefused as exc:
            self._refuse(exc)
        except Exception as exc:  # a last line of defence: the thread must keep running
            self._refuse(PactRefused(f"pact {self.location}: {type(exc).__name__}: {exc}"))
        return self._current

    def _run(self) -> None:
        while not self._stop.is_set():
            self.refresh_now()
            self._first.set()
            if self._stop.wait(self._refresh):
                return

    def _read(self) -> bytes:
        if not self._is_url:
            try:
                with open(self.location, "rb") as handle:
                    raw = handle.read(MAX_DOCUMENT_BYTES + 1)
            except OSError as exc:
                raise PactRefused(f"pact {self.location} cannot be read: {exc}") from exc
        else:
            request = urllib.request.Request(self.location, headers={"Accept": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=self._timeout) as response:
                    raw = response.read(MAX_DOCUMENT_BYTES + 1)
            except (urllib.error.URLError, OSError, ValueError) as exc:
                raise PactRefused(f"pact {self.location} cannot be fetched: {exc}") from exc
        if len(raw) > MAX_DOCUMENT_BYTES:
            raise PactRefused(f"pact {self.location} is larger than {MAX_DOCUMENT_BYTES} bytes")
        return raw

    def _take(self, raw: bytes) -> None:
        trust = load_pact_trust(self._trust_given)  # re-read with the document: keys rotate
        try:
            version = open_version(raw, trust, where=f"pact {self.location}")
        except PactVersionError as exc:
            raise PactRefused(f"{exc}; still judging by {self._label()}") from exc
        book = version.book
        binds = book.binds(self._agent_id)
        self._current = AppliedVersion(
            version=version.version, binds=binds, rules=book.consequential_when if binds else ()
        )
        self.loads += 1
        if binds:
            log.info(
                "agent %s judged by pact version %s (%d consequential_when rule(s))",
                self._agent_id,
                version.version,
                len(book.consequential_when),
            )
        else:
            log.warning(
                "pact version %s does not bind agent %s (agents: %s): no consequential_when rule applies",
                version.version,
                self._agent_id,
                ", ".join(book.agents),
            )

    def _refuse(self, error: PactRefused) -> None:
        message = str(error)
        if message == self._last_refusal:  # the same reason at every refresh is said once
            return
        self._last_refusal = message
        with contextlib.suppress(Exception):  # the callback reports; it never stops the thread
            self._on_refused(error)

    def _label(self) -> str:
        current = self._current
        return f"pact version {current.version}" if current else "no pact version"

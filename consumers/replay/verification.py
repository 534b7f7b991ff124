"""Verification before replay: a capture that is not evidence is refused, or replayed marked unverified.

The seam is one method, ``verify(capture) -> key id``, raising a :class:`VerificationError`
(subclass names the failure, ``part`` names where). :class:`EvidenceVerifier` is the real one:
``producers.evidence.verify_capture`` against the configured trust store.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol


class Verifier(Protocol):
    def verify(self, capture: Mapping[str, Any]) -> str:
        """The signing key id of a capture that verifies; raise ``VerificationError`` otherwise."""
        ...


class EvidenceVerifier:
    """Signature, content hashes and key validity, by ``producers.evidence`` and a trust store."""

    def __init__(self, trust: Any) -> None:
        self._trust = trust

    @classmethod
    def from_path(cls, path: Path) -> EvidenceVerifier:
        from producers.evidence import TrustStore

        return cls(TrustStore.load(path, missing_ok=True))

    def verify(self, capture: Mapping[str, Any]) -> str:
        from producers.evidence import verify_capture

        report = verify_capture(dict(capture), self._trust)
        return str(report.key_id)

"""The read-time verdict on a stored capture: what ``show`` and ``verify`` print and exit by.

A verdict is computed when the capture is read, from the bytes read and the trust store as it is
now; the ``trust`` column written at ingest is history, never the answer. Three outcomes:

- ``verified``: signature, key (window and revocation, checked now), every present content hash,
  the working-set root and the index rows all agree. A structured-only or compacted capture can be
  verified: its absent parts are listed (their hashes are signed, their content is not there).
- ``not-verified``: something fails, and ``part`` names it: a content path, ``signature``, ``key``
  (unknown, out of window, revoked), ``segment`` (missing, truncated, does not decompress, not the
  bytes the index recorded), ``index.<table>.<column>``, ``quarantine``.
- ``expired``: the retention policy deleted the content *and* the manifest (logged in the deletions
  log); nothing is left to verify. Not tampering, not an error.

Exit codes of ``blackbox show`` and ``blackbox verify`` (:data:`EXIT_CODES`): 0 verified, 1 not
verified, 3 expired; 2 stays what it is for every command, a usage or operational error (no trust
store, an unreadable index, an unreachable blob store, no such decision).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from producers.evidence.trust import format_time
from schemas.errors import VerificationError

Status = Literal["verified", "not-verified", "expired"]

EXIT_VERIFIED = 0
EXIT_NOT_VERIFIED = 1
EXIT_ERROR = 2  # what consumers/cli.py:main exits with for any BlackboxError
EXIT_EXPIRED = 3
EXIT_CODES: dict[Status, int] = {
    "verified": EXIT_VERIFIED,
    "not-verified": EXIT_NOT_VERIFIED,
    "expired": EXIT_EXPIRED,
}
EXIT_CODES_HELP = (
    "Exit codes: 0 verified; 1 NOT VERIFIED (tampered, missing or corrupt segment, key unknown or "
    "revoked, unsigned, quarantined); 2 usage or operational error; 3 expired (deleted by retention)."
)


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether one stored capture is evidence, decided at read time (module docstring)."""

    decision_id: str
    status: Status
    checked_at: datetime
    content_state: str = ""
    part: str = ""  # what failed (not-verified) - empty otherwise
    error: str = ""  # the failure's class name: ContentHashMismatch, KeyNotTrusted, SegmentMissing...
    reason: str = ""
    key_id: str = ""
    checked_parts: int = 0
    absent_parts: tuple[str, ...] = ()
    tampering: tuple[str, ...] = ()  # what lies over the sealed segment version (consumers.storage.versions)

    @classmethod
    def failed(
        cls, decision_id: str, exc: VerificationError, *, checked_at: datetime, content_state: str = ""
    ) -> Verdict:
        """The verdict a verification failure amounts to (its part, class and message)."""
        return cls(
            decision_id=decision_id,
            status="not-verified",
            checked_at=checked_at,
            content_state=content_state,
            part=exc.part,
            error=type(exc).__name__,
            reason=str(exc).removeprefix(f"{exc.part}: "),
        )

    @property
    def verified(self) -> bool:
        return self.status == "verified"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    def line(self) -> str:
        """One line that says the verdict plainly (what ``verify`` prints; ``show`` leads with it)."""
        if self.status == "verified":
            where = f"; stored {self.content_state}" if self.content_state else ""
            return (
                f"verified: {self.decision_id} key={self.key_id} ({self.checked_parts} parts{where}; "
                "index rows match)"
            )
        if self.status == "expired":
            return f"EXPIRED: {self.decision_id}: {self.reason}"
        return f"NOT VERIFIED: {self.decision_id} part={self.part} ({self.error}): {self.reason}"

    def absent(self) -> str:
        """Short: what a verified verdict does not cover (content not there to check), or ``""``."""
        if self.status != "verified" or not self.absent_parts:
            return ""
        why = {
            "structured-only": "structured-only: content not captured",
            "metadata-only": "content compacted",
        }.get(self.content_state, "content absent")
        return f"{why}; {len(self.absent_parts)} hashes kept, not checked"

    def notes(self) -> list[str]:
        """The absent parts by name and any tampering with the stored objects, for ``verify``."""
        absent = (
            [f"absent content ({self.absent()}): {', '.join(self.absent_parts)}"] if self.absent() else []
        )
        return [*self.tampering, *absent]

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.status,
            "checkedAt": format_time(self.checked_at),
            "part": self.part or None,
            "error": self.error or None,
            "reason": self.reason or None,
            "keyId": self.key_id or None,
            "checkedParts": self.checked_parts,
            "absentParts": list(self.absent_parts),
            "tampering": list(self.tampering),
            "exitCode": self.exit_code,
        }

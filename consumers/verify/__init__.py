"""Verify: whether a stored capture is evidence, decided when it is read (``show`` and ``verify``).

Above :mod:`consumers.storage` (which reads the bytes back intact) and below the commands: the
verdict needs the evidence verifier, the trust store and the index-row derivation, none of which
ingest, retention or replay need from storage.

- :mod:`~consumers.verify.stored` — verify a stored capture and its index rows; ``judge_shown`` for ``show``
- :mod:`~consumers.verify.verdict` — the read-time :class:`Verdict` and the exit codes of ``show``/``verify``
"""

from consumers.verify.stored import (
    IndexRowMismatch,
    StoredVerification,
    judge_shown,
    stored_verdict,
    verify_stored,
)
from consumers.verify.verdict import Verdict

__all__ = [
    "IndexRowMismatch",
    "StoredVerification",
    "Verdict",
    "judge_shown",
    "stored_verdict",
    "verify_stored",
]

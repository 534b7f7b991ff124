"""Personal data at capture (DESIGN decision 16): redact, seal the original, say what was done.

:meth:`Redactor.protect` runs in the producer before a capture is sealed and leaves the runtime, so
no copy anywhere (topic, spool, segments, index) holds the original in the clear:

1. every content part is redacted (:mod:`producers.privacy.redact`);
2. a fresh data key is issued and its wrapped form stored (:class:`~producers.privacy.keys.Vault`),
   then the original parts are sealed with it into ``privacy.sealedOriginal``
   (:mod:`producers.privacy.envelope`);
3. ``privacy`` records the detectors, each redaction and the keyed hashes of the originals, and
   ``replayPolicy.piiRedacted`` becomes true. Sealing then signs all of it: the redacted parts'
   hashes, the original hashes and the sealed original's hash.
4. with a vault, the identifiers of people (``input.originUserId``, ``input.originSessionId``) are
   replaced by salted commitments, their raw values sealed beside the original and in the key record
   (:mod:`producers.privacy.identifiers`), even when no content was redacted.

Nothing found and no identifier to commit: no ``privacy`` section, ``piiRedacted`` false - the flag
says exactly whether content was redacted. A capture that already has a ``privacy`` section was protected before (a
flagged decision's held capture, a capture file sealed by ``blackbox capture``) and is left as it is.
Without a vault the original is not kept at all (the keyed hashes are then unverifiable by anyone).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from producers.privacy.detectors import Detector, PatternDetector, PresidioDetector, builtin_detectors
from producers.privacy.envelope import CIPHER, keyed_hash, new_salt, seal_original
from producers.privacy.identifiers import commit_identifiers, raw_identifiers
from producers.privacy.keys import DataKeyStore, LocalKeyFile, Vault
from producers.privacy.redact import redact_capture

if TYPE_CHECKING:
    from producers.blobstore import BlobStore
    from producers.settings import BlackboxSettings

__all__ = ["RedactMode", "RedactPatterns", "Redactor", "vault_from_settings"]

log = logging.getLogger(__name__)

RedactMode = Literal["builtin", "off", "presidio"]
RedactPatterns = Mapping[str, "str | re.Pattern[str]"] | Sequence["str | re.Pattern[str]"]


class Redactor:
    """Detectors plus (optionally) the vault that keeps the originals sealed."""

    def __init__(self, *, detectors: Sequence[Detector], vault: Vault | None, label: str) -> None:
        self.detectors = tuple(detectors)
        self.vault = vault
        self.label = label

    @classmethod
    def create(
        cls,
        mode: RedactMode = "builtin",
        *,
        patterns: RedactPatterns | None = None,
        vault: Vault | None = None,
        presidio_analyzer: Any = None,
    ) -> Redactor | None:
        """The redactor for ``mode`` (None for ``off``): the built-in detectors, the runtime's
        ``patterns``, and for ``presidio`` Presidio's analyzer as well."""
        if mode == "off":
            return None
        detectors: list[Detector] = list(builtin_detectors())
        labels = ["builtin"]
        if patterns:
            detectors.append(PatternDetector(patterns))
            labels.append("patterns")
        if mode == "presidio":
            detectors.append(PresidioDetector(presidio_analyzer))
            labels.append("presidio")
        if vault is None:
            log.warning(
                "redaction is on but no key store is configured: originals are redacted and not kept "
                "(Recorder.from_settings keeps them sealed; or pass vault=...)"
            )
        return cls(detectors=detectors, vault=vault, label="+".join(labels))

    def protect(self, capture: dict[str, Any], *, owned: bool) -> dict[str, Any]:
        """``capture`` redacted, its identifiers of people committed and its original sealed (see the
        module docstring).

        ``owned=True`` may change ``capture`` in place; otherwise a changed capture is a copy.
        """
        if capture.get("privacy") is not None:
            return capture
        result = redact_capture(capture, self.detectors, owned=owned)
        # identifiers of people are committed only where their raw value can be kept (sealed, erasable)
        ids = raw_identifiers(capture) if self.vault is not None else {}
        if result is None and not ids:
            return _set_flag(capture, False, owned=owned)
        redacted = result.capture if result is not None else (capture if owned else dict(capture))
        decision_id = redacted["decisionId"]
        salt = new_salt()
        commit_identifiers(redacted, ids, salt=salt)
        privacy: dict[str, Any] = {
            "detectors": self.label,
            "redactions": [r.to_json() for r in result.redactions] if result is not None else [],
            "originalHashes": [
                {"part": part, "hash": keyed_hash(salt, digest)}
                for part, digest in (result.original_hashes.items() if result is not None else ())
            ],
            "cipher": None,
            "sealedOriginal": None,
            "sealedOriginalHash": None,
        }
        if self.vault is not None:
            data_key = self.vault.issue(decision_id, ids=ids, salt=salt)
            privacy["cipher"] = CIPHER
            privacy["sealedOriginal"] = seal_original(
                result.originals if result is not None else {},
                spans=result.original_spans if result is not None else {},
                salt=salt,
                data_key=data_key,
                decision_id=decision_id,
                ids=ids,
            )
        redacted["privacy"] = privacy
        # the flag says whether content was redacted; committed identifiers alone do not set it
        return _set_flag(redacted, result is not None, owned=True)


def _set_flag(capture: dict[str, Any], redacted: bool, *, owned: bool) -> dict[str, Any]:
    policy = capture.get("replayPolicy")
    if not isinstance(policy, dict) or policy.get("piiRedacted") is redacted:
        return capture
    if not owned:
        capture = dict(capture)
    capture["replayPolicy"] = {**policy, "piiRedacted": redacted}
    return capture


def vault_from_settings(settings: BlackboxSettings, blob_store: BlobStore) -> Vault:
    """The local key file ``BLACKBOX_KEK_FILE`` (created on first use) over key records in ``blob_store``."""
    return Vault(kek=LocalKeyFile(settings.resolved_kek_file), keys=DataKeyStore(blob_store))

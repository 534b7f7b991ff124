"""The one exception tree of blackbox.

Every package raises subclasses of :class:`BlackboxError`; library errors are wrapped
with ``raise ... from exc`` so callers never need to know which library failed.
"""

from __future__ import annotations


class BlackboxError(Exception):
    """Root of every error blackbox raises on purpose."""


class SettingsInvalid(BlackboxError):
    """A ``BLACKBOX_*`` setting has a value that is not allowed; the message names it, the value given
    and what is allowed."""


class NativeCoreUnavailable(BlackboxError):
    """``BLACKBOX_NATIVE=require`` and the native evidence core could not be loaded (the message
    says why)."""


class DataDirMissing(BlackboxError):
    """A read command was pointed at a data directory (or embedded index) that does not exist."""


# --- the contract -------------------------------------------------------------------------
class ContractError(BlackboxError):
    """Input does not satisfy the replay/v1 contract; ``path`` names the offending field."""

    def __init__(self, message: str, *, path: str = "") -> None:
        self.path = path
        super().__init__(f"{path}: {message}" if path else message)


class Unrecordable(ContractError):
    """Values given to the recorder could not be recorded as given; the capture was made with
    markers in their place (``producers/unrecordable.py``) and names them."""


class ContentNotHeld(BlackboxError):
    """A flag was sent, but the flight recorder no longer holds (or never held) the decision's
    content, so it stays structured-only downstream; the message says why (``producers/flight.py``)."""


class FailurePredicateFailed(BlackboxError):
    """The runtime's ``failure_when`` predicate raised; the decision was captured as the capture
    policy decided."""


class PactRefused(BlackboxError):
    """The pact version the runtime was given cannot be used (unreadable, unsigned or signed by a key
    the operator's pact trust does not hold, altered, a rule that does not compile, no CEL engine); the
    runtime keeps judging by the version it had, or by none. The message says which and why."""


class PactRuleFailed(BlackboxError):
    """A ``consequential_when`` rule could not be evaluated on one decision; the other rules still ran
    and the decision was captured as they and the capture policy decided."""


class SerializationError(BlackboxError):
    """A record could not be encoded to Avro."""


class DecodeError(BlackboxError):
    """Bytes could not be decoded as a blackbox message (truncated, bad magic, bad body)."""


class UnknownFingerprint(DecodeError):
    """The single-object fingerprint names no writer schema known in ``schemas/``."""


# --- evidence ----------------------------------------------------------------------------
class VerificationError(BlackboxError):
    """A capture is not evidence: ``part`` names what failed (a content path, 'signature', 'key')."""

    def __init__(self, message: str, *, part: str = "") -> None:
        self.part = part
        super().__init__(f"{part}: {message}" if part else message)


class ContentHashMismatch(VerificationError):
    """A content part's bytes do not hash to the hash recorded in the manifest."""


class SignatureInvalid(VerificationError):
    """The manifest signature does not verify (manifest tampered, or the wrong key)."""


class KeyNotTrusted(VerificationError):
    """The signing key is unknown to the trust store, outside its validity window, or revoked."""


class KeyNotAuthorizedForAgent(KeyNotTrusted):
    """A trusted key signed for an agent id outside the agents its trust record names."""

    def __init__(self, message: str, *, key_id: str, agent_id: str, part: str = "agentId") -> None:
        self.key_id = key_id
        self.agent_id = agent_id
        super().__init__(message, part=part)


class UnknownAlgorithm(VerificationError):
    """The capture names a signature or hash algorithm blackbox does not implement."""


# --- transport and storage -----------------------------------------------------------------
class TransportError(BlackboxError):
    """A capture could not be handed to, or delivered by, the transport."""


class QueueFull(TransportError):
    """The recorder's bounded queue stayed full past the policy's timeout."""


class BlobStoreError(BlackboxError):
    """The blob store failed to put, get or delete an object."""


class BlobLocked(BlobStoreError):
    """S3 Object Lock (retention until a date, or a legal hold) refuses deleting an object."""


class BlobNotFound(BlobStoreError):
    """The requested blob key does not exist."""


class BlobConflict(BlobStoreError):
    """A conditional write's precondition did not hold: the key already exists (create-only), or its
    current version is not the one named (compare-and-swap)."""


class IndexError_(BlackboxError):
    """The ClickHouse index failed (DDL, insert or query)."""


class CaptureNotFound(BlackboxError):
    """No decision with this id is in the index."""


class ConflictingDuplicate(BlackboxError):
    """The same decision id arrived with different content; it is quarantined, never merged."""


# --- retention -------------------------------------------------------------------------------
class RetentionError(BlackboxError):
    """A retention policy is invalid or a retention job could not complete."""


class LegalHoldActive(RetentionError):
    """The decision is under legal hold; compaction and expiry are blocked."""


# --- access and replay -----------------------------------------------------------------------
class AccessDenied(BlackboxError):
    """The caller's scope does not allow this read, or the access log could not be written."""


class CaptureNotReplayable(BlackboxError):
    """The capture lacks the content a replay needs (structured-only or compacted)."""


class ReplayDivergence(BlackboxError):
    """Replay asked for something the recording does not contain (an unrecorded tool call)."""

    def __init__(self, message: str, *, step: int, call: object = None) -> None:
        self.step = step
        self.call = call
        super().__init__(f"step {step}: {message}")


class ModelClientError(BlackboxError):
    """The model endpoint failed or answered something that is not a chat completion."""


class ModelNotFound(ModelClientError):
    """The endpoint does not serve the requested model (version retired, or never mirrored)."""

    def __init__(self, message: str, *, model: str) -> None:
        self.model = model
        super().__init__(message)


# --- transparency log ------------------------------------------------------------------------
class ProofInvalid(VerificationError):
    """A transparency-log proof, checkpoint or signed note does not verify; ``part`` names which
    (``checkpoint``, ``leaf``, ``inclusion``, ``consistency``)."""


class TransparencyLogError(BlackboxError):
    """The transparency log cannot be read, appended to or checkpointed (``consumers.tlog``)."""


class WriterFenced(TransparencyLogError):
    """This log writer lost the log: its compare-and-swap of the state failed or its lease ran out, so it
    stopped writing (it reloads before writing again)."""


class TileConflict(TransparencyLogError):
    """A write-once tile, entry bundle or checkpoint already holds other bytes than the writer's: the log
    forked or was tampered with. The writer stops; the object is named."""


class LeaseHeld(BlackboxError):
    """Another process holds the lease this one needs (a log writer's, or a retention writer's)."""

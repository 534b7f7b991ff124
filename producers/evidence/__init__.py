"""Evidence: content hashes, the signed manifest, the working-set Merkle root, keys and trust.

DESIGN decisions 1-4. A capture is sealed once, on the producer (:func:`seal`), and verified
wherever it is read (:func:`verify_capture`). Module map:

- :mod:`~producers.evidence.canonical` — RFC 8785 bytes (fast path + ``rfc8785``), ``sha256:`` hashes
- :mod:`~producers.evidence.parts` — which fields are content, their kind, hash field and path
- :mod:`~producers.evidence.manifest` — the signed manifest and its bytes
- :mod:`~producers.evidence.merkle` — RFC 6962 tree hash and the working-set root
- :mod:`~producers.evidence.payload` — manifest bytes and Merkle leaves in one encoding (hot path)
- :mod:`~producers.evidence.dsse` — DSSE v1 PAE and envelope
- :mod:`~producers.evidence.keys` — :class:`Signer`, key files, key ids
- :mod:`~producers.evidence.trust` — :class:`TrustStore` (validity windows, revocation)
- :mod:`~producers.evidence.seal` / :mod:`~producers.evidence.verify` — the two entry points
- :mod:`~producers.evidence.events` — flag events: the builder, signing and verifying
"""

from producers.evidence.canonical import canonical_json, content_hash, json_hash, text_hash
from producers.evidence.dsse import pae
from producers.evidence.events import (
    FLAG_PAYLOAD_TYPE,
    flag_event,
    sign_event,
    sign_flag,
    verify_event,
    verify_flag,
)
from producers.evidence.keys import (
    Signer,
    generate_keypair,
    key_id,
    key_id_from_ref,
    load_signer,
    public_key_from,
    public_raw,
)
from producers.evidence.manifest import MANIFEST_PAYLOAD_TYPE, manifest, manifest_bytes
from producers.evidence.merkle import (
    CONTEXT_SET_ALGORITHM,
    context_set_hash,
    merkle_root,
    working_set_leaves,
    working_set_root,
)
from producers.evidence.parts import PART_FIELDS, PartField, content_parts, iter_parts
from producers.evidence.seal import SIGNATURE_ALGORITHM, seal
from producers.evidence.trust import TrustedKey, TrustStore
from producers.evidence.verify import VerificationReport, verify_capture

__all__ = [
    "CONTEXT_SET_ALGORITHM",
    "FLAG_PAYLOAD_TYPE",
    "MANIFEST_PAYLOAD_TYPE",
    "PART_FIELDS",
    "SIGNATURE_ALGORITHM",
    "PartField",
    "Signer",
    "TrustStore",
    "TrustedKey",
    "VerificationReport",
    "canonical_json",
    "content_hash",
    "content_parts",
    "context_set_hash",
    "flag_event",
    "generate_keypair",
    "iter_parts",
    "json_hash",
    "key_id",
    "key_id_from_ref",
    "load_signer",
    "manifest",
    "manifest_bytes",
    "merkle_root",
    "pae",
    "public_key_from",
    "public_raw",
    "seal",
    "sign_event",
    "sign_flag",
    "text_hash",
    "verify_capture",
    "verify_event",
    "verify_flag",
    "working_set_leaves",
    "working_set_root",
]

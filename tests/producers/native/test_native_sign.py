"""Native ed25519 signing (src/sign.rs) against ``cryptography``, the reference signer.

Ed25519 is deterministic (RFC 8032 §5.1.6): the same seed and message give the same 64 bytes, so
the core must give exactly ``cryptography``'s signature, for every key and message, and the
:class:`~producers.evidence.keys.Signer` must use it only when loaded and in agreement.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from native_testing import native_mode

from producers.evidence.keys import Signer, _native_key

KEYS = 300
MESSAGES = 10  # per key: 3,000 signatures


def _message(rng: random.Random) -> bytes:
    size = rng.choice([0, 1, 31, 32, 64, 1_000, 3_000, 70_000])
    return rng.randbytes(size)


def test_native_signatures_are_cryptographys(core: Any) -> None:
    rng = random.Random(0x5EED)
    for _ in range(KEYS):
        seed = rng.randbytes(32)
        reference = Ed25519PrivateKey.from_private_bytes(seed)
        key = core.SigningKey(seed)
        assert key.public_raw() == Signer(reference).public_raw
        for _ in range(MESSAGES):
            message = _message(rng)
            signature = key.sign(message)
            assert signature == reference.sign(message)
            reference.public_key().verify(signature, message)  # raises if it does not verify


def test_the_signer_signs_natively_only_with_the_core_loaded(core: Any) -> None:
    signer = Signer(Ed25519PrivateKey.generate())
    message = b"the signed manifest"
    with native_mode("off"):
        assert signer.sign(message) == signer._private.sign(message)
        assert signer._native is None  # the core was never asked
    with native_mode("require") as loaded:
        assert signer.sign(message) == signer._private.sign(message)
        assert signer._native is not None and signer._native[0] is loaded
        assert type(signer._native[1]).__name__ == "SigningKey"
    # not bytes: cryptography signs it (the core takes bytes only), with the same result
    assert signer.sign(bytearray(message)) == signer._private.sign(message)  # type: ignore[arg-type]


class _WrongCore:
    """A core whose key disagrees with cryptography: the signer must not use it."""

    class SigningKey:
        def __init__(self, seed: bytes) -> None:
            self.seed = seed

        def public_raw(self) -> bytes:
            return bytes(32)

        def sign(self, data: bytes) -> bytes:
            return bytes(64)


def test_a_core_that_disagrees_is_not_used(core: Any) -> None:
    private = Ed25519PrivateKey.generate()
    signer = Signer(private)
    assert _native_key(_WrongCore(), private, signer.public_raw) is None
    assert _native_key(core, private, signer.public_raw) is not None


def test_a_native_key_refuses_a_wrong_seed_and_never_shows_it(core: Any) -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        core.SigningKey(b"short")
    seed = bytes(range(32))
    shown = repr(core.SigningKey(seed))
    assert seed.hex() not in shown and "ed25519" in shown

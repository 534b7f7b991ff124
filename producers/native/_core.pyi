# Type stubs of the compiled native core (src/*.rs). Each function has a Python reference it is
# proven byte-identical against; a function that returns None has declined the input (a type or
# value it does not handle exactly), and the caller uses the reference instead.
from collections.abc import Sequence
from typing import Any

ABI: int

# src/canonical.rs — producers/evidence/canonical.py
def canonical_json(value: object, /, *, omit_null_members: bool = False) -> bytes | None: ...
def json_hash(value: object, /) -> str | None: ...
def text_hash(text: str, /) -> str | None: ...

# src/merkle.rs — producers/evidence/merkle.py
def merkle_root(leaves: Sequence[bytes], /) -> bytes: ...

# src/pii.rs — producers/privacy/detectors.py
def pii_scan(
    values: Sequence[object], kinds: int, /
) -> list[tuple[int, int, str, list[tuple[int, int, int]] | None]] | None: ...

# src/avro.rs — schemas/codec.py (Codec.encode), through producers/avro.py
class AvroWriter:
    def __init__(
        self,
        schema: dict[str, Any],
        json_fields: Sequence[tuple[str, str]],
        converters: dict[tuple[str, str], Any],
        pinned: dict[int, tuple[Any, str]],
        /,
    ) -> None: ...
    def encode(self, value: object, header: bytes, /) -> bytes | None: ...

# src/avro_decode.rs — schemas/codec.py (Codec.decode), through producers/avro.py
class AvroReader:
    def __init__(
        self,
        schema: dict[str, Any],
        json_fields: Sequence[tuple[str, str]],
        converters: dict[tuple[str, str], Any],
        /,
    ) -> None: ...
    def decode(self, data: bytes, offset: int, /) -> dict[str, Any] | None: ...

# src/manifest.rs — producers/evidence/payload.py (python_signing_payload)
class ManifestWriter:
    def __init__(
        self,
        top_defaults: dict[str, Any],
        strips: Sequence[tuple[str, frozenset[str], dict[str, frozenset[str]], dict[str, Any]]],
        leaf_keys: Sequence[str],
        memory: tuple[str, str, str, str],
        /,
    ) -> None: ...
    def payload(
        self, capture: dict[str, Any], fill_root: bool, /
    ) -> tuple[bytes, list[bytes] | None, str | None] | None: ...

# src/content.rs — producers/evidence/verify.py (python_check_content), producers/evidence/seal.py (fill_part_hashes)
class PartChecker:
    def __init__(self, slots: Sequence[tuple[str, str | None, str, str, bool]], /) -> None: ...
    def check(self, capture: object, /) -> tuple[list[tuple[int, int | None]], int] | None: ...
    def fill(self, capture: object, /) -> int | None: ...

# src/sign.rs — producers/evidence/keys.py (Signer.sign through cryptography)
class SigningKey:
    def __init__(self, seed: bytes, /) -> None: ...
    def public_raw(self) -> bytes: ...
    def sign(self, data: bytes, /) -> bytes: ...

# src/context.rs — producers/context.py (reference_render_chat_context)
def render_chat(
    pieces: tuple[str, str, str, str, str], system_prompt: object, memory: object, user_message: object, /
) -> tuple[str, list[tuple[int, int]]] | None: ...

# src/index_view.rs — consumers/privacy/manifest.py (reference_index_manifest_json)
class IndexViewWriter:
    def __init__(
        self,
        top_defaults: dict[str, Any],
        strips: Sequence[tuple[str, frozenset[str], dict[str, frozenset[str]], dict[str, Any]]],
        /,
    ) -> None: ...
    def json(
        self, capture: object, replace: dict[str, dict[str, str]], tail: Sequence[tuple[str, object]], /
    ) -> str | None: ...

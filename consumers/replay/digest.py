"""Content hashes exactly as the evidence rules define them (DESIGN decision 1).

Text parts hash the UTF-8 bytes of the string as given; JSON parts hash their RFC 8785 canonical
bytes. Replay recomputes these over what it is about to send, so a request that differs from the
capture by one byte is caught before it reaches the model. The arithmetic is the evidence
module's (one implementation of canonical JSON in the code base).
"""

from __future__ import annotations

from producers.evidence.canonical import json_hash, text_hash

__all__ = ["json_hash", "text_hash"]

"""The raw identifiers behind a capture's commitments, for the two readers that need them.

A capture signs the identifiers of people only as salted commitments
(:mod:`producers.privacy.identifiers`); the raw values are sealed in the decision's key record. Two
readers open them with the vault (the key-encryption key and the key records):

- **ingest**, so the index can still look people up: the row's ``origin_user_id`` /
  ``origin_session_id`` become the index's keyed hash of the raw id (:mod:`consumers.privacy.ids`),
  as for any capture; the raw id itself is never written;
- **the access gate**, which matches a counterparty's subjects against the raw ``originUserId``.

Once the key is erased (or when it cannot be had: no key record, another key-encryption key) nothing
opens; ingest then keeps the commitment in the column (the decision is found by nobody's id) and the
gate ties the decision to no counterparty.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from producers.privacy.identifiers import IDENTIFIERS, is_commitment
from producers.privacy.keys import KeyUnavailable, Vault

if TYPE_CHECKING:
    from consumers.index.rows import CaptureRows
    from consumers.privacy.ids import IndexIds

__all__ = ["IdentifierResolver"]

logger = logging.getLogger(__name__)

_COLUMNS = {"input.originUserId": "origin_user_id", "input.originSessionId": "origin_session_id"}
_THREADS = 8  # key records are small blobs: the time is round trips, which overlap


class IdentifierResolver:
    """Opens the sealed identifiers of decisions with ``vault`` (see the module docstring)."""

    def __init__(self, vault: Vault) -> None:
        self.vault = vault

    def raw(self, decision_id: str) -> dict[str, str]:
        """The raw identifiers of ``decision_id`` by path (``{}``: none sealed, erased, or no key)."""
        try:
            opened = self.vault.identifiers(decision_id)
        except KeyUnavailable:
            return {}
        return {} if opened is None else opened[1]

    def origin_user_id(self, capture: Mapping[str, Any]) -> str | None:
        """The raw ``originUserId`` of ``capture``: as it is when raw, opened when committed, else None."""
        value = (capture.get("input") or {}).get("originUserId")
        if not isinstance(value, str) or not value:
            return None
        if not is_commitment(value):
            return value
        return self.raw(str(capture.get("decisionId") or "")).get("input.originUserId")

    def index_rows(self, rows: Iterable[CaptureRows], ids: IndexIds) -> int:
        """Replace each committed origin column of ``rows`` by the index form of its raw id; return how
        many decisions had one. Blob-store errors propagate (the batch is retried, nothing is lost)."""
        due = [r for r in rows if any(is_commitment(r.decision.get(c)) for c in _COLUMNS.values())]
        if not due:
            return 0
        with ThreadPoolExecutor(max_workers=min(_THREADS, len(due))) as pool:
            opened = list(pool.map(lambda r: self.raw(r.decision_id), due))
        unopened = 0
        for rows_of, raw in zip(due, opened, strict=True):
            if not raw:
                unopened += 1
            for section, field in IDENTIFIERS:
                path = f"{section}.{field}"
                column = _COLUMNS[path]
                if path in raw and is_commitment(rows_of.decision.get(column)):
                    rows_of.decision[column] = ids.of(raw[path])
        if unopened:
            logger.warning(
                "%d of %d captures sign identifiers whose raw value this ingest cannot open (erased, or no "
                "key record or key-encryption key here): indexed by their commitments, found by no id",
                unopened,
                len(due),
            )
        return len(due)

"""What ``show`` says about personal data, and ``show --reveal``: the original for a granted caller.

The default is the redacted view, with a ``privacy`` block (how many redactions of which kinds, and
what became of the original). ``--reveal`` first needs the stored capture to verify (the original
hashes are only as good as the signature over them), then a ``reveal`` row in the access log for a
caller whose grant has ``personal_data = true`` (a denial is logged too, and raised), then the
original parts, each checked against its signed keyed hash.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from consumers.privacy.reveal import authorize_reveal, original_state, reveal
from producers.privacy.keys import DataKeyStore, Vault
from schemas.errors import BlackboxError

if TYPE_CHECKING:
    from consumers.access import AccessGate, Caller

__all__ = ["PrivacyView", "privacy_view"]


class RevealRefused(BlackboxError):
    """The original is not revealed: the stored capture does not verify, or nothing is sealed."""


@dataclass(frozen=True, slots=True)
class PrivacyView:
    state: dict[str, Any] | None
    """The ``privacy`` block of ``show``; None when nothing was redacted."""
    revealed: dict[str, Any] | None = None
    """The capture with its original parts, when revealed."""


def privacy_view(
    capture: Mapping[str, Any],
    *,
    vault: Vault,
    reveal_original: bool = False,
    verified: bool = False,
    gate: AccessGate | None = None,
    caller: Caller | None = None,
) -> PrivacyView:
    keys: DataKeyStore = vault.keys
    state = original_state(capture, keys)
    if not reveal_original:
        return PrivacyView(state | {"view": "redacted"} if state is not None else None)
    decision_id = capture.get("decisionId")
    if state is None:
        raise RevealRefused(f"nothing was redacted from {decision_id}: plain show prints its original")
    if not verified:
        raise RevealRefused(f"{decision_id} is not revealed: the stored capture does not verify")
    if gate is None or caller is None:
        raise RevealRefused("revealing needs the access gate and a caller")
    authorize_reveal(gate, caller, capture)
    revealed = reveal(capture, vault=vault)
    return PrivacyView(state | revealed.summary(), revealed.capture)

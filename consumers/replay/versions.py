"""Values named by version: ``system_prompt=v4.6`` is the text of prompt version v4.6 as the fleet ran it.

A :class:`VersionCatalog` knows which versions of the prompt, the tool schema and the model the
index has seen, and reads a versioned value out of a full capture that holds it. The index
implementation lists versions from ``decisions`` (trusted rows only) and reads the text from the
newest full capture of that version through a caller-supplied ``read`` — the replayer's gated,
verified read, so resolving a version is a logged access like any other read of content.

A version whose content no full capture still holds (structured-only, compacted) is listed as
*seen* but cannot be resolved; a version with two different texts in the fleet is ambiguous and
refused. Models are named by identifier, not version (the endpoint decides which version serves an
identifier), so the catalog lists model versions only to refuse ``model=VERSION`` with a hint.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from consumers.replay.store import seen_versions
from schemas.errors import ContractError

if TYPE_CHECKING:
    from consumers.index import Index

__all__ = [
    "VERSIONED",
    "IndexVersionCatalog",
    "KnownVersion",
    "StaticVersionCatalog",
    "UnknownVersion",
    "VersionCatalog",
    "natural_key",
]

VERSIONED: Mapping[str, tuple[str, str]] = {
    # variable: (index column holding its version, agentConfiguration field holding its value)
    "system_prompt": ("prompt_version", "systemPromptText"),
    "tool_schema": ("tool_schema_version", "toolSchemaJson"),
    "model": ("model_version", "modelIdentifier"),
    "model_identifier": ("model_id", "modelIdentifier"),  # listed only, to tell identifiers from versions
}


class UnknownVersion(ContractError):
    """A bare ``--vary`` value names no version the fleet's captures hold (the message lists them)."""


@dataclass(frozen=True, slots=True)
class KnownVersion:
    """One version seen in trusted captures: how many decisions ran it, how many full captures hold
    its content (``held``), how many distinct contents (``contents``) and the newest holder."""

    version: str
    decisions: int
    held: int
    contents: int
    example: str = ""


class VersionCatalog(Protocol):
    def known(self, variable: str) -> Sequence[KnownVersion]:
        """The versions of ``variable`` seen, in natural order (v4.9 before v4.10)."""
        ...

    def value(self, variable: str, version: str) -> Any:
        """The content of ``version`` (prompt text, tool schema); :class:`UnknownVersion` otherwise."""
        ...


def natural_key(text: str) -> tuple[Any, ...]:
    """Sort key where digit runs compare as numbers: v4.9 < v4.10."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text))


def describe_known(versions: Sequence[KnownVersion]) -> str:
    """``v4.5, v4.6, v4.7 (content not held: v4.3)`` for an error message."""
    held = [v.version for v in versions if v.held]
    gone = [v.version for v in versions if not v.held]
    text = ", ".join(held) or "none"
    return text + (f" (seen, but no full capture holds the content: {', '.join(gone)})" if gone else "")


class IndexVersionCatalog:
    """Versions from the index; contents read through ``read(decision_id)`` (gated and verified)."""

    def __init__(self, index: Index, *, read: Callable[[str], Mapping[str, Any]]) -> None:
        self._index = index
        self._read = read
        self._known: dict[str, tuple[KnownVersion, ...]] = {}
        self._values: dict[tuple[str, str], Any] = {}

    def known(self, variable: str) -> Sequence[KnownVersion]:
        if variable not in self._known:
            column = VERSIONED[variable][0]
            rows = seen_versions(self._index, column=column, hash_column=_HASH_COLUMNS.get(variable))
            self._known[variable] = tuple(
                sorted(
                    (
                        KnownVersion(
                            version=str(r["version"]),
                            decisions=int(r["decisions"]),
                            held=int(r["held"]),
                            contents=int(r["contents"]),
                            example=str(r["example"] or ""),
                        )
                        for r in rows
                    ),
                    key=lambda v: natural_key(v.version),
                )
            )
        return self._known[variable]

    def value(self, variable: str, version: str) -> Any:
        key = (variable, version)
        if key not in self._values:
            known = self.known(variable)
            found = next((v for v in known if v.version == version), None)
            noun = _NOUNS[variable]
            if found is None or not found.held:
                why = "not a known" if found is None else "no full capture holds the content of"
                raise UnknownVersion(
                    f"{why} {noun} version (known: {describe_known(known)}); "
                    "give @FILE or text:LITERAL for any other value",
                    path=f"{variable}={version}",
                )
            if found.contents > 1:
                raise UnknownVersion(
                    f"the fleet ran {found.contents} different {noun}s under this version name; "
                    "give @FILE or text:LITERAL",
                    path=f"{variable}={version}",
                )
            capture = self._read(found.example)
            value = (capture.get("agentConfiguration") or {}).get(VERSIONED[variable][1])
            if value is None:
                raise UnknownVersion(f"capture {found.example} holds no {noun}", path=f"{variable}={version}")
            self._values[key] = value
        return self._values[key]


class StaticVersionCatalog:
    """Versions given in code (library use, tests): ``{variable: {version: value}}``."""

    def __init__(self, values: Mapping[str, Mapping[str, Any]]) -> None:
        self._values = {k: dict(v) for k, v in values.items()}

    def known(self, variable: str) -> Sequence[KnownVersion]:
        versions = sorted(self._values.get(variable, {}), key=natural_key)
        return tuple(KnownVersion(version=v, decisions=1, held=1, contents=1) for v in versions)

    def value(self, variable: str, version: str) -> Any:
        values = self._values.get(variable, {})
        if version not in values:
            raise UnknownVersion(
                f"not a known {_NOUNS.get(variable, variable)} version "
                f"(known: {describe_known(self.known(variable))}); give @FILE or text:LITERAL",
                path=f"{variable}={version}",
            )
        return values[version]


_HASH_COLUMNS = {"system_prompt": "prompt_hash", "tool_schema": "tool_schema_hash"}
_NOUNS = {"system_prompt": "prompt", "tool_schema": "tool schema", "model": "model"}

"""Variable isolation: override exactly one named variable of a captured decision, then replay.

``--vary NAME=VALUE``. VALUE is ``@file`` (read verbatim), ``text:LITERAL`` (the rest of the
argument, as written), or a bare value: for ``system_prompt`` and ``tool_schema`` a bare value is a
*version* seen in the fleet's full captures (``system_prompt=v4.6`` is the text v4.6 ran with,
:mod:`consumers.replay.versions`); an unknown version is an error listing the known ones, never
the literal "v4.6" sent as a prompt. Elsewhere a bare value is JSON when the variable is JSON, text
otherwise.

=========================  ==========================================================
``system_prompt``          new prompt text, spliced into the rendered context's span
``request``                the inbound user message, spliced into the ``user`` span
``model``                  model identifier sent instead of the captured one
``memory``                 JSON list of working-set entries (objects with
                           ``renderedContent``) or of contents; re-rendered as a block
``memory.<field>``         one entry-level change: ``drop``, ``tier``, ``truncate``, ``order``
                           (:mod:`consumers.replay.memory_variation`)
``tool_schema``            JSON tool schema (``{"tools": [...]}`` or a list), or a version
``sampling``               JSON object replacing all sampling parameters
``sampling.<field>``       one sampling parameter (JSON value; ``null`` removes it)
``external_state.<key>``   the captured value of one observable external (JSON value);
                           ``external_state.<key>.<path>`` one member inside that value
=========================  ==========================================================

The rendered context is re-assembled through its spans: only the varied part's bytes change;
every other byte stays as captured. A *configuration* (bisect, regress) is several variations
applied together; spans are shifted after each splice so they compose. A wire capture is varied
inside its recorded bytes instead (:mod:`consumers.replay.wire_variation`).
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from consumers.replay.memory_variation import (
    MEMORY_FIELDS,
    MemoryItem,
    MemoryVariationError,
    parse_memory_value,
    render_memory,
    vary_memory,
)
from consumers.replay.versions import VersionCatalog
from producers.context import ContextSpan, RenderedContext
from producers.wire.openai_chat import ChatRequest, tools_from_schema
from schemas.errors import ContractError

VARIABLES = ("system_prompt", "request", "model", "memory", "tool_schema", "sampling", "external_state")
_FIELDED = ("sampling", "external_state", "memory")
_TEXT = ("system_prompt", "request", "model")
TEXT_PREFIX = "text:"


class InvalidVariation(ContractError):
    """A ``--vary`` or configuration entry names no known variable or has an unusable value."""


@dataclass(frozen=True, slots=True)
class Variation:
    """One variable (``name``) set to ``value``; ``label`` is how the operator wrote it, ``version``
    the version the value was resolved from (``system_prompt=v4.6``), if any."""

    name: str
    value: Any
    label: str = ""
    version: str | None = None

    @property
    def variable(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def field(self) -> str | None:
        return self.name.partition(".")[2] or None

    def describe(self) -> str:
        if self.label:
            return self.label
        shown = self.value if isinstance(self.value, str) else json.dumps(self.value, ensure_ascii=False)
        return f"{self.name}={shown if len(shown) <= 40 else shown[:37] + '...'}"


@dataclass(frozen=True, slots=True)
class ReplayInputs:
    """Everything a run sends or answers from: the request, its context spans, the captured world,
    and the working set entry by entry (what entry-level memory variations act on)."""

    request: ChatRequest
    rendered: RenderedContext
    externals: Mapping[str, Any] = field(default_factory=dict)
    memory: tuple[MemoryItem, ...] = ()


def parse_variation(
    spec: str, *, base_dir: Path | None = None, versions: VersionCatalog | None = None
) -> Variation:
    """Parse ``NAME=VALUE`` into one :class:`Variation` (VALUE forms: the module docstring).

    ``versions`` resolves bare ``system_prompt`` / ``tool_schema`` values; without it a bare value of
    those variables is refused, since nothing can say which version it names."""
    name, sep, raw = spec.partition("=")
    name = name.strip()
    if not sep:
        raise InvalidVariation(f"expected NAME=VALUE, got {spec!r}", path="--vary")
    return variation_of(name, raw, base_dir=base_dir, versions=versions)


def variation_of(
    name: str, raw: str, *, base_dir: Path | None = None, versions: VersionCatalog | None = None
) -> Variation:
    """One variable set from its written value ``raw`` (``@file``, ``text:...``, a version or a bare value)."""
    check_name(name)
    label = _label(name, raw)
    if raw.startswith("@"):
        return Variation(name=name, value=_typed(name, _read_value(raw, base_dir)), label=label)
    if raw.startswith(TEXT_PREFIX):
        return Variation(name=name, value=_typed(name, raw[len(TEXT_PREFIX) :]), label=label)
    if name == "system_prompt" or (name == "tool_schema" and not raw.lstrip().startswith(("{", "["))):
        return _versioned(name, raw.strip(), versions, label)
    if name == "model" and versions is not None:
        _refuse_model_version(raw.strip(), versions)
    return Variation(name=name, value=_typed(name, raw), label=label)


def check_name(name: str) -> None:
    head, dot, rest = name.partition(".")
    if head not in VARIABLES:
        raise InvalidVariation(f"unknown variable {head!r}; one of {', '.join(VARIABLES)}", path=name)
    if dot and (head not in _FIELDED or not rest):
        raise InvalidVariation(f"{name!r} names no single variable", path=name)
    if head == "external_state" and not dot:
        raise InvalidVariation("external_state needs a key: external_state.<key>=VALUE", path=name)
    if head == "memory" and dot and rest not in MEMORY_FIELDS:
        raise InvalidVariation(
            f"memory has no field {rest!r}; one of {', '.join(MEMORY_FIELDS)} (or memory=JSON for the whole list)",
            path=name,
        )


def apply_variation(inputs: ReplayInputs, variation: Variation) -> ReplayInputs:
    """``inputs`` with exactly one variable replaced."""
    request, rendered = inputs.request, inputs.rendered
    variable, value = variation.variable, variation.value
    if variable == "system_prompt":
        rendered = splice(rendered, "system_prompt", _text(variation))
        return replace(inputs, rendered=rendered, request=request.with_changes(messages_text=rendered.text))
    if variable == "request":
        rendered = splice(rendered, "user", _text(variation))
        return replace(inputs, rendered=rendered, request=request.with_changes(messages_text=rendered.text))
    if variable == "memory":
        try:
            items = (
                _memory_items(value)
                if variation.field is None
                else vary_memory(inputs.memory, variation.field, value)
            )
            rendered = render_memory(rendered, items)
        except MemoryVariationError as exc:
            raise InvalidVariation(exc.detail, path=exc.path) from exc
        return replace(
            inputs, rendered=rendered, memory=items, request=request.with_changes(messages_text=rendered.text)
        )
    if variable == "model":
        return replace(inputs, request=request.with_changes(model=_text(variation)))
    if variable == "tool_schema":
        try:
            tools = tools_from_schema(value)
        except ContractError as exc:
            raise InvalidVariation(str(exc), path=variation.name) from exc
        return replace(inputs, request=request.with_changes(tools=tools))
    if variable == "sampling":
        if variation.field is None:
            if not isinstance(value, dict):
                raise InvalidVariation("sampling must be a JSON object", path=variation.name)
            return replace(inputs, request=request.with_changes(sampling=dict(value)))
        sampling = dict(request.sampling)
        if value is None:
            sampling.pop(variation.field, None)
        else:
            sampling[variation.field] = value
        return replace(inputs, request=request.with_changes(sampling=sampling))
    return replace(inputs, externals=vary_external(inputs.externals, variation))


def vary_external(externals: Mapping[str, Any], variation: Variation) -> dict[str, Any]:
    """``externals`` with ``external_state.<key>`` replaced, or one member inside its value when the
    name continues past a captured key (``external_state.customer.balance.balance``)."""
    name = variation.field or ""
    if name in externals:
        return {**externals, name: variation.value}
    for key in sorted(externals, key=len, reverse=True):
        if name.startswith(key + ".") and isinstance(externals[key], dict):
            path = name[len(key) + 1 :].split(".")
            return {**externals, key: _set_path(externals[key], path, variation)}
    known = ", ".join(externals) or "none"
    raise InvalidVariation(
        f"the capture has no external state {name!r} (captured: {known})", path=variation.name
    )


def _set_path(value: dict[str, Any], path: list[str], variation: Variation) -> dict[str, Any]:
    head, rest = path[0], path[1:]
    if head not in value:
        raise InvalidVariation(
            f"the captured value has no member {head!r} (members: {', '.join(value) or 'none'})",
            path=variation.name,
        )
    if not rest:
        return {**value, head: variation.value}
    if not isinstance(value[head], dict):
        raise InvalidVariation(f"member {head!r} is not an object", path=variation.name)
    return {**value, head: _set_path(value[head], rest, variation)}


def apply_all(inputs: ReplayInputs, variations: Iterable[Variation]) -> ReplayInputs:
    """A configuration: several variations (distinct names) applied in turn."""
    seen: set[str] = set()
    for variation in variations:
        if variation.name in seen:
            raise InvalidVariation("a configuration sets this variable twice", path=variation.name)
        seen.add(variation.name)
        inputs = apply_variation(inputs, variation)
    return inputs


def splice(rendered: RenderedContext, part: str, new_text: str) -> RenderedContext:
    """``rendered`` with ``part`` replaced and every other span moved to where its bytes now are."""
    try:
        old = rendered.span(part)
    except ContractError as exc:
        raise InvalidVariation(
            f"the rendered context has no {part!r} span, so that part cannot be varied", path=part
        ) from exc
    text = rendered.replace(part, new_text)
    delta = len(text.encode("utf-8")) - len(rendered.text.encode("utf-8"))
    spans: list[ContextSpan] = []
    for span in rendered.spans:
        if span.part == part:
            spans.append(replace(span, end=span.end + delta))
        elif span.start >= old.end:
            spans.append(replace(span, start=span.start + delta, end=span.end + delta))
        elif span.end <= old.start:
            spans.append(span)
        elif span.start <= old.start and span.end >= old.end:
            spans.append(replace(span, end=span.end + delta))  # encloses the part
        # spans inside the replaced part (one memory entry of the block) no longer exist
    return RenderedContext(format=rendered.format, text=text, spans=tuple(spans))


def load_configuration(path: Path, *, versions: VersionCatalog | None = None) -> dict[str, Variation]:
    """A configuration file (TOML): top-level variables, ``[sampling]``, ``[external_state]`` and
    ``[memory]`` tables.

    String values are read as ``--vary`` values are (``@file`` relative to the TOML file,
    ``text:...``, a version); tables expand to one variation per field, so a diff between two
    configurations is per field.
    """
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise InvalidVariation(f"cannot read configuration {path}: {exc}", path=str(path)) from exc
    out: dict[str, Variation] = {}
    for name, value in data.items():
        if name in _FIELDED and isinstance(value, dict):
            for key, item in value.items():
                full = f"{name}.{key}"
                out[full] = _from_toml(full, item, path.parent, versions)
            continue
        check_name(name)
        if name == "external_state":
            raise InvalidVariation("external_state must be a table of keys", path=name)
        out[name] = _from_toml(name, value, path.parent, versions)
    return out


def _read_value(raw: str, base_dir: Path | None) -> str:
    if not raw.startswith("@"):
        return raw
    path = Path(raw[1:])
    if base_dir is not None and not path.is_absolute():
        path = base_dir / path
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidVariation(f"cannot read {path}: {exc}", path="--vary") from exc


def _versioned(name: str, version: str, versions: VersionCatalog | None, label: str) -> Variation:
    if versions is None:
        raise InvalidVariation(
            "a bare value names a version, and no version catalog is open here; give @FILE or text:LITERAL",
            path=f"{name}={version}",
        )
    value = versions.value(name, version)
    return Variation(name=name, value=value, label=label, version=version)


def _refuse_model_version(value: str, versions: VersionCatalog) -> None:
    """``model=2026-11-01`` names a version, not an identifier: refuse it with the identifiers seen."""
    identifiers = {v.version for v in versions.known("model_identifier")}
    if value not in identifiers and any(v.version == value for v in versions.known("model")):
        raise InvalidVariation(
            "a model version seen in captures, not a model identifier: replay sends an identifier and "
            "the endpoint decides which version serves it; give the identifier the endpoint serves "
            "that version as (text:IDENTIFIER sends it as written)",
            path=f"model={value}",
        )


def _typed(name: str, text: str) -> Any:
    head, _, field = name.partition(".")
    if head in _TEXT:
        return text
    if head == "memory" and field:
        try:
            return parse_memory_value(field, text)
        except MemoryVariationError as exc:
            raise InvalidVariation(exc.detail, path=exc.path) from exc
    if head in ("memory", "tool_schema") or name == "sampling":
        return _json(name, text)
    try:  # a field value: JSON when it parses (0.7, null, {"a":1}), else the literal string
        return json.loads(text)
    except ValueError:
        return text


def _json(name: str, text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InvalidVariation(f"value is not JSON: {exc}", path=name) from exc


def _text(variation: Variation) -> str:
    if not isinstance(variation.value, str):
        raise InvalidVariation("value must be text", path=variation.name)
    return variation.value


def _memory_items(value: Any) -> tuple[MemoryItem, ...]:
    if not isinstance(value, list):
        raise InvalidVariation("memory must be a JSON list of entries or of contents", path="memory")
    items: list[MemoryItem] = []
    for i, entry in enumerate(value):
        if isinstance(entry, str):
            items.append(MemoryItem(entry_id=f"memory[{i}]", tier="", content=entry))
        elif isinstance(entry, dict) and isinstance(entry.get("renderedContent"), str):
            entry_id = str(entry.get("entryId") or f"memory[{i}]")
            items.append(
                MemoryItem(
                    entry_id=entry_id, tier=str(entry.get("tier") or ""), content=entry["renderedContent"]
                )
            )
        else:
            raise InvalidVariation(
                "entry is neither text nor an object with renderedContent", path=f"memory[{i}]"
            )
    return tuple(items)


def _label(name: str, raw: str) -> str:
    if raw.startswith("@") or len(raw) <= 40:
        return f"{name}={raw}"
    return f"{name}={raw[:37]}..."


def _from_toml(name: str, value: Any, base_dir: Path, versions: VersionCatalog | None) -> Variation:
    if isinstance(value, str):
        variation = variation_of(name, value, base_dir=base_dir, versions=versions)
        return replace(variation, label=f"{name}={_toml_label(value)}")
    check_name(name)
    if name.startswith("memory.") and name != "memory.truncate":
        value = tuple(value) if isinstance(value, list) else value
    return Variation(name, value, f"{name}={_toml_label(value)}")


def _toml_label(value: Any) -> str:
    shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return shown if len(shown) <= 40 else shown[:37] + "..."

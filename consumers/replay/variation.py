"""Variable isolation: override exactly one named variable of a captured decision, then replay.

``--vary NAME=VALUE`` where VALUE is a literal or ``@file`` (read verbatim):

=========================  ==========================================================
``system_prompt``          new prompt text, spliced into the rendered context's span
``model``                  model identifier sent instead of the captured one
``memory``                 JSON list of working-set entries (objects with
                           ``renderedContent``) or of contents; re-rendered as a block
``tool_schema``            JSON tool schema (``{"tools": [...]}`` or a list)
``sampling``               JSON object replacing all sampling parameters
``sampling.<field>``       one sampling parameter (JSON value; ``null`` removes it)
``external_state.<key>``   the captured value of one observable external (JSON value)
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

from producers.context import MEMORY_SEPARATOR, ContextSpan, RenderedContext
from producers.wire.openai_chat import ChatRequest, tools_from_schema
from schemas.errors import ContractError

VARIABLES = ("system_prompt", "model", "memory", "tool_schema", "sampling", "external_state")
_FIELDED = ("sampling", "external_state")


class InvalidVariation(ContractError):
    """A ``--vary`` or configuration entry names no known variable or has an unusable value."""


@dataclass(frozen=True, slots=True)
class Variation:
    """One variable (``name``) set to ``value``; ``label`` is how the operator wrote it."""

    name: str
    value: Any
    label: str = ""

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
    """Everything a run sends or answers from: the request, its context spans, the captured world."""

    request: ChatRequest
    rendered: RenderedContext
    externals: Mapping[str, Any] = field(default_factory=dict)


def parse_variation(spec: str, *, base_dir: Path | None = None) -> Variation:
    """Parse ``NAME=VALUE`` (VALUE literal or ``@file``) into one :class:`Variation`."""
    name, sep, raw = spec.partition("=")
    name = name.strip()
    if not sep:
        raise InvalidVariation(f"expected NAME=VALUE, got {spec!r}", path="--vary")
    check_name(name)
    text = _read_value(raw, base_dir)
    return Variation(name=name, value=_typed(name, text), label=_label(name, raw))


def check_name(name: str) -> None:
    head, dot, rest = name.partition(".")
    if head not in VARIABLES:
        raise InvalidVariation(f"unknown variable {head!r}; one of {', '.join(VARIABLES)}", path=name)
    if dot and (head not in _FIELDED or not rest):
        raise InvalidVariation(f"{name!r} names no single variable", path=name)
    if head == "external_state" and not dot:
        raise InvalidVariation("external_state needs a key: external_state.<key>=VALUE", path=name)


def apply_variation(inputs: ReplayInputs, variation: Variation) -> ReplayInputs:
    """``inputs`` with exactly one variable replaced."""
    request, rendered = inputs.request, inputs.rendered
    variable, value = variation.variable, variation.value
    if variable == "system_prompt":
        rendered = splice(rendered, "system_prompt", _text(variation))
        return replace(inputs, rendered=rendered, request=request.with_changes(messages_text=rendered.text))
    if variable == "memory":
        rendered = splice(rendered, "memory", MEMORY_SEPARATOR.join(_memory_contents(value)))
        return replace(inputs, rendered=rendered, request=request.with_changes(messages_text=rendered.text))
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
    key = variation.field or ""
    if key not in inputs.externals:
        known = ", ".join(inputs.externals) or "none"
        raise InvalidVariation(
            f"the capture has no external state {key!r} (captured: {known})", path=variation.name
        )
    return replace(inputs, externals={**inputs.externals, key: value})


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


def load_configuration(path: Path) -> dict[str, Variation]:
    """A configuration file (TOML): top-level variables, ``[sampling]`` and ``[external_state]`` tables.

    String values starting with ``@`` are files relative to the TOML file. Tables expand to one
    variation per field, so a diff between two configurations is per field.
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
                check_name(full)
                out[full] = Variation(full, _from_toml(item, path.parent), f"{full}={_toml_label(item)}")
            continue
        check_name(name)
        if name == "external_state":
            raise InvalidVariation("external_state must be a table of keys", path=name)
        resolved = _from_toml(value, path.parent)
        if name in {"memory", "tool_schema", "sampling"} and isinstance(resolved, str):
            resolved = _json(name, resolved)
        out[name] = Variation(name, resolved, f"{name}={_toml_label(value)}")
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


def _typed(name: str, text: str) -> Any:
    head = name.split(".", 1)[0]
    if head in ("system_prompt", "model"):
        return text
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


def _memory_contents(value: Any) -> list[str]:
    if not isinstance(value, list):
        raise InvalidVariation("memory must be a JSON list of entries or of contents", path="memory")
    contents: list[str] = []
    for i, entry in enumerate(value):
        if isinstance(entry, str):
            contents.append(entry)
        elif isinstance(entry, dict) and isinstance(entry.get("renderedContent"), str):
            contents.append(entry["renderedContent"])
        else:
            raise InvalidVariation(
                "entry is neither text nor an object with renderedContent", path=f"memory[{i}]"
            )
    return contents


def _label(name: str, raw: str) -> str:
    if raw.startswith("@") or len(raw) <= 40:
        return f"{name}={raw}"
    return f"{name}={raw[:37]}..."


def _from_toml(value: Any, base_dir: Path) -> Any:
    if isinstance(value, str) and value.startswith("@"):
        return _read_value(value, base_dir)
    return value


def _toml_label(value: Any) -> str:
    shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return shown if len(shown) <= 40 else shown[:37] + "..."

"""Variable isolation on recorded bytes: splice exactly one part, leave every other byte as recorded.

The same ``--vary`` names as :mod:`consumers.replay.variation`, applied inside a wire capture's
request bodies:

=========================  =========================================================================
``system_prompt``          the recorded ``system_prompt`` span's bytes, escaped as the body escapes
``memory``                 the recorded ``memory:<entryId>`` spans: a list of contents (in body
                           order, one per located entry) or of entries with ``entryId``
``model``                  the body's ``model`` member
``sampling.<field>``       that member (``null`` removes it; an absent one is added last)
``sampling``               every sampling member of the format, replaced by the object given
``tool_schema``            the body's ``tools`` member
``external_state.<key>``   the captured value answered to the agent (no byte changes)
=========================  =========================================================================

A variation is applied to the first call and to every call that does not extend its predecessor;
a call that extends its predecessor carries the change with the history it extends. Spans after a
change move with their bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from consumers.replay.variation import InvalidVariation, Variation, vary_external
from consumers.replay.wire_request import WireCall, WireInputs
from producers.context import ContextSpan
from producers.wire.body import escape_text, layout, remove_member, set_member, splice

__all__ = ["apply_all_wire", "apply_wire_variation"]

_NOT_SAMPLING = frozenset({"model", "tools", "system", "instructions", "stream", "messages", "input"})


def apply_wire_variation(inputs: WireInputs, variation: Variation) -> WireInputs:
    """``inputs`` with exactly one variable replaced (see the module docstring)."""
    if variation.variable == "request" or (variation.variable == "memory" and variation.field):
        raise InvalidVariation(
            "a wire capture is varied inside its recorded bytes, where this variable has no single span "
            "to splice; vary memory=[...] entry by entry instead, or replay an sdk capture",
            path=variation.name,
        )
    if variation.variable == "external_state":
        return replace(inputs, externals=vary_external(inputs.externals, variation))
    calls = tuple(
        _vary_call(call, variation) if index == 0 or not call.extends_previous else call
        for index, call in enumerate(inputs.calls)
    )
    return replace(inputs, calls=calls)


def apply_all_wire(inputs: WireInputs, variations: Iterable[Variation]) -> WireInputs:
    """A configuration: several variations (distinct names) applied in turn."""
    seen: set[str] = set()
    for variation in variations:
        if variation.name in seen:
            raise InvalidVariation("a configuration sets this variable twice", path=variation.name)
        seen.add(variation.name)
        inputs = apply_wire_variation(inputs, variation)
    return inputs


def _vary_call(call: WireCall, variation: Variation) -> WireCall:
    variable, value = variation.variable, variation.value
    if variable == "system_prompt":
        if not isinstance(value, str):
            raise InvalidVariation("value must be text", path=variation.name)
        return _splice_parts(call, {"system_prompt": value}, variation)
    if variable == "memory":
        return _splice_parts(call, _memory(call, value), variation)
    if variable == "model":
        if not isinstance(value, str):
            raise InvalidVariation("value must be text", path=variation.name)
        return _edit(call, set_member(call.body, "model", value))
    if variable == "tool_schema":
        tools = value.get("tools") if isinstance(value, dict) else value
        if not isinstance(tools, list):
            raise InvalidVariation(
                'tool schema is neither a list of tools nor {"tools": [...]}', path="tool_schema"
            )
        return _edit(call, set_member(call.body, "tools", tools))
    field = variation.field
    if field is not None:
        if field in _NOT_SAMPLING or field == call.spec.history_key:
            raise InvalidVariation(
                f"{field!r} is not a sampling parameter of {call.spec.format}", path=variation.name
            )
        body = remove_member(call.body, field) if value is None else set_member(call.body, field, value)
        return _edit(call, body)
    if not isinstance(value, dict):
        raise InvalidVariation("sampling must be a JSON object", path=variation.name)
    edited = call
    keys = call.spec.sampling_keys
    for member in layout(call.body).members:
        if member.key in keys and member.key not in value:
            edited = _edit(edited, remove_member(edited.body, member.key))
    for key, item in value.items():
        edited = _edit(
            edited, remove_member(edited.body, key) if item is None else set_member(edited.body, key, item)
        )
    return edited


def _memory(call: WireCall, value: Any) -> dict[str, str]:
    """Which memory span gets which text: by ``entryId``, or positionally over the located entries."""
    located = sorted((s for s in call.spans if s.part.startswith("memory:")), key=lambda s: s.start)
    if not isinstance(value, list):
        raise InvalidVariation("memory must be a JSON list of entries or of contents", path="memory")
    if all(isinstance(v, dict) and "entryId" in v for v in value):
        out: dict[str, str] = {}
        for i, entry in enumerate(value):
            text = entry.get("renderedContent")
            if not isinstance(text, str):
                raise InvalidVariation("entry has no renderedContent text", path=f"memory[{i}]")
            out[f"memory:{entry['entryId']}"] = text
        return out
    if not all(isinstance(v, str) for v in value):
        raise InvalidVariation("entries are neither all text nor all objects with entryId", path="memory")
    if len(value) != len(located):
        raise InvalidVariation(
            f"model call {call.sequence} locates {len(located)} memory entries in its bytes; give as many "
            "contents, or entries with entryId",
            path="memory",
        )
    return {span.part: text for span, text in zip(located, value, strict=True)}


def _splice_parts(call: WireCall, texts: dict[str, str], variation: Variation) -> WireCall:
    """Replace each named span's bytes (last first, so earlier offsets hold); move the other spans."""
    spans = {s.part: s for s in call.spans}
    missing = [part for part in texts if part not in spans]
    if missing:
        raise InvalidVariation(
            f"model call {call.sequence}'s recorded bytes have no {', '.join(missing)} span, so that part "
            "cannot be varied",
            path=variation.name,
        )
    shape = layout(call.body)
    body, moved = call.body, list(call.spans)
    for part in sorted(texts, key=lambda p: spans[p].start, reverse=True):
        span = spans[part]
        text = texts[part]
        new = escape_text(shape, text) if span.encoding == "json-string" else text.encode("utf-8")
        body = splice(body, span.start, span.end, new)
        moved = _moved(moved, span.start, span.end, len(new), keep=part)
    return replace(call, body=body, spans=tuple(moved))


def _edit(call: WireCall, body: bytes) -> WireCall:
    """``call`` with ``body`` (one contiguous change from ``call.body``); spans follow their bytes."""
    old = call.body
    prefix = 0
    limit = min(len(old), len(body))
    while prefix < limit and old[prefix] == body[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and old[-1 - suffix] == body[-1 - suffix]:
        suffix += 1
    moved = _moved(list(call.spans), prefix, len(old) - suffix, len(body) - suffix - prefix, keep=None)
    return replace(call, body=body, spans=tuple(moved))


def _moved(
    spans: Sequence[ContextSpan], start: int, end: int, length: int, *, keep: str | None
) -> list[ContextSpan]:
    """Spans after bytes ``[start, end)`` became ``length`` bytes: later ones shift, ``keep`` (the
    replaced part) takes the new length, enclosing ones stretch, ones inside the change are gone."""
    delta = length - (end - start)
    out: list[ContextSpan] = []
    for span in spans:
        if span.part == keep:
            out.append(replace(span, end=span.start + length))
        elif span.start >= end:
            out.append(replace(span, start=span.start + delta, end=span.end + delta))
        elif span.end <= start:
            out.append(span)
        elif span.start <= start and span.end >= end:
            out.append(replace(span, end=span.end + delta))
    return out

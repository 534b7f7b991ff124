"""Sweep specs: the values a ``--sweep VARIABLE=SPEC`` generates (forms in :mod:`consumers.replay.probe`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from consumers.replay.memory_variation import MemoryItem, format_size, parse_size
from consumers.replay.replayer import PreparedCapture
from consumers.replay.variation import InvalidVariation, ReplayInputs, Variation, check_name, variation_of
from consumers.replay.versions import VersionCatalog

__all__ = ["MAX_POINTS", "Axis", "InvalidSweep", "parse_sweep", "short_label"]

MAX_POINTS = 1000
"""Values one sweep may generate."""


class InvalidSweep(InvalidVariation):
    """A ``--sweep`` spec that names no values, too many, or a form the variable does not take."""


@dataclass(frozen=True, slots=True)
class Axis:
    """One swept variable and its generated values, in sweep order."""

    name: str
    spec: str
    values: tuple[Variation, ...]
    numeric: bool = False

    @property
    def quantity(self) -> str:
        return "the working set" if self.name.startswith("memory.") else self.name


def parse_sweep(
    spec: str,
    *,
    prepared: PreparedCapture,
    versions: VersionCatalog | None = None,
    base_dir: Path | None = None,
) -> Axis:
    """``VARIABLE=SPEC`` → the :class:`Axis` of generated values (module docstring for the forms)."""
    name, sep, raw = spec.partition("=")
    name, raw = name.strip(), raw.strip()
    if not sep or not raw:
        raise InvalidSweep(f"expected VARIABLE=SPEC, got {spec!r}", path="--sweep")
    check_name(name)
    values: list[Variation]
    numeric = False
    if raw == "each":
        values = _each(name, prepared)
    elif raw == "versions":
        if name not in ("system_prompt", "tool_schema"):
            raise InvalidSweep("'versions' sweeps system_prompt or tool_schema", path=name)
        if versions is None:
            raise InvalidSweep("no version catalog is open to list the versions", path=name)
        held = [v.version for v in versions.known(name) if v.held]
        if not held:
            raise InvalidSweep("the fleet's full captures hold no version of it", path=name)
        values = [variation_of(name, v, versions=versions) for v in held]
    elif raw.startswith("@"):
        values = _lines(name, raw, versions=versions, base_dir=base_dir)
    elif ".." in raw:
        values, numeric = _range(name, raw), True
    else:
        raise InvalidSweep(
            "a sweep is A..B/STEP, each (memory.drop, memory.tier), versions (system_prompt, "
            "tool_schema) or @FILE (one value per line)",
            path=spec,
        )
    if not values:
        raise InvalidSweep("the sweep generates no value", path=spec)
    if len(values) > MAX_POINTS:
        raise InvalidSweep(f"the sweep generates {len(values)} values; at most {MAX_POINTS}", path=spec)
    return Axis(name=name, spec=raw, values=tuple(values), numeric=numeric)


# -- generating values ---------------------------------------------------------------------------------
def _each(name: str, prepared: PreparedCapture) -> list[Variation]:
    items = _items(prepared, name)
    if name == "memory.drop":
        return [Variation(name, (i.entry_id,), f"{name}={i.entry_id}") for i in items]
    if name == "memory.tier":
        tiers = list(dict.fromkeys(i.tier for i in items))
        return [Variation(name, (t,), f"{name}={t}") for t in tiers]
    raise InvalidSweep("'each' sweeps memory.drop or memory.tier", path=name)


def _items(prepared: PreparedCapture, name: str) -> tuple[MemoryItem, ...]:
    if not isinstance(prepared.inputs, ReplayInputs):
        raise InvalidSweep("a wire capture's working set cannot be varied entry by entry", path=name)
    return prepared.inputs.memory


def _lines(name: str, raw: str, *, versions: VersionCatalog | None, base_dir: Path | None) -> list[Variation]:
    path = Path(raw[1:])
    if base_dir is not None and not path.is_absolute():
        path = base_dir / path
    try:
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except OSError as exc:
        raise InvalidSweep(f"cannot read {path}: {exc}", path=name) from exc
    return [variation_of(name, line, versions=versions, base_dir=base_dir) for line in lines]


def _range(name: str, raw: str) -> list[Variation]:
    bounds, slash, step_text = raw.replace(" ", "").rpartition("/")
    start_text, dots, stop_text = bounds.partition("..")
    if not (slash and dots and start_text and stop_text and step_text):
        raise InvalidSweep(f"{raw!r} is not A..B/STEP", path=name)
    sizes = name == "memory.truncate"
    if not sizes and not (name.startswith("external_state.") or name.startswith("sampling.")):
        raise InvalidSweep(
            "a numeric range sweeps memory.truncate, external_state.KEY or sampling.FIELD", path=name
        )
    parse: Callable[[str], float] = (lambda t: float(parse_size(t, path=name))) if sizes else _number(name)
    start, stop, step = (parse(t) for t in (start_text, stop_text, step_text))
    if step <= 0 or stop < start:
        raise InvalidSweep("a range needs A <= B and a positive STEP", path=name)
    count = int((stop - start) / step + 1e-9) + 1
    if count > MAX_POINTS:
        raise InvalidSweep(f"the range has {count} values; at most {MAX_POINTS}", path=name)
    integral = all(float(v).is_integer() for v in (start, stop, step))
    out: list[Variation] = []
    for n in range(count):
        value: float | int = start + n * step
        value = int(value) if integral else round(value, 10)
        shown = format_size(value) if sizes else json.dumps(value)
        out.append(Variation(name, value, f"{name}={shown}"))
    return out


def _number(name: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            return float(text)
        except ValueError as exc:
            raise InvalidSweep(f"{text!r} is not a number", path=name) from exc

    return parse


def short_label(variation: Variation) -> str:
    """A value as a sweep shows it: ``v4.7``, ``8.0 KB``, ``mem_03`` (the label without ``NAME=``)."""
    label = variation.describe()
    return label.split("=", 1)[1] if label.startswith(variation.name + "=") else label

"""Values a runtime gives the recorder that cannot be recorded as given, and what is recorded instead.

No capture failure is ever an exception in the agent (README). A JSON value that is circular,
nested deeper than :data:`MAX_DEPTH` levels, not JSON (a set, bytes, an object, a non-string object
key) or not representable in a capture (an integer beyond ±(2**53 − 1), NaN or an infinity, a
string with a lone surrogate) is replaced by a *marker*::

    {"blackbox.unrecordable": "cycle (the value contains itself) at input.requestPayload.me"}

where the path is the capture's own field path. A text part (system prompt, memory content, final
output, reasoning) that is not text is recorded as absent (null); a scalar field of the wrong type
is recorded as null, or as the string :data:`MARKER` where the contract requires a value. Each
replacement is a *problem*: the capture names them in ``outcome.reason`` (free text in the Avro
schema, which is unchanged; the runtime's own reason is kept in front), and the recorder reports
them once per decision through ``on_error`` and ``stats.unrecordable``. The capture is sealed,
signed and verifies like any other: the markers are its content.

Two walks, neither relying on ``RecursionError``. On the caller's thread :func:`snapshot` copies a
value with an explicit depth limit and an exact-type check and no path bookkeeping (the hot path);
only when that refuses does :func:`walk` run: iterative, with paths, cycle detection by ``id()`` of
the containers on the current path, and every check above. The worker calls :func:`repair_capture`
only when sealing or encoding refused a capture (numbers and strings are checked there, not on the
caller's thread).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

from producers.evidence.parts import iter_parts

__all__ = [
    "MARKER",
    "MARKER_KEY",
    "MAX_DEPTH",
    "annotate",
    "count",
    "marker",
    "number",
    "repair_capture",
    "required_text",
    "snapshot",
    "summary",
    "text",
    "walk",
]

MARKER_KEY = "blackbox.unrecordable"
MARKER = MARKER_KEY  # the string recorded where the contract requires a string that was not given
MAX_DEPTH = 200  # containers nested inside one value given to the recorder (the value itself is 1)
MAX_LISTED = 10  # problems named in outcome.reason and in the on_error message

_SAFE_INT = 2**53 - 1
_ATOMS = frozenset({str, int, float, bool, type(None)})
_SEQUENCES = (list, tuple)


class _Refused(Exception):
    """The fast copy cannot take this value as it is; :func:`walk` will say why."""


def marker(why: str, path: str) -> dict[str, str]:
    """The JSON value recorded in place of what could not be recorded."""
    return {MARKER_KEY: f"{why} at {path}"}


# --- the caller's thread ---------------------------------------------------------------------------
def snapshot(value: Any, *, path: str, problems: list[str]) -> Any:
    """A copy of a JSON value's containers (dicts, lists; tuples become lists; leaves shared).

    Never raises. What cannot be copied as JSON is replaced by a marker and named in ``problems``.
    """
    if type(value) in _ATOMS:
        return value
    try:
        return _copy(value, 0)
    except Exception:  # _Refused; or the agent's own stack was already deep; or a Mapping raised
        pass
    return walk(value, path=path, problems=problems)


def _copy(value: Any, depth: int) -> Any:
    kind = type(value)
    if kind is dict:
        if depth >= MAX_DEPTH:
            raise _Refused
        depth += 1
        return {key: item if type(item) in _ATOMS else _copy(item, depth) for key, item in value.items()}
    if kind is list or kind is tuple:
        if depth >= MAX_DEPTH:
            raise _Refused
        depth += 1
        return [item if type(item) in _ATOMS else _copy(item, depth) for item in value]
    if kind in _ATOMS:
        return value
    if isinstance(value, Mapping):
        if depth >= MAX_DEPTH:
            raise _Refused
        return {key: _copy(item, depth + 1) for key, item in value.items()}
    raise _Refused  # not JSON (or a str/int/float subclass): the careful walk converts or marks it


def walk(value: Any, *, path: str, problems: list[str]) -> Any:
    """A checked copy of ``value``: every unrecordable part replaced by a marker named in ``problems``.

    Iterative (an explicit stack), so neither depth nor the caller's own stack can make it raise.
    """
    try:
        return _Walk(path, problems).run(value)
    except Exception as exc:  # a last line of defence: mark the whole value
        why = f"unreadable ({type(exc).__name__}: {exc})"
        problems.append(f"{why} at {path}")
        return marker(why, path)


class _Walk:
    def __init__(self, base: str, problems: list[str]) -> None:
        self.base = base
        self.problems = problems
        self.segments: list[str] = []  # path below base of the container being filled
        self.open_ids: list[int] = []  # containers on the current path (cycle detection)
        self.frames: list[tuple[Iterator[tuple[Any, Any]], dict[str, Any] | list[Any]]] = []

    def path(self, segment: str) -> str:
        path = self.base + "".join(self.segments) + segment
        if not self.base:  # a whole capture (Recorder.record): paths start at its fields
            path = path.removeprefix(".")
        return path or "the value itself"

    def refuse(self, why: str, segment: str) -> dict[str, str]:
        where = _abbreviate(self.path(segment))
        self.problems.append(f"{why} at {where}")
        return marker(why, where)

    def run(self, value: Any) -> Any:
        root = self.visit(value, "")
        while self.frames:
            items, target = self.frames[-1]
            try:
                key, item = next(items)
            except StopIteration:
                self.frames.pop()
                self.open_ids.pop()
                self.segments.pop()
                continue
            segment = f"[{key}]" if isinstance(target, list) else f".{key}"
            result = self.visit(item, segment)
            if isinstance(target, list):
                target.append(result)
            else:
                target[key] = result
        return root

    def visit(self, value: Any, segment: str) -> Any:
        """The copy of ``value`` (an atom, a marker, or a new container filled later by ``run``)."""
        kind = type(value)
        if kind is str:
            return value if _encodable(value) else self.refuse("a string with a lone surrogate", segment)
        if kind is bool or value is None:
            return value
        if kind is int:
            if -_SAFE_INT <= value <= _SAFE_INT:
                return value
            return self.refuse("an integer beyond ±(2**53 - 1) (carry it as a string)", segment)
        if kind is float:
            return value if math.isfinite(value) else self.refuse(f"{value!r} is not JSON", segment)
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return self.visit(_plain(value), segment)  # a subclass (StrEnum, IntEnum): its plain value
        if isinstance(value, (Mapping, *_SEQUENCES)):
            return self.open(value, segment)
        return self.refuse(f"{type(value).__name__} is not JSON", segment)

    def open(self, value: Any, segment: str) -> Any:
        if id(value) in self.open_ids:
            return self.refuse("cycle (the value contains itself)", segment)
        if len(self.frames) >= MAX_DEPTH:
            return self.refuse(f"nested deeper than {MAX_DEPTH} levels", segment)
        target: dict[str, Any] | list[Any]
        if isinstance(value, Mapping):
            try:
                entries = list(value.items())
            except Exception as exc:
                return self.refuse(
                    f"an unreadable {type(value).__name__} ({type(exc).__name__}: {exc})", segment
                )
            for key, _item in entries:
                if type(key) is not str or not _encodable(key):
                    return self.refuse(f"object key {_show(key)} is not a JSON string", segment)
            items: Iterator[tuple[Any, Any]] = iter(entries)
            target = {}
        else:
            items = enumerate(value)
            target = []
        self.frames.append((items, target))
        self.open_ids.append(id(value))
        self.segments.append(segment)
        return target


# --- scalar arguments (the caller's thread) -------------------------------------------------------
# Each takes the field's place as ``at`` (and ``field`` under it), joined only when reporting: these
# run for every argument on the caller's thread.
def text(value: Any, *, at: str, field: str = "", problems: list[str], part: bool = False) -> str | None:
    """A string field: the string (a subclass becomes a plain ``str``), or None for None and, with a
    problem, for anything else. ``part``: a text content part, whose Unicode the worker checks
    (large, so not on the caller's thread)."""
    if value is None or (type(value) is str and (part or value.isascii())):
        return value
    if isinstance(value, str):
        plain = value if type(value) is str else str.__str__(value)
        if part or _encodable(plain):
            return plain
        why = "a string with a lone surrogate"
    else:
        why = f"text expected, got {type(value).__name__}"
    problems.append(f"{why} at {_join(at, field)}; recorded as null")
    return None


def required_text(value: Any, *, at: str, field: str = "", problems: list[str]) -> str:
    """A string the contract requires: the string, or :data:`MARKER` (with a problem)."""
    if type(value) is str and value.isascii():
        return value
    if isinstance(value, str):
        plain = value if type(value) is str else str.__str__(value)
        if _encodable(plain):
            return plain
        why = "a string with a lone surrogate"
    else:
        why = f"text expected, got {_kind(value)}"
    problems.append(f"{why} at {_join(at, field)}; recorded as {MARKER!r}")
    return MARKER


def count(value: Any, *, at: str, field: str = "", problems: list[str]) -> int | None:
    """A whole-number field: the int (a subclass other than bool becomes a plain int), or None for
    None and, with a problem, for anything else."""
    if value is None or (type(value) is int and -_SAFE_INT <= value <= _SAFE_INT):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        plain = int.__int__(value)
        if -_SAFE_INT <= plain <= _SAFE_INT:
            return plain
    problems.append(f"a whole number expected, got {_show(value)}, at {_join(at, field)}; recorded as null")
    return None


def number(value: Any, *, at: str, field: str = "", problems: list[str]) -> int | float | None:
    """A finite number field, or None (with a problem unless it was None)."""
    if value is None or (type(value) is float and math.isfinite(value)):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return count(value, at=at, field=field, problems=problems)
    if isinstance(value, float):
        plain = float.__float__(value)
        if math.isfinite(plain):
            return plain
    problems.append(f"a finite number expected, got {_show(value)}, at {_join(at, field)}; recorded as null")
    return None


def _join(at: str, field: str) -> str:
    return f"{at}.{field}" if field else at


def _kind(value: object) -> str:
    return "None" if value is None else type(value).__name__


def _encodable(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _plain(value: str | int | float) -> str | int | float:
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    return float.__float__(value)


def _show(value: object) -> str:
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 40 else text[:37] + "..."


def _abbreviate(path: str) -> str:
    """A path nested hundreds of levels deep, shortened for people: head, how many levels, tail."""
    if len(path) <= 240:
        return path
    return f"{path[:120]}...{path[-100:]}"


# --- the worker ------------------------------------------------------------------------------------
def repair_capture(capture: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A copy of a capture whose content parts and sampling parameters are all recordable, and the
    problems found. Called by the worker after sealing or encoding refused ``capture``.

    ``capture`` is not modified (it may be the runtime's own or the builder's); only the records
    holding a replaced part are copied. The hash of a replaced part is cleared (sealing recomputes
    it); the hashes of other parts are kept, so a supplied hash of absent content survives.
    """
    problems: list[str] = []
    repaired = _skeleton(capture)
    for ref in iter_parts(repaired):
        content = ref.content
        if content is None:
            continue
        field = ref.field
        if field.kind == "text" or field.content_key == "reasoningTokens":
            why = _text_problem(content, texts=field.kind != "text")
            if why is None:
                continue
            problems.append(f"{why} at {ref.path}; recorded as absent")
            ref.holder[field.content_key] = None
        else:
            found: list[str] = []
            fixed = walk(content, path=ref.path, problems=found)
            if not found:
                continue
            problems += found
            ref.holder[field.content_key] = fixed
        ref.holder[field.hash_key] = None
    config = repaired.get("agentConfiguration")
    if isinstance(config, dict) and isinstance(config.get("samplingParameters"), Mapping):
        found = []
        fixed = walk(
            config["samplingParameters"], path="agentConfiguration.samplingParameters", problems=found
        )
        if found:
            problems += found
            config["samplingParameters"] = fixed
    return repaired, problems


def _text_problem(content: Any, *, texts: bool) -> str | None:
    """Why ``content`` is not a text part (``texts``: a list of them), or None if it is one."""
    if texts and type(content) is not list:
        return f"a list of text expected, got {type(content).__name__}"
    for value in content if texts else (content,):
        if type(value) is not str:
            return f"text expected, got {type(value).__name__}"
        if not _encodable(value):
            return "text with a lone surrogate"
    return None


def _skeleton(capture: dict[str, Any]) -> dict[str, Any]:
    """``capture`` with its sections and the records in their lists copied (content shared)."""
    out = dict(capture)
    for name, section in capture.items():
        if not isinstance(section, dict):
            continue
        copied = out[name] = dict(section)
        for key, records in section.items():
            if isinstance(records, list):
                copied[key] = [dict(r) if isinstance(r, dict) else r for r in records]
    return out


def summary(problems: list[str]) -> str:
    """The problems as one line: the first :data:`MAX_LISTED`, then how many more."""
    shown = "; ".join(problems[:MAX_LISTED])
    more = len(problems) - MAX_LISTED
    return f"{shown}; and {more} more" if more > 0 else shown


def annotate(capture: dict[str, Any], problems: list[str]) -> None:
    """Name the problems in the capture's ``outcome.reason`` (after the runtime's own reason)."""
    outcome = capture.get("outcome")
    if not isinstance(outcome, dict):
        return
    note = f"{MARKER_KEY}: {summary(problems)}"
    reason = outcome.get("reason")
    capture["outcome"] = {**outcome, "reason": f"{reason} | {note}" if isinstance(reason, str) else note}

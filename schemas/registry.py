"""Every Avro schema blackbox knows, found by walking ``schemas/`` for ``*.avsc`` files.

A schema file names its kind and version: ``capture/v<N>.avsc`` is kind ``capture``, version N;
``events/<kind>_v<N>.avsc`` is kind ``<kind>``. Nothing is registered by hand, so adding
``capture/v2.avsc`` is all it takes for consumers to read v2 messages (and, once v2 is the
latest, to read every older version into v2 by Avro schema resolution).

The fingerprint is the 64-bit Rabin fingerprint (CRC-64-AVRO) of the schema's Parsing Canonical
Form, as the 8 little-endian bytes that Avro single-object encoding puts after ``C3 01``. The
canonical form drops docs, defaults and aliases, so editing those never changes a fingerprint.

This module also holds the compatibility checker used by the tests and by anyone adding a
version: :func:`compatibility_problems` applies the Avro specification's schema-resolution rules
statically (every reachable branch, not only those a sample datum happens to use).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastavro import parse_schema
from fastavro.schema import fingerprint as _avro_fingerprint
from fastavro.schema import to_parsing_canonical_form

SCHEMA_ROOT = Path(__file__).resolve().parent

_CAPTURE_FILE = re.compile(r"^v(?P<version>[1-9][0-9]*)\.avsc$")
_EVENT_FILE = re.compile(r"^(?P<kind>[a-z][a-z0-9_]*)_v(?P<version>[1-9][0-9]*)\.avsc$")


class SchemaRegistryError(RuntimeError):
    """The ``.avsc`` files on disk are inconsistent (bad name, duplicate fingerprint, bad schema).

    A programming error in the repository, not bad input, so it is not a BlackboxError.
    """


@dataclass(frozen=True, slots=True)
class SchemaInfo:
    """One versioned schema file."""

    kind: str
    """``capture``, ``flag``, ``claim_check`` (from the file name)."""
    version: int
    name: str
    """``<kind>/v<version>``, e.g. ``capture/v1``: what :class:`schemas.codec.Decoded` reports."""
    path: Path
    raw: dict[str, Any]
    """The schema JSON as written in the file (docs and defaults included); do not mutate."""
    parsed: Any
    """The schema parsed once by ``fastavro.parse_schema``."""
    canonical: str
    """Avro Parsing Canonical Form."""
    fingerprint: bytes
    """CRC-64-AVRO of ``canonical``, 8 bytes little-endian (as on the wire)."""


def rabin_fingerprint(canonical_form: str) -> bytes:
    """CRC-64-AVRO of a parsing canonical form, as the 8 little-endian bytes used on the wire."""
    return bytes.fromhex(_avro_fingerprint(canonical_form, "CRC-64-AVRO"))


def _kind_and_version(path: Path, root: Path) -> tuple[str, int]:
    relative = path.relative_to(root)
    match = _CAPTURE_FILE.match(path.name)
    if match and len(relative.parts) == 2:
        return relative.parts[0], int(match["version"])
    match = _EVENT_FILE.match(path.name)
    if match:
        return match["kind"], int(match["version"])
    raise SchemaRegistryError(
        f"{relative}: schema files must be named <kind>/v<N>.avsc or events/<kind>_v<N>.avsc"
    )


def load_schema_file(path: Path, *, root: Path = SCHEMA_ROOT) -> SchemaInfo:
    kind, version = _kind_and_version(path, root)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        parsed = parse_schema(raw, named_schemas={})
    except Exception as exc:  # any parse failure is a broken repository file
        raise SchemaRegistryError(f"{path}: not a valid Avro schema: {exc}") from exc
    canonical = to_parsing_canonical_form(parsed)
    return SchemaInfo(
        kind=kind,
        version=version,
        name=f"{kind}/v{version}",
        path=path,
        raw=raw,
        parsed=parsed,
        canonical=canonical,
        fingerprint=rabin_fingerprint(canonical),
    )


def discover(root: Path = SCHEMA_ROOT) -> dict[str, SchemaInfo]:
    """Every schema under ``root``, keyed by name (``capture/v1``), sorted by kind then version."""
    found: dict[str, SchemaInfo] = {}
    by_fingerprint: dict[bytes, str] = {}
    for path in sorted(root.rglob("*.avsc")):
        info = load_schema_file(path, root=root)
        if info.name in found:
            raise SchemaRegistryError(f"{path}: {info.name} is defined twice ({found[info.name].path})")
        other = by_fingerprint.get(info.fingerprint)
        if other is not None:
            # Same canonical form: the wire cannot tell them apart. Docs/defaults-only edits
            # belong in the existing file, not in a new version.
            raise SchemaRegistryError(
                f"{path}: {info.name} has the same fingerprint as {other} (no wire-level change)"
            )
        by_fingerprint[info.fingerprint] = info.name
        found[info.name] = info
    return dict(sorted(found.items(), key=lambda item: (item[1].kind, item[1].version)))


def latest_by_kind(schemas: Mapping[str, SchemaInfo]) -> dict[str, SchemaInfo]:
    latest: dict[str, SchemaInfo] = {}
    for info in schemas.values():
        current = latest.get(info.kind)
        if current is None or info.version > current.version:
            latest[info.kind] = info
    return latest


# --- compatibility -----------------------------------------------------------------------------

_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_PROMOTIONS = {
    "int": {"long", "float", "double"},
    "long": {"float", "double"},
    "float": {"double"},
    "string": {"bytes"},
    "bytes": {"string"},
}


def _expand(schema: Any) -> Any:
    """Parse and inline named references so the checker sees whole definitions."""
    return parse_schema(schema, named_schemas={}, expand=True)


def _type_name(schema: Any) -> str:
    if isinstance(schema, list):
        return "union"
    if isinstance(schema, dict):
        inner = schema["type"]
        return _type_name(inner) if isinstance(inner, dict | list) else str(inner)
    return str(schema)


def _unqualified(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _names_match(writer: Mapping[str, Any], reader: Mapping[str, Any]) -> bool:
    aliases = set(reader.get("aliases", ()))
    return (
        _unqualified(writer["name"]) == _unqualified(reader["name"])
        or writer["name"] in aliases
        or _unqualified(writer["name"]) in {_unqualified(alias) for alias in aliases}
    )


def _check(writer: Any, reader: Any, where: str, problems: list[str]) -> None:
    w_type, r_type = _type_name(writer), _type_name(reader)
    if w_type == "union":
        # Backward compatibility must hold for every branch a writer may have used.
        for branch in writer:
            _check(branch, reader, f"{where}<{_type_name(branch)}>", problems)
        return
    if r_type == "union":
        attempts: list[list[str]] = []
        for branch in reader:
            branch_problems: list[str] = []
            _check(writer, branch, where, branch_problems)
            if not branch_problems:
                return
            attempts.append(branch_problems)
        problems.append(f"{where}: writer type {w_type} matches no branch of the reader's union")
        return
    if w_type in _PRIMITIVES and r_type in _PRIMITIVES:
        if w_type != r_type and r_type not in _PROMOTIONS.get(w_type, ()):
            problems.append(f"{where}: writer type {w_type} cannot be read as {r_type}")
        return
    if w_type != r_type:
        problems.append(f"{where}: writer type {w_type} cannot be read as {r_type}")
        return
    if w_type == "array":
        _check(writer["items"], reader["items"], f"{where}[]", problems)
    elif w_type == "map":
        _check(writer["values"], reader["values"], f"{where}{{}}", problems)
    elif w_type == "fixed":
        if not _names_match(writer, reader) or writer["size"] != reader["size"]:
            problems.append(f"{where}: fixed {writer['name']} does not match {reader['name']}")
    elif w_type == "enum":
        if not _names_match(writer, reader):
            problems.append(f"{where}: enum {writer['name']} does not match {reader['name']}")
        elif "default" not in reader:
            missing = [s for s in writer["symbols"] if s not in reader["symbols"]]
            if missing:
                problems.append(f"{where}: reader enum lacks symbols {missing} and has no default")
    elif w_type == "record":
        if not _names_match(writer, reader):
            problems.append(f"{where}: record {writer['name']} does not match {reader['name']}")
            return
        writer_fields = {field["name"]: field for field in writer["fields"]}
        for field in reader["fields"]:
            candidates = [field["name"], *field.get("aliases", ())]
            source = next((writer_fields[n] for n in candidates if n in writer_fields), None)
            path = f"{where}.{field['name']}" if where else field["name"]
            if source is None:
                if "default" not in field:
                    problems.append(f"{path}: reader field is missing in the writer and has no default")
            else:
                _check(source["type"], field["type"], path, problems)
    else:
        problems.append(f"{where}: unsupported type {w_type}")


def compatibility_problems(writer: Any, reader: Any) -> list[str]:
    """Why data written with ``writer`` cannot be read with ``reader`` (empty when it can).

    Both are schema JSON (dicts as in an ``.avsc`` file). Implements the Avro specification's
    schema-resolution rules, checking every union branch of the writer.
    """
    problems: list[str] = []
    _check(_expand(writer), _expand(reader), "", problems)
    return problems


def backward_transitive_problems(schemas: Mapping[str, SchemaInfo], kind: str) -> dict[str, list[str]]:
    """For each older version of ``kind``: the problems reading it with the latest version."""
    versions = sorted((info for info in schemas.values() if info.kind == kind), key=lambda i: i.version)
    if not versions:
        raise KeyError(kind)
    latest = versions[-1]
    return {info.name: compatibility_problems(info.raw, latest.raw) for info in versions[:-1]}

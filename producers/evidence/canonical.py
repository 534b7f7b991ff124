"""RFC 8785 (JCS) canonical JSON bytes and the ``sha256:<hex>`` content hash.

The reference serializer is the ``rfc8785`` package. It is pure Python and, measured here, costs
about 265 µs for the 4 KB example capture — more than the whole producer budget per capture — so
:func:`canonical_json` first tries a fast path that is *provably byte-identical* and falls back to
the package whenever the proof does not apply:

* Object keys must be ``str`` and contain no character above U+FFFF. RFC 8785 orders keys by their
  UTF-16 code units; for BMP-only strings that order equals code-point order, which is what
  ``sort_keys=True`` uses. (A key with an astral character, e.g. an emoji, goes to the slow path.)
* Strings: ``json`` with ``ensure_ascii=False`` escapes exactly what RFC 8785 §3.2.2.2 escapes
  (``"``, ``\\``, the short forms ``\\b \\f \\n \\r \\t``, other U+0000–U+001F as lowercase ``\\u00xx``)
  and nothing else. Lone surrogates fail the UTF-8 encode and go to the slow path, which rejects them.
* ``int`` within ±(2**53 − 1): both print ``str(n)``. Outside that range the package (and so
  blackbox) refuses the value — see "numbers" below.
* ``float``: integral values within ±(2**53 − 1) (including −0.0) serialize in ES6 as the integer,
  so they are replaced by ``int(f)`` in a copy. Python's ``repr`` (shortest round-trip digits, the
  same digits ES6 picks) already has the ES6 *form* for non-integral values with ``|f| >= 1e-4``
  (positional) or ``|f| < 1e-9`` (exponent with two or more digits, e.g. ``1e-300``), and for
  ``|f| >= 1e21`` (``1e+21``); those pass through unchanged. The rest (1e-9 <= |f| < 1e-4, where
  Python writes ``1e-05`` and ES6 ``0.00001``; integral 2**53 <= |f| < 1e21; NaN; infinities) take
  the slow path.
* Only ``dict``, ``list``, ``tuple``, ``str``, ``int``, ``float``, ``bool`` and ``None`` (exact types)
  take the fast path.

``tests/producers/evidence/test_evidence_canonical.py`` checks both paths agree on the RFC 8785
vectors and on thousands of generated documents built to hit every boundary above.

Native core: when :func:`producers.native.core` is loaded, :func:`canonical_json`,
:func:`json_hash`, :func:`fast_json_hash` and :func:`text_hash` ask it first (Rust, DESIGN decision
18). It prints only what it can print exactly as the code here does and returns ``None`` for
anything else, which then takes the path above and raises its own error, so the bytes (and the
errors) do not depend on which one ran; ``tests/producers/native`` proves it.

Numbers: JSON numbers are IEEE-754 doubles in RFC 8785. An integer beyond ±(2**53 − 1) cannot be
canonicalized without silently changing its value (two different payloads would hash the same),
NaN and infinities are not JSON at all. blackbox refuses such content with a :class:`ContractError`
naming the part; runtimes should carry big identifiers (snowflake ids, 64-bit counters) as strings.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import marshal
from typing import Any

import rfc8785

from producers import native
from schemas.errors import ContractError

HASH_PREFIX = "sha256:"

_SAFE_INT = 2**53 - 1
_REFUSED = (rfc8785.CanonicalizationError, UnicodeError)
_ENCODER = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False, check_circular=False
)


def _refuse(value: object) -> object:
    raise TypeError(f"{type(value).__name__} is not JSON")


_PLAIN_ENCODER = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), allow_nan=False, check_circular=False
)

# What _ENCODER.encode does, minus building a C encoder on every call (a third of a small encode).
_c_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)
_c_encode_basestring: Any = getattr(json.encoder, "c_encode_basestring", None)
if _c_make_encoder is not None and _c_encode_basestring is not None:  # CPython
    _C_ENCODE = _c_make_encoder(None, _refuse, _c_encode_basestring, None, ":", ",", True, False, False)
    _C_PLAIN = _c_make_encoder(None, _refuse, _c_encode_basestring, None, ":", ",", False, False, False)

    def _encode(value: Any) -> str:
        return "".join(_C_ENCODE(value, 0))

    def _plain(value: Any) -> str:
        return "".join(_C_PLAIN(value, 0))

else:  # pragma: no cover - other interpreters

    def _encode(value: Any) -> str:
        return _ENCODER.encode(value)

    def _plain(value: Any) -> str:
        return _PLAIN_ENCODER.encode(value)


class _SlowPath(Exception):
    """The fast path cannot prove its output equals RFC 8785 for this value."""


def canonical_json(value: Any, *, path: str = "", omit_null_members: bool = False) -> bytes:
    """RFC 8785 canonical UTF-8 bytes of ``value``; ``ContractError(path=path)`` if it has none.

    ``omit_null_members=True`` first drops every object member whose value is ``null``, at every
    depth (list elements are kept) — the manifest's rule, see :mod:`producers.evidence.manifest`.
    """
    core = native.core()
    if core is not None:
        data: bytes | None = core.canonical_json(value, omit_null_members=omit_null_members)
        if data is not None:
            return data
    return python_canonical_json(value, path=path, omit_null_members=omit_null_members)


def python_canonical_json(value: Any, *, path: str = "", omit_null_members: bool = False) -> bytes:
    """:func:`canonical_json` without the native core: the fast path, else the ``rfc8785`` package."""
    try:
        normalized = _normalize(value, omit_null_members)
        return _encode(normalized).encode("utf-8")
    except (_SlowPath, UnicodeEncodeError, ValueError, TypeError):
        pass
    except RecursionError as exc:
        raise ContractError("JSON value is nested too deeply (or is circular)", path=path) from exc
    if omit_null_members:
        try:
            value = omit_nulls(value)
        except RecursionError as exc:
            raise ContractError("JSON value is nested too deeply (or is circular)", path=path) from exc
    return reference_canonical_json(value, path=path)


def normalize(value: Any, *, omit_null_members: bool = False) -> Any:
    """``value`` rewritten so that :func:`encode_normalized` prints its RFC 8785 bytes, or ``None``.

    ``None`` means only the slow path can canonicalize ``value`` (or nothing can; for a ``None``
    value both readings give ``null``). The result
    shares unchanged containers with ``value``; never mutate it except for dicts you know to be
    fresh. Used where one normalized tree serves several encodings (manifest and Merkle leaves).
    """
    try:
        return _normalize(value, omit_null_members)
    except (_SlowPath, RecursionError):
        return None


def normalize_stripped(
    value: dict[Any, Any], drop: frozenset[str], omit_null_members: bool
) -> dict[Any, Any]:
    """``normalize({k: v for k, v in value.items() if k not in drop}, ...)`` as a fresh dict, one pass.

    For internal use by :func:`producers.evidence.manifest.normalized_manifest`; raises
    ``_SlowPath`` (or ``RecursionError``) exactly where :func:`normalize` would return ``None``.
    """
    out: dict[Any, Any] = {}
    for key, item in value.items():
        if key in drop:
            continue
        if type(key) is not str:
            raise _SlowPath
        if not key.isascii() and max(key) > "\uffff":
            raise _SlowPath
        kind = type(item)
        if kind is str or kind is bool:
            out[key] = item
        elif item is None:
            if not omit_null_members:
                out[key] = item
        else:
            out[key] = _normalize(item, omit_null_members)
    return out


def encode_normalized(value: Any) -> bytes:
    """RFC 8785 bytes of a value returned by :func:`normalize` (``UnicodeEncodeError`` on lone surrogates)."""
    return _encode(value).encode("utf-8")


def omit_nulls(value: Any) -> Any:
    """A copy of ``value`` without object members whose value is ``None``, at every depth."""
    if isinstance(value, dict):
        return {key: omit_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, (list, tuple)):
        return [omit_nulls(item) for item in value]
    return value


def reference_canonical_json(value: Any, *, path: str = "") -> bytes:
    """The ``rfc8785`` package's output (the slow path), with its errors as ``ContractError``.

    The error's ``path`` is ``path`` extended to the offending member, e.g. ``input.requestPayload.ids[3]``.
    """
    try:
        return rfc8785.dumps(value)
    except rfc8785.IntegerDomainError as exc:
        raise ContractError(
            f"{exc}; carry integers beyond ±(2**53 - 1) as strings (RFC 8785 numbers are doubles)",
            path=_join(path, _locate(value, "")),
        ) from exc
    except (rfc8785.CanonicalizationError, UnicodeError) as exc:  # a lone-surrogate key is UnicodeError
        raise ContractError(
            f"not canonicalizable as RFC 8785 JSON: {exc}", path=_join(path, _locate(value, ""))
        ) from exc
    except RecursionError as exc:
        raise ContractError("JSON value is nested too deeply (or is circular)", path=path) from exc


def _locate(value: Any, at: str) -> str:
    """The relative path of the first member ``rfc8785`` refuses ("" when it is ``value`` itself)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{at}[{key!r}]"
            child = f"{at}.{key}" if at else key
            try:
                rfc8785.dumps(key)
            except _REFUSED:
                return child
            try:
                rfc8785.dumps(item)
            except _REFUSED:
                return _locate(item, child)
        return at
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            try:
                rfc8785.dumps(item)
            except _REFUSED:
                return _locate(item, f"{at}[{index}]")
    return at


def _join(path: str, relative: str) -> str:
    if not relative:
        return path
    if not path or relative.startswith("["):
        return path + relative
    return f"{path}.{relative}"


def content_hash(data: bytes) -> str:
    """``"sha256:" + hex(sha256(data))`` — the form of every hash field in a capture."""
    return HASH_PREFIX + hashlib.sha256(data).hexdigest()


def text_hash(text: str) -> str:
    """Hash of a text part: its UTF-8 bytes, exactly as given (``UnicodeEncodeError`` on a lone surrogate)."""
    core = native.core()
    if core is not None:
        digest: str | None = core.text_hash(text)
        if digest is not None:
            return digest
    return HASH_PREFIX + hashlib.sha256(text.encode("utf-8")).hexdigest()


def json_hash(value: Any, *, path: str = "") -> str:
    """Hash of a JSON part: its RFC 8785 canonical bytes."""
    core = native.core()
    if core is not None:
        digest: str | None = core.json_hash(value)
        if digest is not None:
            return digest
    return HASH_PREFIX + hashlib.sha256(python_canonical_json(value, path=path)).hexdigest()


def fast_json_hash(value: Any) -> str | None:
    """:func:`json_hash` when the native core or the fast path applies, else ``None`` (then call
    :func:`json_hash`).

    Exactly the first half of :func:`canonical_json`: when it returns a hash, :func:`json_hash`
    returns the same one (it would take the same path); it never raises for bad content.
    """
    core = native.core()
    if core is not None:
        digest: str | None = core.json_hash(value)
        if digest is not None:
            return digest
    try:
        data = _encode(_normalize(value, False)).encode("utf-8")
    except (_SlowPath, UnicodeEncodeError, ValueError, TypeError, RecursionError):
        return None
    return HASH_PREFIX + hashlib.sha256(data).hexdigest()


class JsonHashCache:
    """Remembers the hash of large JSON values that repeat verbatim (an agent's tool schema).

    The key is the value's :mod:`marshal` bytes (a C walk, several times cheaper than printing
    it). ``marshal`` serializes only exact built-in types (a subclass raises ``ValueError``: no
    caching) and faithfully — ``marshal.loads(key) == value`` with the same types, ``bool`` vs
    ``int`` vs ``float`` and ``-0.0`` kept apart, dict insertion order kept — so two values with the
    same key are indistinguishable to :func:`json_hash`, and a hit returns exactly the hash
    :func:`json_hash` would compute. (The bytes may also depend on string interning and shared
    references; that only turns equal values into separate entries, never a wrong hit.) Only
    successfully computed hashes are stored. Thread-safe (worst case, a race recomputes). Values
    whose key is shorter than ``min_chars`` bytes are not cached.
    """

    def __init__(self, *, max_entries: int = 32, min_chars: int = 1024, max_chars: int = 1 << 20) -> None:
        self._entries: dict[bytes, str] = {}
        self._max_entries = max_entries
        self._min_chars = min_chars
        self._max_chars = max_chars

    def json_hash(self, value: Any, *, path: str = "") -> str:
        try:
            text = marshal.dumps(value)
        except (TypeError, ValueError, RecursionError):
            return json_hash(value, path=path)
        if not self._min_chars <= len(text) <= self._max_chars:
            return json_hash(value, path=path)
        cached = self._entries.get(text)
        if cached is None:
            cached = json_hash(value, path=path)
            if len(self._entries) >= self._max_entries:
                with contextlib.suppress(RuntimeError, StopIteration):  # another thread raced us
                    self._entries.pop(next(iter(self._entries)), None)
            self._entries[text] = cached
        return cached


def is_hash(value: object) -> bool:
    """True for a well-formed ``sha256:<64 lowercase hex>`` string."""
    return (
        type(value) is str
        and len(value) == 71
        and value.startswith(HASH_PREFIX)
        and all(c in "0123456789abcdef" for c in value[7:])
    )


# --- the fast path -------------------------------------------------------------------------------
def _normalize(value: Any, omit: bool) -> Any:
    """``value`` itself when ``json`` already prints it canonically, a fixed copy, or ``_SlowPath``."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return value
    if kind is dict:
        return _normalize_dict(value, omit)
    if kind is list or kind is tuple:
        return _normalize_list(value, omit)
    if kind is int:
        if -_SAFE_INT <= value <= _SAFE_INT:
            return value
        raise _SlowPath
    if kind is float:
        return _normalize_float(value)
    raise _SlowPath


def _normalize_float(value: float) -> float | int:
    magnitude = abs(value)
    if value.is_integer():  # False for NaN and the infinities
        if magnitude <= _SAFE_INT:
            return int(value)
        if magnitude >= 1e21:  # repr is "d.ddde+XX", as in ES6
            return value
        raise _SlowPath
    # Non-integral, so |value| < 2**52: repr is positional from 1e-4 up, and "d.ddde-XX" with a
    # two-digit exponent below 1e-9 — both exactly the ES6 form. NaN fails both comparisons.
    if 1e-4 <= magnitude < 1e16 or magnitude < 1e-9:
        return value
    raise _SlowPath


def _normalize_dict(value: dict[Any, Any], omit: bool) -> dict[Any, Any]:
    fixed: dict[Any, Any] | None = None
    for key, item in value.items():
        if type(key) is not str:
            raise _SlowPath
        if not key.isascii() and max(key) > "\uffff":
            raise _SlowPath
        kind = type(item)
        if kind is str or kind is bool:
            continue
        if item is None:
            if omit:
                if fixed is None:
                    fixed = dict(value)
                del fixed[key]
            continue
        new = _normalize(item, omit)
        if new is not item:
            if fixed is None:
                fixed = dict(value)
            fixed[key] = new
    return value if fixed is None else fixed


def _normalize_list(value: list[Any] | tuple[Any, ...], omit: bool) -> list[Any] | tuple[Any, ...]:
    fixed: list[Any] | None = None
    for index, item in enumerate(value):
        kind = type(item)
        if kind is str or kind is bool or item is None:
            continue
        new = _normalize(item, omit)
        if new is not item:
            if fixed is None:
                fixed = list(value)
            fixed[index] = new
    return value if fixed is None else fixed

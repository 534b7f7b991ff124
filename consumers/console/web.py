"""What every console response shares: the templates, the security headers, CSRF, and how hostile
text becomes inert HTML.

Capture content is attacker-controlled (an agent's input is a user's input). Templates autoescape
everything; :func:`inert` additionally shows control, bidi and other invisible format characters as a
visible ``U+XXXX`` mark instead of letting them reorder or hide text (the exact bytes stay available
as a download). Content is never put in a URL, a header or a log line.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import re
import secrets
import unicodedata
from collections.abc import Mapping
from datetime import UTC, datetime
from importlib import resources
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup, escape
from starlette.responses import HTMLResponse, Response

__all__ = [
    "CSP",
    "SECURITY_HEADERS",
    "csrf_token",
    "html",
    "inert",
    "json_response",
    "pre_csrf",
    "static_file",
    "svg",
]

# Script only from the console's own static files (no inline script, no eval); it fetches only from here.
CSP = (
    "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; img-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
}
STATIC = {
    "console.css": "text/css; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
}
_VISIBLE_WHITESPACE = frozenset("\n\t")


def _mark(char: str) -> str:
    return f"U+{ord(char):04X}"


@functools.cache
def _hidden() -> re.Pattern[str]:
    """Control (Cc), format (Cf: bidi overrides, zero-width, ...), line/paragraph separators, private
    use and surrogates, except newline and tab: one character class, built once from the Unicode data."""
    hidden = [
        chr(c)
        for c in range(0x10000)
        if unicodedata.category(chr(c)) in ("Cc", "Cf", "Zl", "Zp", "Cs")
        and chr(c) not in _VISIBLE_WHITESPACE
    ]
    # private use, and the format characters beyond the BMP (Unicode 15: Egyptian, shorthand, music, tags)
    private = (
        "\\ue000-\\uf8ff\\U000f0000-\\U000ffffd\\U00100000-\\U0010fffd\\U000110bd\\U000110cd"
        "\\U00013430-\\U0001343f\\U0001bca0-\\U0001bca3\\U0001d173-\\U0001d17a\\U000e0001\\U000e0020-\\U000e007f"
    )
    return re.compile("[" + "".join(re.escape(c) for c in hidden) + private + "]")


def inert(value: object) -> Markup:
    """``value`` as escaped HTML text with every invisible or reordering character shown as a mark."""
    text = value if isinstance(value, str) else "" if value is None else str(value)
    escaped = str(escape(text))  # escaping adds no hidden character, so marking after it is safe
    pattern = _hidden()
    if not pattern.search(escaped):
        return Markup(escaped)
    return Markup(
        pattern.sub(
            lambda m: f'<span class="cc" title="{_mark(m.group())}">{_mark(m.group())}</span>', escaped
        )
    )


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)


def when(value: Any) -> str:
    if isinstance(value, datetime):
        value = value if value.tzinfo else value.replace(tzinfo=UTC)
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return "" if value is None else str(value)


_env = Environment(
    loader=PackageLoader("consumers.console", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)
_env.filters["inert"] = inert
_env.filters["pretty_json"] = pretty_json
_env.filters["when"] = when


def html(
    template: str, *, status: int = 200, headers: Mapping[str, str] | None = None, **values: Any
) -> HTMLResponse:
    body = _env.get_template(template).render(**values)
    return HTMLResponse(body, status_code=status, headers={**SECURITY_HEADERS, **(headers or {})})


def svg(template: str, **values: Any) -> Response:
    """An image drawn by a template (escaped like every page); shown with ``<img>``, so no script runs."""
    body = _env.get_template(template).render(**values)
    return Response(body, media_type="image/svg+xml; charset=utf-8", headers=SECURITY_HEADERS)


def json_response(value: Mapping[str, Any], *, status: int = 200) -> Response:
    """What the console's script fetches: JSON with the pages' security headers."""
    body = json.dumps(value, ensure_ascii=False).encode("utf-8")
    return Response(body, status_code=status, media_type="application/json", headers=SECURITY_HEADERS)


def secured(response: Response) -> Response:
    response.headers.update(SECURITY_HEADERS)
    return response


def static_file(name: str) -> tuple[bytes, str] | None:
    """A file of the console's fixed static set (never a path the request names)."""
    media = STATIC.get(name)
    if media is None:
        return None
    return resources.files("consumers.console").joinpath("static", name).read_bytes(), media


def csrf_token(session_cookie: str) -> str:
    """The CSRF token of a session: derived from its secret, so it needs no storage and dies with it."""
    return hmac.new(session_cookie.encode("utf-8"), b"blackbox console csrf", hashlib.sha256).hexdigest()


def pre_csrf() -> str:
    """A fresh double-submit token for the sign-in forms (before any session exists)."""
    return secrets.token_urlsafe(24)


def same(a: str, b: str) -> bool:
    return bool(a) and bool(b) and hmac.compare_digest(a.encode("utf-8"), b.encode("utf-8"))
